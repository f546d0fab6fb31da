// The stage profiler's sums and counts, and how a profiled run reports the persistent kernel's phases.
#include "bench/measurement.h"
#include "catch.h"
#include "core/profiler.h"
#include "ops/ops.h"

namespace seqtrans::bench {

TEST_CASE("profiler: each stage's seconds add up and its count is the times it was added", "[bench]") {
  Profiler& profiler = Profiler::instance();
  profiler.reset();
  profiler.add("gemm", 0.25);
  profiler.add("gemm", 0.5);
  profiler.add("attention", 1.0);
  CHECK(profiler.stages().at("gemm") == 0.75);
  CHECK(profiler.counts().at("gemm") == 2);
  CHECK(profiler.counts().at("attention") == 1);
  profiler.reset();
  CHECK(profiler.stages().empty());
  CHECK(profiler.counts().empty());
}

TEST_CASE("profile_run: the persistent kernel's phases in the kernel's order, with their counts", "[bench]") {
  // Recorded out of order, as a map would sort them: FFN outer before QKV, the launch before the final norm.
  const StageProfile profile = profile_run([](double& seconds) {
    Profiler& profiler = Profiler::instance();
    profiler.add(ops::kPersistentDecoderLaunchPhase, 0.004);
    profiler.add("persistent: FFN outer", 0.002);
    profiler.add("persistent: FFN outer", 0.002);
    profiler.add(ops::kPersistentDecoderFinalPhase, 0.001);
    profiler.add("persistent: QKV", 0.003);
    profiler.add("encoder", 0.01);
    seconds = 0.05;
    return 0.04;
  });
  REQUIRE(profile.persistent_phases.size() == 4);
  CHECK(profile.persistent_phases[0].name == "QKV");
  CHECK(profile.persistent_phases[1].name == "FFN outer");
  CHECK(profile.persistent_phases[1].count == 2);
  CHECK(profile.persistent_phases[1].seconds == Approx(0.004));
  CHECK(profile.persistent_phases[2].name == "final norm");
  CHECK(profile.persistent_phases[3].name == "launch and return");
  // Every phase counts toward the "persistent decoder" stage.
  for (const auto& [name, seconds] : profile.stages)
    if (name == "persistent decoder") CHECK(seconds == Approx(0.012));
  CHECK(profile.search_seconds == 0.04);
}

}  // namespace seqtrans::bench

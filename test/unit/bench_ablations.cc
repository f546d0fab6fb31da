// Which ablations `seqtrans bench --ablations` measures: the forced hierarchical top-k only where the GPU's
// group filter takes the vocabulary (NLLB's 256,206 ids included), so that no point stops the run.
#include "bench/ablations.h"

#include <algorithm>

#include "catch.h"
#include "core/error.h"

namespace seqtrans::bench {
namespace {

bool measures_hierarchical(Device device, int64_t target_vocab) {
  const std::vector<Ablation> list = ablations(EngineSettings{}, device, Workload::SyntheticBatch, target_vocab);
  return std::any_of(list.begin(), list.end(),
                     [](const Ablation& ablation) { return ablation.name == "no-hierarchical-topk"; });
}

}  // namespace

TEST_CASE("bench ablations: the hierarchical top-k only at vocabularies its group filter takes", "[bench]") {
  CHECK(measures_hierarchical(Device::CUDA, 32000));
  CHECK(measures_hierarchical(Device::CUDA, 256206));  // NLLB-200
  CHECK(measures_hierarchical(Device::CUDA, 262144));
  CHECK_FALSE(measures_hierarchical(Device::CUDA, 262145));
  CHECK_FALSE(measures_hierarchical(Device::CUDA, 100));  // fewer groups than the k beam search may ask for
  CHECK(measures_hierarchical(Device::CPU, 100));          // the CPU scans whatever is asked
  CHECK(measures_hierarchical(Device::CPU, 1000000));
}

TEST_CASE("bench --ablation: the named ablations in the list's order, and an error for one the run lacks", "[bench]") {
  const std::vector<Ablation> list = ablations(EngineSettings{}, Device::CUDA, Workload::RealFile, 32000);
  CHECK(select_ablations(list, {}).size() == list.size());
  const std::vector<Ablation> chosen = select_ablations(list, {"no-overlapped-launches", "naive-batching"});
  REQUIRE(chosen.size() == 2);
  CHECK(chosen[0].name == "naive-batching");  // the list's order, not the request's
  CHECK(chosen[1].name == "no-overlapped-launches");
  CHECK_FALSE(chosen[1].with_idea.tuning == chosen[1].without_idea.tuning);
  // A GPU-only idea on the CPU, and a name no run has.
  const std::vector<Ablation> cpu = ablations(EngineSettings{}, Device::CPU, Workload::SyntheticBatch, 32000);
  CHECK_THROWS_AS(select_ablations(cpu, {"no-cuda-graphs"}), Error);
  CHECK_THROWS_AS(select_ablations(list, {"no-such-idea"}), Error);
  // What the flag accepts: every name of every device's list, once.
  const std::vector<std::string> names = ablation_names();
  for (const char* name : {"batching shrinking", "no-overlapped-launches", "no-cuda-graphs", "no-packed-weights"})
    CHECK(std::count(names.begin(), names.end(), name) == 1);
}

}  // namespace seqtrans::bench

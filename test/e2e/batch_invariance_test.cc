// --batch-invariant: a line's translation and score must not depend on the other lines decoded beside it.
// The bundled model translates the golden inputs with --with-scores at --max-batch-size 1, 7, 64 and 1000
// under both batching modes, greedy and beam 4, and every run must print the same bytes as the first: on
// the CPU, and on the GPU in fp16. The default paths are measured and printed, not held: their small-batch
// kernels (OpenBLAS's small-matrix kernel on the CPU) sum in other orders, which is why the mode exists.
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "catch.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/process.h"

using namespace seqtrans::testing;

namespace {

std::string translate(const std::vector<std::string>& flags, const std::string& input) {
  std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m",
                                        std::string(SEQTRANS_SOURCE_DIR) + "/models/opus-demo-en-de.seqtrans",
                                        "--quiet", "--with-scores", "--max-batch-tokens", "100000"};
  arguments.insert(arguments.end(), flags.begin(), flags.end());
  const ProcessResult result = run_process(arguments, input, 600);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  return result.out;
}

size_t identical_lines(const std::string& a, const std::string& b) {
  const std::vector<std::string> x = split_lines(a), y = split_lines(b);
  size_t same = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) same += x[i] == y[i];
  return same;
}

struct Comparison {
  size_t lines = 0;
  size_t worst_identical = 0;  // over the runs, lines identical to the first run's
};

// Every (batching mode, batch size) run of one search against the first; `label` names it in the log.
Comparison compare_batchings(const std::vector<std::string>& device, const std::string& beam, const std::string& input,
                             const std::string& label) {
  Comparison comparison;
  comparison.lines = count_lines(input);
  comparison.worst_identical = comparison.lines;
  std::string reference;
  for (const std::string mode : {"iteration", "shrinking"})
    for (const std::string batch : {"1", "7", "64", "1000"}) {
      std::vector<std::string> flags = device;
      flags.insert(flags.end(), {"--beam-size", beam, "--batching", mode, "--max-batch-size", batch});
      const std::string output = translate(flags, input);
      REQUIRE(count_lines(output) == comparison.lines);
      if (reference.empty()) {
        reference = output;
        continue;
      }
      const size_t same = identical_lines(output, reference);
      std::cout << fmt::format("{}, beam {}, {} at batch {}: {}/{} lines identical to iteration at batch 1\n", label,
                               beam, mode, batch, same, comparison.lines);
      comparison.worst_identical = std::min(comparison.worst_identical, same);
    }
  return comparison;
}

}  // namespace

TEST_CASE("--batch-invariant gives every line the same CPU translation and score at any batch size and batching mode",
          "[e2e][batch-invariance]") {
  const std::string input = golden_source_lines(50);
  for (const std::string beam : {"1", "4"}) {
    const Comparison comparison = compare_batchings({"--device", "cpu", "--batch-invariant"}, beam, input,
                                                    "CPU --batch-invariant");
    CHECK(comparison.worst_identical == comparison.lines);
  }
}

TEST_CASE("--batch-invariant gives every line the same fp16 translation and score at any batch size (GPU)",
          "[gpu][e2e][batch-invariance]") {
  REQUIRE_GPU_OR_SKIP();
  const std::string input = golden_source_lines(1000);
  for (const std::string beam : {"1", "4"}) {
    const Comparison invariant = compare_batchings({"--device", "cuda", "--precision", "fp16", "--batch-invariant"},
                                                   beam, input, "GPU fp16 --batch-invariant");
    CHECK(invariant.worst_identical == invariant.lines);
    const Comparison standard = compare_batchings({"--device", "cuda", "--precision", "fp16"}, beam, input,
                                                  "GPU fp16 default");
    std::cout << fmt::format("GPU fp16 default, beam {}: worst {}/{} lines identical (not held)\n", beam,
                             standard.worst_identical, standard.lines);
  }
}

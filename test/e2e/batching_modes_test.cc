// Iteration-level batching must not change a single output: every line is the same under --batching
// iteration and shrinking, and at --max-batch-size 1, 64 and 1000, for greedy search, beam search with
// n-best lists, diverse beam search with repetition controls, and seeded sampling (top-k, top-p, min-p and
// temperature, three samples per line: draws are keyed by input line, step and sample, never by batch
// position). The real binary translates 120 golden source lines with the tiny Marian model, on the CPU and
// (gpu tag) on the GPU in fp32. Texts must be identical; printed scores may differ in their last digit,
// because a BLAS rounds a row's product differently for different row counts (OpenBLAS's small-matrix
// kernel takes 1 or 2 rows of a 512 x 512 product; a few elements per row differ by an ulp). With
// --batch-invariant the bytes are the same too: batch_invariance_test.cc. Sampling keeps to the 10 best tokens: over
// the whole vocabulary, an ulp can move a draw across a boundary.
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "catch.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/process.h"
#include "support/scored_lines.h"

using namespace seqtrans::testing;

namespace {

std::string translate(const std::vector<std::string>& device, const std::vector<std::string>& flags,
                      const std::string& input) {
  std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--quiet",
                                        "--max-length", "60"};
  arguments.insert(arguments.end(), device.begin(), device.end());
  arguments.insert(arguments.end(), flags.begin(), flags.end());
  const ProcessResult result = run_process(arguments, input, 300);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  return result.out;
}

void check_modes_agree(const std::vector<std::string>& device) {
  const std::string input = golden_source_lines(120);
  const std::vector<std::vector<std::string>> searches = {
      {"--beam-size", "1", "--with-scores"},
      {"--beam-size", "4", "--n-best", "2"},
      {"--beam-size", "4", "--beam-groups", "2", "--diversity-penalty", "0.5", "--n-best", "3",
       "--repetition-penalty", "1.2", "--no-repeat-ngram-size", "3"},
      {"--sampling-topk", "10", "--sampling-topp", "0.9", "--sampling-minp", "0.02", "--temperature", "0.8",
       "--n-best", "3", "--seed", "7"},
  };
  for (const auto& search : searches) {
    std::string reference;
    for (const std::string mode : {"shrinking", "iteration"})
      for (const std::string batch : {"64", "1", "1000"}) {
        std::vector<std::string> flags = search;
        flags.insert(flags.end(), {"--batching", mode, "--max-batch-size", batch, "--max-batch-tokens", "100000"});
        const std::string output = translate(device, flags, input);
        CAPTURE(search, mode, batch);
        CHECK(count_lines(output) >= 120);
        if (reference.empty())
          reference = output;
        else
          check_same_lines(output, reference);
      }
  }
}

}  // namespace

TEST_CASE("iteration and shrinking batching give identical lines at batch sizes 1, 64 and 1000 (CPU)", "[e2e][batching]") {
  check_modes_agree({"--device", "cpu"});
}

TEST_CASE("iteration and shrinking batching give identical lines at batch sizes 1, 64 and 1000 (GPU fp32)",
          "[gpu][e2e][batching]") {
  REQUIRE_GPU_OR_SKIP();
  check_modes_agree({"--device", "cuda", "--precision", "fp32"});
}

TEST_CASE("a batch budget far above the GPU's memory is lowered with a note, and the lines are the same",
          "[gpu][e2e][batching]") {
  REQUIRE_GPU_OR_SKIP();
  const std::string input = golden_source_lines(40);
  const std::vector<std::string> gpu = {"--device", "cuda", "--precision", "fp32"};
  const std::string expected = translate(gpu, {}, input);
  std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--max-length",
                                        "60", "--max-batch-tokens", "50000000", "--max-batch-size", "1000000"};
  arguments.insert(arguments.end(), gpu.begin(), gpu.end());
  const ProcessResult result = run_process(arguments, input, 300);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.err.find("--max-batch-size lowered from 1000000 to") != std::string::npos);
  CHECK(result.out == expected);
}

// --max-gpu-memory: the budget is fitted under the cap (a note), and where a run still reaches the cap it
// halves its sentences in flight (a warning) instead of failing. Either way the lines are the default's.
TEST_CASE("--max-gpu-memory fits the budget under the cap and keeps the lines", "[gpu][e2e][batching]") {
  REQUIRE_GPU_OR_SKIP();
  const std::string input = golden_source_lines(120);
  const std::vector<std::string> gpu = {"--device", "cuda", "--precision", "fp32"};
  const std::string expected = translate(gpu, {}, input);
  for (const char* cap : {"96", "128"}) {
    std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--max-length",
                                          "60", "--max-batch-size", "1000", "--max-batch-tokens", "100000",
                                          "--max-gpu-memory", cap};
    arguments.insert(arguments.end(), gpu.begin(), gpu.end());
    const ProcessResult result = run_process(arguments, input, 300);
    INFO("--max-gpu-memory " << cap << ": " << result.err);
    REQUIRE(result.exit_code == 0);
    CHECK(result.err.find("--max-batch-size lowered from 1000 to") != std::string::npos);
    CHECK(result.out == expected);
    std::cout << "--max-gpu-memory " << cap << " MiB: "
              << (result.err.find("out of device memory") != std::string::npos ? "halved in flight" : "fit up front")
              << "\n";
  }
}

// A cap the budget was not fitted under (the test hook SEQTRANS_TEST_ARENA_LIMIT_MIB), as when another
// process takes memory after the fit: the run halves its sentences (reserving, or in flight), says so, and
// loses no line.
TEST_CASE("a device that runs out of memory halves the sentences and keeps the lines",
          "[gpu][e2e][batching]") {
  REQUIRE_GPU_OR_SKIP();
  const std::string input = golden_source_lines(120);
  const std::vector<std::string> gpu = {"--device", "cuda", "--precision", "fp32"};
  const std::string expected = translate(gpu, {}, input);
  std::vector<std::string> arguments = {"/usr/bin/env", "SEQTRANS_TEST_ARENA_LIMIT_MIB=96", seqtrans_binary(),
                                        "translate", "-m", converted_tiny_model(), "--max-length", "60",
                                        "--max-batch-size", "1000", "--max-batch-tokens", "100000"};
  arguments.insert(arguments.end(), gpu.begin(), gpu.end());
  const ProcessResult result = run_process(arguments, input, 300);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK(result.err.find("out of device memory") != std::string::npos);
  CHECK(result.err.find("at most") != std::string::npos);
  std::cout << "out of memory in flight: " << result.err << "\n";
  CHECK(result.out == expected);
}

// A batch budget far above what the device holds or its kernels can launch is a size, not a failure: every
// line comes back, the same as at the default budget. 20,000 short lines at 50M tokens and a million
// sentences put every line in flight at once; with beam 4 that is 80,000 decoder rows, past the 65,535 a
// CUDA grid's y and z extents allow (attention once refused such a batch), so the GPU case reaches the
// kernels' launch limits as well as the memory fit.
#include <algorithm>
#include <string>
#include <vector>

#include "catch.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/process.h"

using namespace seqtrans::testing;

namespace {

// Golden source lines of at most 12 words, repeated up to `count` lines.
std::string short_lines(size_t count) {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  std::vector<std::string> chosen;
  for (const GoldenCase& c : golden.cases) {
    const size_t words = static_cast<size_t>(std::count(c.source_text.begin(), c.source_text.end(), ' ')) + 1;
    if (!c.source_text.empty() && words <= 12) chosen.push_back(c.source_text);
  }
  std::string input;
  for (size_t i = 0; i < count; ++i) input += chosen[i % chosen.size()] + "\n";
  return input;
}

std::string translate(const std::string& device, const std::vector<std::string>& budget, const std::string& input,
                      std::string* err = nullptr) {
  std::vector<std::string> arguments{seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--device", device,
                                     "--precision", "fp32", "-b", "4", "--max-length", "30", "--log-level", "info"};
  arguments.insert(arguments.end(), budget.begin(), budget.end());
  const ProcessResult result = run_process(arguments, input, 600);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  if (err != nullptr) *err = result.err;
  return result.out;
}

const std::vector<std::string> kHugeBudget{"--max-batch-tokens", "50000000", "--max-batch-size", "1000000",
                                           "--read-ahead", "100000"};

}  // namespace

TEST_CASE("a huge batch budget on the CPU finishes every line as the default budget does", "[e2e]") {
  const std::string input = short_lines(1500);
  const std::string huge = translate("cpu", kHugeBudget, input);
  CHECK(count_lines(huge) == 1500);
  CHECK(huge == translate("cpu", {}, input));
}

TEST_CASE("a huge batch budget on the GPU finishes every line as the default budget does", "[gpu][e2e]") {
  REQUIRE_GPU_OR_SKIP();
  const std::string input = short_lines(20000);
  std::string notes;
  const std::string huge = translate("cuda", kHugeBudget, input, &notes);
  CHECK(count_lines(huge) == 20000);
  CHECK(huge == translate("cuda", {}, input));
}

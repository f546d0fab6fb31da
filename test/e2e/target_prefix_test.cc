// --target-prefix on the real binary: every translation starts with its line's prefix (an empty line:
// none), whatever the search, the batch size and the batching mode; a prefix file that runs short or is
// paired with several inputs is refused in one line. CPU, and (gpu tag) the GPU in fp32.
#include <fstream>
#include <string>
#include <vector>

#include "catch.h"
#include "support/golden.h"
#include "support/gpu.h"
#include "support/model_builder.h"
#include "support/process.h"
#include "support/scored_lines.h"

using namespace seqtrans::testing;

namespace {

constexpr size_t kLines = 60;

std::string golden_input() {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  std::string input;
  for (size_t i = 0; i < std::min(kLines, golden.cases.size()); ++i) input += golden.cases[i].source_text + "\n";
  return input;
}

// Line i's prefix: German starts of different lengths, and none for every third line.
std::vector<std::string> prefixes() {
  const std::vector<std::string> starts = {"Ein Mann", "", "Die", "Zwei kleine Hunde", "", "Heute"};
  std::vector<std::string> lines;
  for (size_t i = 0; i < kLines; ++i) lines.push_back(starts[i % starts.size()]);
  return lines;
}

std::string prefix_file(const std::vector<std::string>& lines) {
  const std::string path = temp_path("prefixes.txt");
  std::ofstream file(path, std::ios::binary);
  for (const std::string& line : lines) file << line << "\n";
  return path;
}

ProcessResult translate(const std::vector<std::string>& flags, const std::string& input) {
  std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--quiet",
                                        "--max-length", "40"};
  arguments.insert(arguments.end(), flags.begin(), flags.end());
  return run_process(arguments, input, 300);
}

// The text of each output line ("index ||| text ||| score" lines of n-best output kept whole).
void check_starts(const std::string& output, const std::vector<std::string>& starts, size_t per_line) {
  const std::vector<std::string> lines = split_lines(output);
  REQUIRE(lines.size() == starts.size() * per_line);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& start = starts[i / per_line];
    std::string text = lines[i];
    if (per_line > 1) text = text.substr(text.find(" ||| ") + 5);
    CAPTURE(i, start, text);
    CHECK(text.rfind(start, 0) == 0);
  }
}

void check_prefixes(const std::vector<std::string>& device) {
  const std::string input = golden_input();
  const std::vector<std::string> starts = prefixes();
  const std::string file = prefix_file(starts);
  const std::vector<std::pair<std::vector<std::string>, size_t>> searches = {
      {{"--beam-size", "1"}, 1},
      {{"--beam-size", "3", "--n-best", "2"}, 2},
      {{"--beam-size", "4", "--beam-groups", "2", "--diversity-penalty", "1"}, 1},
      {{"--sampling-topk", "8", "--n-best", "2", "--seed", "3"}, 2},
  };
  for (const auto& [search, per_line] : searches) {
    std::string reference;
    for (const std::string mode : {"iteration", "shrinking"})
      for (const std::string batch : {"1", "64"}) {
        std::vector<std::string> flags = device;
        flags.insert(flags.end(), search.begin(), search.end());
        flags.insert(flags.end(), {"--target-prefix", file, "--batching", mode, "--max-batch-size", batch});
        const ProcessResult result = translate(flags, input);
        CAPTURE(search, mode, batch, result.err);
        REQUIRE(result.exit_code == 0);
        check_starts(result.out, starts, per_line);
        if (reference.empty())
          reference = result.out;
        else
          check_same_lines(result.out, reference);
      }
  }
}

}  // namespace

TEST_CASE("--target-prefix starts every translation with its line's prefix (CPU)", "[e2e][prefix]") {
  check_prefixes({"--device", "cpu"});
}

TEST_CASE("--target-prefix starts every translation with its line's prefix (GPU fp32)", "[gpu][e2e][prefix]") {
  REQUIRE_GPU_OR_SKIP();
  check_prefixes({"--device", "cuda", "--precision", "fp32"});
}

TEST_CASE("--target-prefix refuses a file that runs short, and several inputs", "[e2e][prefix]") {
  const std::string file = prefix_file({"Ein Mann"});
  const ProcessResult short_file = translate({"--device", "cpu", "--target-prefix", file}, "A man.\nA dog.\n");
  CHECK(short_file.exit_code != 0);
  CHECK(count_lines(short_file.err) == 1);
  CHECK(short_file.err.find("--target-prefix has 1 lines; input line 2 has none") != std::string::npos);
  const std::string input = temp_path("input.txt");
  std::ofstream(input) << "A man.\n";
  const ProcessResult two_inputs =
      translate({"--device", "cpu", "--target-prefix", file, "-i", input, input}, "");
  CHECK(two_inputs.exit_code != 0);
  CHECK(two_inputs.err.find("--target-prefix pairs its lines with one input's lines, got 2 inputs") !=
        std::string::npos);
}

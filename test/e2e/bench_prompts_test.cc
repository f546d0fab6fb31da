// `seqtrans bench` with a decoder-only model reads its input lines as prompts, as `seqtrans generate` does
// (`\n` and `\\` escapes), in the throughput run and the arrival simulation, with the prefill chunk of
// --prefill-chunk.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "support/golden.h"
#include "support/model_builder.h"
#include "support/process.h"

using namespace seqtrans::testing;

namespace {

// The tiny Llama checkpoint, converted once per test binary.
const std::string& llama_model() { return converted_golden_model("llama_tiny_gqa2"); }

// Golden sources framed as the goldens' prompts, in generate's input format: one line each, the line end
// between source and answer written as `\n`.
std::string prompt_file(size_t lines) {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/llama_tiny_gqa2_greedy.tsv");
  REQUIRE(golden.cases.size() >= lines);
  const std::string path = temp_path("bench_prompts") + ".txt";
  std::ofstream file(path);
  for (size_t i = 0; i < lines; ++i) file << "English: " << golden.cases[i].source_text << "\\nGerman:\n";
  return path;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("bench reads a decoder-only model's prompts as generate does", "[e2e][bench]") {
  const std::string prompts = prompt_file(12);
  const std::string output = temp_path("bench_completions") + ".txt";
  const std::vector<std::string> decoding = {"--device", "cpu", "-b", "1", "--max-length", "12", "0"};

  std::vector<std::string> generate = {seqtrans_binary(), "generate", "-m", llama_model(), "-i", prompts, "--quiet"};
  generate.insert(generate.end(), decoding.begin(), decoding.end());
  const ProcessResult generated = run_process(generate);
  INFO(generated.err);
  REQUIRE(generated.exit_code == 0);

  // Chunks of 5 tokens: every prompt (about 40 tokens) is prefilled over several iterations.
  std::vector<std::string> bench = {
      seqtrans_binary(), "bench", "-m", llama_model(), "-i", prompts, "-o", output, "--runs", "1", "--warmup", "0",
      "--prefill-chunk", "5"};
  bench.insert(bench.end(), decoding.begin(), decoding.end());
  const ProcessResult benched = run_process(bench);
  INFO(benched.err);
  REQUIRE(benched.exit_code == 0);
  CHECK((benched.out + benched.err).find("prefill chunks of 5") != std::string::npos);
  std::ifstream written(output);
  const std::string bench_text((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  // bench writes a completion's line ends as spaces, generate as `\n`.
  std::vector<std::string> expected = lines_of(generated.out);
  for (std::string& line : expected)
    for (size_t at = line.find("\\n"); at != std::string::npos; at = line.find("\\n", at)) line.replace(at, 2, " ");
  CHECK(lines_of(bench_text) == expected);

  std::vector<std::string> arrivals = {seqtrans_binary(), "bench",          "-m",  llama_model(),     "-i",
                                       prompts,           "--arrival-rate", "200", "--prefill-chunk", "5"};
  arrivals.insert(arrivals.end(), decoding.begin(), decoding.end());
  const ProcessResult arrived = run_process(arrivals);
  INFO(arrived.err);
  REQUIRE(arrived.exit_code == 0);
  // One row per batching mode, each over the 12 prompts.
  CHECK(arrived.out.find("iteration") != std::string::npos);
  CHECK(arrived.out.find("shrinking") != std::string::npos);
}

TEST_CASE("bench --prefill-stall gives a row per chunk size and refuses an encoder-decoder model", "[e2e][bench]") {
  const ProcessResult result = run_process(
      {seqtrans_binary(), "bench", "--prefill-stall", "--device", "cpu", "-m", llama_model(), "--source-length", "40"},
      "", 300);
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> lines = lines_of(result.out);
  REQUIRE(lines.size() == 12);  // the title, the header, then chunks 0, 16, ..., 2048 and 0 again
  CHECK(lines[0].find("a 40-token prompt joining") != std::string::npos);
  for (size_t i = 2; i < lines.size(); ++i) {
    std::istringstream row(lines[i]);
    double chunk = -1, step_ms = 0, stall_ms = 0;
    row >> chunk >> step_ms >> stall_ms;
    CHECK(step_ms > 0);
    CHECK(stall_ms > 0);
  }
  const ProcessResult refused =
      run_process({seqtrans_binary(), "bench", "--prefill-stall", "--device", "cpu", "-m",
                   std::string(SEQTRANS_SOURCE_DIR) + "/models/opus-demo-en-de.seqtrans"});
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("decoder-only") != std::string::npos);
}

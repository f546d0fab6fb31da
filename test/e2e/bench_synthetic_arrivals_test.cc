// `seqtrans bench --synthetic --arrival-rate`: the arrival simulation at a shape, with no model file, prints
// the real mode's table with a row per batching mode and rate, writes the same JSON and CSV rows, and
// refuses the grid's flags in one line (the real mode the throughput runs' flags too).
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "catch.h"
#include "support/golden.h"
#include "support/model_builder.h"
#include "support/process.h"

using namespace seqtrans::testing;

namespace {

std::vector<std::string> tiny_arrivals(const std::vector<std::string>& extra) {
  std::vector<std::string> arguments = {seqtrans_binary(), "bench", "--synthetic", "--device", "cpu", "--family",
                                        "llama", "--layers", "1", "--d-model", "64", "--heads", "4", "--kv-heads",
                                        "2", "--ffn", "128", "--vocab", "500", "--source-length", "8",
                                        "--target-length", "6", "--arrival-rate", "200,2000", "--arrival-lines", "20"};
  arguments.insert(arguments.end(), extra.begin(), extra.end());
  return arguments;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("bench --synthetic --arrival-rate reports every batching mode at every rate", "[e2e][bench]") {
  const std::string json = temp_path("synthetic_arrivals") + ".json", csv = temp_path("synthetic_arrivals") + ".csv";
  const ProcessResult result = run_process(tiny_arrivals({"-b", "2", "--json", json, "--csv", csv}));
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> lines = split_lines(result.out);
  REQUIRE(lines.size() == 4 + 6);  // title, model, header, rule, then 3 modes x 2 rates
  CHECK(lines[0].find("arrival simulation, 20 random prompts of 8 tokens, 6 generated each (forced), beam 2 on cpu") !=
        std::string::npos);
  CHECK(lines[1].find("decoder-only (Llama) Transformer 0+1 layers, d_model 64") != std::string::npos);
  const std::vector<std::string> labels = {"iteration", "iteration", "shrinking", "shrinking", "one-at-a-time",
                                           "one-at-a-time"};
  for (size_t i = 0; i < labels.size(); ++i) {
    INFO(lines[4 + i]);
    CHECK(lines[4 + i].find(labels[i]) != std::string::npos);
    CHECK(lines[4 + i].find(i % 2 == 0 ? " 200 " : "2000 ") != std::string::npos);
  }

  const std::vector<std::string> rows = split_lines(read_file(csv));
  REQUIRE(rows.size() == 7);
  CHECK(rows[0] == "rate,batching,latency_p50_s,latency_p90_s,latency_p99_s,target_tokens_per_s,lines,seconds");
  CHECK(rows[5].rfind("200,one-at-a-time,", 0) == 0);
  const std::string document = read_file(json);
  CHECK(document.find("\"mode\": \"synthetic-arrivals\"") != std::string::npos);
  CHECK(document.find("\"batching\": \"one-at-a-time\"") != std::string::npos);
}

TEST_CASE("bench --synthetic --arrival-batching measures the modes asked for, in their order", "[e2e][bench]") {
  const ProcessResult result = run_process(tiny_arrivals({"--arrival-batching", "one-at-a-time,iteration"}));
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> lines = split_lines(result.out);
  REQUIRE(lines.size() == 4 + 4);  // 2 modes x 2 rates
  const std::vector<std::string> labels = {"one-at-a-time", "one-at-a-time", "iteration", "iteration"};
  for (size_t i = 0; i < labels.size(); ++i) {
    INFO(lines[4 + i]);
    CHECK(lines[4 + i].find(labels[i]) != std::string::npos);
  }
  CHECK(result.out.find("shrinking") == std::string::npos);
  const ProcessResult unknown = run_process(tiny_arrivals({"--arrival-batching", "static"}));
  CHECK(unknown.exit_code != 0);
  CHECK(unknown.err.find("--arrival-batching") != std::string::npos);
}

TEST_CASE("bench --synthetic --arrival-rate refuses the grid's flags in one line", "[e2e][bench]") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch", "4"}, "--max-batch-size"},
      {{"--beam", "2"}, "the beam -b"},
      {{"--source-length", "8,16"}, "one --source-length"},
      {{"--runs", "3"}, "--runs belongs to the throughput runs"},
      {{"--prefill-stall"}, "separate measurements"},
  };
  for (const auto& [extra, message] : cases) {
    const ProcessResult result = run_process(tiny_arrivals(extra));
    INFO(result.err);
    CHECK(result.exit_code != 0);
    CHECK(result.err.find(message) != std::string::npos);
    CHECK(split_lines(result.err).size() == 1);
  }
  // The real mode refuses the throughput runs' flags too, instead of ignoring them.
  const std::string input = temp_path("arrival_input");
  std::ofstream(input) << "a line\n";
  for (const char* flag : {"--profile", "--ablations"}) {
    const ProcessResult real =
        run_process({seqtrans_binary(), "bench", "--device", "cpu", "-m", converted_golden_model("llama_tiny_gqa2"),
                     "-i", input, "--arrival-rate", "10", flag});
    INFO(real.err);
    CHECK(real.exit_code != 0);
    CHECK(real.err.find(std::string(flag) + " belongs to the throughput runs") != std::string::npos);
    CHECK(split_lines(real.err).size() == 1);
  }
  const ProcessResult lines_alone = run_process({seqtrans_binary(), "bench", "--synthetic", "--arrival-lines", "5"});
  CHECK(lines_alone.exit_code != 0);
  CHECK(lines_alone.err.find("--arrival-lines sets the lines of --synthetic --arrival-rate") != std::string::npos);
  const ProcessResult real_modes =
      run_process({seqtrans_binary(), "bench", "-m", converted_golden_model("llama_tiny_gqa2"), "-i", input,
                   "--arrival-rate", "10", "--arrival-batching", "iteration"});
  CHECK(real_modes.exit_code != 0);
  CHECK(real_modes.err.find("--arrival-batching picks the modes of --synthetic --arrival-rate") != std::string::npos);
  CHECK(split_lines(real_modes.err).size() == 1);
}

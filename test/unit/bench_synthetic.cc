// A tiny synthetic benchmark on the CPU: the whole grid comes back with positive, consistent numbers
// (never a speed assertion: benchmarks are not tests).
#include "bench/synthetic.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "bench/records.h"
#include "catch.h"
#include "core/error.h"
#include "ops/prepared_weight.h"

namespace seqtrans::bench {
namespace {

SyntheticOptions tiny_options() {
  SyntheticOptions options;
  options.model = {2, 2, 32, 4, 64, 100};
  options.grid.batch = {1, 3};
  options.grid.beam = {1, 2};
  options.grid.source_length = {6};
  options.grid.target_length = {5};
  options.repetitions = {2, 1, true};
  options.target.device = Device::CPU;
  options.target.dtype = DataType::F32;
  options.ablations = true;
  options.hardware = {1e11, 2e10};  // made-up peaks, so that the floor columns are filled
  return options;
}

}  // namespace

TEST_CASE("bench synthetic: a tiny CPU grid gives every point with positive numbers", "[bench]") {
  const SyntheticOptions options = tiny_options();
  std::vector<std::string> progress;
  const SyntheticReport report = run_synthetic(options, [&](const std::string& line) { progress.push_back(line); });

  REQUIRE(report.results.size() == 4);
  CHECK(progress.size() == 4);
  const std::vector<std::pair<int, int>> expected_order = {{1, 1}, {1, 3}, {2, 1}, {2, 3}};  // beam, batch
  for (size_t i = 0; i < report.results.size(); ++i) {
    const SyntheticResult& result = report.results[i];
    CHECK(result.point.beam == expected_order[i].first);
    CHECK(result.point.batch == expected_order[i].second);
    CHECK(result.point.source_length == 6);
    CHECK(result.point.target_length == 5);
    CHECK(result.time.runs == 2);
    CHECK(result.time.median > 0);
    CHECK(result.time.min <= result.time.median);
    CHECK(result.time.median <= result.time.max);
    CHECK(result.generated_tokens_per_second == Approx(result.point.batch * 5 / result.time.median));
    CHECK(result.seconds_per_step == Approx(result.time.median / 5));
    CHECK(result.memory.peak_bytes > 0);
    CHECK(result.floor.cost.flops > 0);
    CHECK(result.floor.cost.bytes > 0);
    CHECK(result.floor.seconds() > 0);

    REQUIRE(result.profile.has_value());
    CHECK(result.profile->seconds > 0);
    CHECK(result.profile->stages.size() == profile_stage_names().size());
    double staged = 0;
    for (const auto& [name, seconds] : result.profile->stages) staged += seconds;
    CHECK(staged > 0);
    CHECK(staged <= result.profile->search_seconds);

    REQUIRE(result.ablations.size() == 6);
    std::set<std::string> names;
    for (const AblationResult& ablation : result.ablations) {
      names.insert(ablation.name);
      CHECK(ablation.with_idea.median > 0);
      CHECK(ablation.without_idea.median > 0);
      CHECK(ablation.speedup() > 0);
    }
    CHECK(names ==
          std::set<std::string>{"naive-batching", "no-packed-encoder", "no-fused-topk", "no-hierarchical-topk",
                                "batch-invariant", "no-packed-weights"});
  }
}

// --precision int8 used to be reported by the grid but not passed to its engines, which ran fp32.
TEST_CASE("bench synthetic: int8 weights reach the engines the grid builds", "[bench]") {
  CHECK(synthetic_model_options({Device::CPU, 0, DataType::F32, true, 0}).int8_weights);
  CHECK_FALSE(synthetic_model_options({Device::CPU, 0, DataType::F32, false, 0}).int8_weights);
  CHECK(synthetic_model_options({Device::CPU, 0, DataType::F16, false, 0}).dtype == DataType::F16);
  if (!ops::weight_format_available(ops::WeightFormat::Int8, Device::CPU)) return;
  SyntheticOptions options = tiny_options();
  options.target.int8_weights = true;
  options.ablations = false;
  const SyntheticReport report = run_synthetic(options, {});
  REQUIRE(report.results.size() == 4);
  for (const SyntheticResult& result : report.results) CHECK(result.generated_tokens_per_second > 0);
}

TEST_CASE("bench synthetic: rows share one schema, so the CSV and JSON writers take them", "[bench]") {
  SyntheticOptions options = tiny_options();
  options.grid.batch = {2};
  options.grid.beam = {1, 2};
  options.repetitions = {1, 0, false};
  options.ablations = false;
  options.hardware = {};
  const SyntheticReport report = run_synthetic(options, {});
  std::vector<Row> rows;
  for (const SyntheticResult& result : report.results) rows.push_back(synthetic_row(result));
  REQUIRE(rows.size() == 2);
  std::ostringstream csv;
  write_csv(csv, rows);
  CHECK(csv.str().rfind("batch,beam,source_length,target_length,runs,median_s", 0) == 0);

  RunDescription run;
  run.mode = "synthetic";
  run.device = "cpu";
  run.hardware_source = "none";
  std::ostringstream json;
  write_json(json, run, report.config, rows, {});
  CHECK(json.str().find("\"x_of_floor\": null") != std::string::npos);  // no peaks: no floor
  // The bandwidth reached needs no peaks: the bytes the run moves over its time.
  const auto achieved = std::find_if(rows.front().begin(), rows.front().end(),
                                     [](const Field& field) { return field.name == "achieved_gbyte_per_s"; });
  REQUIRE(achieved != rows.front().end());
  const double gbytes = std::get<double>(achieved->value);
  CHECK(gbytes > 0);
  CHECK(json.str().find("\"parameters\": ") != std::string::npos);
}

TEST_CASE("bench synthetic: invalid shapes are one-line errors", "[bench]") {
  SyntheticOptions options = tiny_options();
  options.model.heads = 5;  // 32 is not a multiple of 5
  CHECK_THROWS_AS(run_synthetic(options, {}), Error);
  options = tiny_options();
  options.model.vocab = 5;
  options.grid.beam = {4};  // needs 2 x 4 + 2 ids
  CHECK_THROWS_AS(run_synthetic(options, {}), Error);
  options = tiny_options();
  options.grid.batch = {};
  CHECK_THROWS_AS(run_synthetic(options, {}), Error);
}

}  // namespace seqtrans::bench

namespace seqtrans::bench {

TEST_CASE("synthetic presets name the shapes and layouts people run", "[bench]") {
  const SyntheticModel nllb = synthetic_preset("nllb-600m");
  CHECK(nllb.d_model == 1024);
  CHECK(nllb.encoder_layers == 12);
  CHECK(nllb.vocab == 256206);
  const ModelConfig nllb_config = synthetic_config(nllb, 64);
  CHECK(nllb_config.decoder.pre_norm);
  CHECK(nllb_config.decoder.final_layer_norm);
  CHECK_FALSE(nllb_config.decoder.embedding_layer_norm);
  CHECK(nllb_config.position_encoding == PositionEncoding::SinusoidalFairseq);
  CHECK(nllb_config.position_offset == 2);
  const ModelConfig mbart = synthetic_config(synthetic_preset("mbart-large"), 64);
  CHECK(mbart.decoder.embedding_layer_norm);
  CHECK(mbart.position_encoding == PositionEncoding::Learned);
  CHECK_FALSE(synthetic_config(synthetic_preset("transformer-base"), 64).decoder.pre_norm);
  const SyntheticModel tinyllama = synthetic_preset("tinyllama-1.1b");
  CHECK(tinyllama.family == SyntheticFamily::Llama);
  CHECK(tinyllama.decoder_layers == 22);
  CHECK(tinyllama.kv_heads == 4);
  const ModelConfig llama = synthetic_config(tinyllama, 64);
  CHECK(llama.kind == ModelKind::DecoderOnly);
  CHECK(llama.norm == NormKind::RmsNorm);
  CHECK(llama.gated_ffn);
  CHECK(key_value_heads(llama.decoder) == 4);
  CHECK(head_width(llama, llama.decoder) == 64);
  CHECK(synthetic_preset("llama2-7b").d_model == 4096);
  CHECK_THROWS_AS(synthetic_preset("gpt-9"), Error);
  CHECK_THROWS_AS(synthetic_family("t5"), Error);
}

TEST_CASE("a tiny synthetic benchmark runs each family's layout on the CPU", "[bench]") {
  for (const SyntheticFamily family : {SyntheticFamily::M2M100, SyntheticFamily::MBart, SyntheticFamily::Llama}) {
    SyntheticOptions options = tiny_options();
    options.model.family = family;
    if (family == SyntheticFamily::Llama) options.model.kv_heads = 2;  // grouped-query: 4 heads, 2 key/value
    options.ablations = false;
    const SyntheticReport report = run_synthetic(options, {});
    CHECK(report.results.size() == 4);
    for (const SyntheticResult& result : report.results) CHECK(result.generated_tokens_per_second > 0);
  }
}

}  // namespace seqtrans::bench

#include "bench/records.h"

#include "models/tensor_specs.h"

namespace seqtrans::bench {
namespace {

Cell optional_number(bool present, double value) { return present ? Cell(value) : Cell(); }

void add_floor(Row& row, const Floor& floor, double measured_seconds, bool known) {
  row.push_back({"gflop", floor.cost.flops / 1e9});
  row.push_back({"gbyte", floor.cost.bytes / 1e9});
  row.push_back({"flop_floor_s", optional_number(known, floor.flop_seconds)});
  row.push_back({"byte_floor_s", optional_number(known, floor.byte_seconds)});
  row.push_back({"floor_s", optional_number(known, floor.seconds())});
  row.push_back({"floor_bound", known ? Cell(std::string(floor.bound())) : Cell()});
  row.push_back({"x_of_floor", optional_number(known && floor.seconds() > 0, measured_seconds / floor.seconds())});
  row.push_back({"achieved_gbyte_per_s", floor.achieved_bytes_per_second(measured_seconds) / 1e9});
}

void add_memory(Row& row, const PeakMemory& memory) {
  row.push_back({"peak_memory_bytes", memory.peak_bytes});
  row.push_back({"reserved_memory_bytes", memory.reserved_bytes});
}

void add_profile(Row& row, const StageProfile& profile) {
  row.push_back({"profiled_s", profile.seconds});
  row.push_back({"profiled_search_s", profile.search_seconds});
  for (const auto& [name, seconds] : profile.stages) {
    std::string column = "stage_" + name + "_s";
    for (char& c : column)
      if (c == ' ') c = '_';
    row.push_back({column, seconds});
  }
  row.push_back({"search_unaccounted_s", profile.unaccounted()});
}

void add_speedups(Row& row, const std::vector<AblationResult>& results) {
  for (const AblationResult& result : results) {
    std::string column = "speedup_" + result.name;
    for (char& c : column)
      if (c == '-') c = '_';
    row.push_back({column, result.speedup()});
  }
}

void add_ablation(Row& row, const AblationResult& result) {
  row.push_back({"ablation", result.name});
  row.push_back({"idea", result.idea});
  row.push_back({"with_median_s", result.with_idea.median});
  row.push_back({"without_median_s", result.without_idea.median});
  row.push_back({"with_min_s", result.with_idea.min});
  row.push_back({"with_max_s", result.with_idea.max});
  row.push_back({"without_min_s", result.without_idea.min});
  row.push_back({"without_max_s", result.without_idea.max});
  row.push_back({"speedup", result.speedup()});
}

void add_point(Row& row, const GridPoint& point) {
  row.push_back({"batch", int64_t{point.batch}});
  row.push_back({"beam", int64_t{point.beam}});
  row.push_back({"source_length", int64_t{point.source_length}});
  row.push_back({"target_length", int64_t{point.target_length}});
}

const char* dtype_label(DataType dtype) { return dtype == DataType::F16 ? "fp16" : "fp32"; }

}  // namespace

Row synthetic_row(const SyntheticResult& result) {
  Row row;
  add_point(row, result.point);
  row.push_back({"runs", int64_t{result.time.runs}});
  row.push_back({"median_s", result.time.median});
  row.push_back({"min_s", result.time.min});
  row.push_back({"max_s", result.time.max});
  row.push_back({"generated_tokens_per_s", result.generated_tokens_per_second});
  row.push_back({"sentences_per_s", result.sentences_per_second});
  row.push_back({"ms_per_step", 1e3 * result.seconds_per_step});
  add_memory(row, result.memory);
  add_floor(row, result.floor, result.time.median, result.floor.flop_seconds > 0);
  if (result.profile) add_profile(row, *result.profile);
  add_speedups(row, result.ablations);
  return row;
}

std::vector<Row> synthetic_ablation_rows(const SyntheticResult& result) {
  std::vector<Row> rows;
  for (const AblationResult& ablation : result.ablations) {
    Row row;
    add_point(row, result.point);
    add_ablation(row, ablation);
    rows.push_back(std::move(row));
  }
  return rows;
}

Row real_row(const RealReport& report) {
  const RealResult& result = report.result;
  const TranslationStats& stats = result.median_run.stats;
  Row row;
  row.push_back({"lines", static_cast<int64_t>(report.lines)});
  row.push_back({"source_tokens", static_cast<int64_t>(stats.source_tokens)});
  row.push_back({"target_tokens", static_cast<int64_t>(stats.target_tokens)});
  row.push_back({"batches", static_cast<int64_t>(stats.batches)});
  row.push_back({"runs", int64_t{result.time.runs}});
  row.push_back({"median_s", result.time.median});
  row.push_back({"min_s", result.time.min});
  row.push_back({"max_s", result.time.max});
  row.push_back({"sentences_per_s", result.sentences_per_second});
  row.push_back({"source_tokens_per_s", result.source_tokens_per_second});
  row.push_back({"target_tokens_per_s", result.target_tokens_per_second});
  row.push_back({"decoder_steps", static_cast<int64_t>(stats.decoder_steps)});
  row.push_back({"graph_recordings", static_cast<int64_t>(stats.graph_recordings)});
  row.push_back({"latency_p50_ms", 1e3 * result.latency_p50});
  row.push_back({"latency_p90_ms", 1e3 * result.latency_p90});
  row.push_back({"latency_p99_ms", 1e3 * result.latency_p99});
  row.push_back({"startup_s", result.startup_seconds});
  row.push_back({"startup_model_file_s", result.startup.model_file});
  row.push_back({"startup_device_s", result.startup.device});
  row.push_back({"startup_tokenizer_s", result.startup.tokenizer});
  row.push_back({"startup_weights_s", result.startup.weights});
  row.push_back({"startup_pools_s", result.startup.pools});
  row.push_back({"first_line_s", result.first_line_seconds});
  row.push_back({"tokenize_s", stats.tokenize_seconds});
  row.push_back({"search_s", stats.search_seconds});
  row.push_back({"search_encode_s", stats.search_split.encode});
  row.push_back({"search_model_step_s", stats.search_split.model_step});
  row.push_back({"search_host_s", stats.search_split.search});
  row.push_back({"detokenize_s", stats.detokenize_seconds});
  row.push_back({"text_wait_s", stats.text_wait_seconds});
  row.push_back({"other_host_s", result.other_host_seconds});
  add_memory(row, result.memory);
  add_floor(row, result.floor, result.median_run.seconds, result.floor.flop_seconds > 0);
  if (result.profile) add_profile(row, *result.profile);
  add_speedups(row, result.ablations);
  return row;
}

std::vector<Row> real_ablation_rows(const RealReport& report) {
  std::vector<Row> rows;
  for (const AblationResult& ablation : report.result.ablations) {
    Row row;
    add_ablation(row, ablation);
    rows.push_back(std::move(row));
  }
  return rows;
}

Row model_row(const ModelConfig& config) {
  int64_t parameters = 0;
  for (const TensorSpec& spec : model_tensor_specs(config)) {
    int64_t elements = 1;
    for (int64_t extent : spec.shape) elements *= extent;
    parameters += elements;
  }
  return {{"encoder_layers", int64_t{config.encoder.num_layers}},
          {"decoder_layers", int64_t{config.decoder.num_layers}},
          {"d_model", int64_t{config.d_model}},
          {"heads", int64_t{config.encoder.num_heads}},
          {"encoder_ffn", int64_t{config.encoder.ffn_dim}},
          {"decoder_ffn", int64_t{config.decoder.ffn_dim}},
          {"source_vocab", int64_t{config.source_vocab_size}},
          {"target_vocab", int64_t{config.target_vocab_size}},
          {"parameters", parameters}};
}

void write_json(std::ostream& out, const RunDescription& run, const ModelConfig& config, const std::vector<Row>& results,
                const std::vector<Row>& ablation_rows, const std::vector<Row>& arrival_rows) {
  JsonWriter json(out);
  json.begin_object();
  json.key("seqtrans").value(SEQTRANS_VERSION);
  json.key("run").begin_object();
  json.key("mode").value(run.mode);
  json.key("device").value(run.device);
  json.key("precision").value(run.int8_weights ? "int8" : dtype_label(run.dtype));
  if (!run.model.empty()) json.key("model_file").value(run.model);
  if (!run.input.empty()) json.key("input").value(run.input);
  json.key("engine").value(describe(run.engine));
  json.key("runs").value(run.repetitions.runs);
  json.key("warmup").value(run.repetitions.warmup);
  json.key("profile").value(run.repetitions.profile);
  json.key("peak_tflops").value(optional_number(run.hardware.known(), run.hardware.flops_per_second / 1e12));
  json.key("peak_bandwidth_gbs").value(optional_number(run.hardware.known(), run.hardware.bytes_per_second / 1e9));
  json.key("peaks_from").value(run.hardware_source);
  json.end_object();
  json.key("model").row(model_row(config));
  json.key("results").begin_array();
  for (const Row& row : results) json.row(row);
  json.end_array();
  json.key("ablations").begin_array();
  for (const Row& row : ablation_rows) json.row(row);
  json.end_array();
  json.key("arrivals").begin_array();
  for (const Row& row : arrival_rows) json.row(row);
  json.end_array();
  json.end_object();
}

}  // namespace seqtrans::bench

#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/cost_model.h"

namespace seqtrans::app {
namespace {

using bench::TextTable;

std::string milliseconds(double seconds) { return fmt::format("{:.2f}", 1e3 * seconds); }
std::string mebibytes(int64_t bytes) { return fmt::format("{:.0f}", static_cast<double>(bytes) / (1 << 20)); }
std::string rate(double per_second) { return fmt::format("{:.0f}", per_second); }

const char* precision_name(const bench::RunDescription& run) {
  if (run.int8_weights) return "int8";
  return run.dtype == DataType::F16 ? "fp16" : "fp32";
}

void print_run_lines(std::ostream& out, const bench::RunDescription& run) {
  out << fmt::format("engine: {}; median of {} run(s) after {} warm-up run(s)\n", bench::describe(run.engine),
                     run.repetitions.runs, run.repetitions.warmup);
  if (run.hardware.known())
    out << fmt::format("floor: peaks {:.4g} TFLOP/s and {:.4g} GB/s ({}); x of floor = measured / max(FLOPs / peak, "
                       "bytes / bandwidth); GB/s = the bytes the run must move over its measured time\n",
                       run.hardware.flops_per_second / 1e12, run.hardware.bytes_per_second / 1e9, run.hardware_source);
  else
    out << "floor: n/a (" << run.hardware_source << ")\n";
}

// Floor columns: the bandwidth reached, then "n/a" without peak rates.
std::vector<std::string> floor_cells(const bench::Floor& floor, double measured, bool known) {
  const std::string achieved = fmt::format("{:.0f}", floor.achieved_bytes_per_second(measured) / 1e9);
  if (!known) return {achieved, "n/a", "n/a", "n/a"};
  return {achieved, milliseconds(floor.seconds()), floor.bound(), fmt::format("{:.1f}", measured / floor.seconds())};
}

// The persistent kernel's phases of one profiled run: each one's time per step and layer beside the weight
// bytes it reads, which says how far a small step is from streaming its weights.
void print_phase_table(std::ostream& out, const std::string& label, const bench::StageProfile& profile,
                       const bench::ModelShape& shape, int64_t element_bytes) {
  TextTable table;
  for (const char* header : {"phase", "ms", "times", "us each", "weight MB", "GB/s"}) table.add_column(header);
  for (const bench::StageProfile::Phase& phase : profile.persistent_phases) {
    const double each = phase.count > 0 ? phase.seconds / static_cast<double>(phase.count) : 0.0;
    const double bytes = bench::persistent_phase_weight_bytes(shape, phase.name, element_bytes);
    table.add_row({phase.name, milliseconds(phase.seconds), std::to_string(phase.count), fmt::format("{:.2f}", 1e6 * each),
                   bytes > 0 ? fmt::format("{:.2f}", bytes / 1e6) : "", bytes > 0 && each > 0 ? rate(bytes / each / 1e9) : ""});
  }
  out << fmt::format("\npersistent decoder kernel,{}: its phases, each run once per step and layer (the last two once "
                     "per step); a phase ends when its last block passes the next barrier\n",
                     label);
  table.print(out);
}

void print_profile_table(std::ostream& out, const std::vector<std::string>& labels,
                         const std::vector<std::string>& label_values, const std::vector<double>& unprofiled,
                         const std::vector<const bench::StageProfile*>& profiles, const bench::ModelShape& shape,
                         int64_t element_bytes) {
  TextTable table;
  for (const std::string& label : labels) table.add_column(label);
  table.add_column("unprofiled");
  table.add_column("profiled");
  for (const std::string& stage : bench::profile_stage_names()) table.add_column(stage);
  table.add_column("search gaps");
  for (size_t i = 0; i < profiles.size(); ++i) {
    std::vector<std::string> cells(label_values.begin() + static_cast<std::ptrdiff_t>(i * labels.size()),
                                   label_values.begin() + static_cast<std::ptrdiff_t>((i + 1) * labels.size()));
    cells.push_back(milliseconds(unprofiled[i]));
    cells.push_back(milliseconds(profiles[i]->search_seconds));
    for (const auto& [name, seconds] : profiles[i]->stages) cells.push_back(milliseconds(seconds));
    cells.push_back(milliseconds(profiles[i]->unaccounted()));
    table.add_row(std::move(cells));
  }
  out << "\nwhere the search time goes (ms): unprofiled = median search time; profiled = one more run with the "
         "stage profiler, whose stages synchronize the device and so slow it; search gaps = profiled - stages "
         "(search bookkeeping and host gaps)\n";
  table.print(out);
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (profiles[i]->persistent_phases.empty()) continue;
    std::string label;
    for (size_t l = 0; l < labels.size(); ++l) label += fmt::format(" {} {}", labels[l], label_values[i * labels.size() + l]);
    print_phase_table(out, label, *profiles[i], shape, element_bytes);
  }
}

// Each engine's lines and time to its last line, then the tail: how long the last engine ran after the
// first had finished (time one GPU decodes alone).
std::string engine_shares(const std::vector<bench::EngineShare>& engines) {
  std::string text;
  double first_done = engines.front().seconds, last_done = engines.front().seconds;
  for (const bench::EngineShare& engine : engines) {
    if (!text.empty()) text += "; ";
    text += fmt::format("cuda:{} {} lines, done at {:.3f} s (search {:.3f} s)", engine.device_index, engine.sentences,
                        engine.seconds, engine.search_seconds);
    first_done = std::min(first_done, engine.seconds);
    last_done = std::max(last_done, engine.seconds);
  }
  return text + fmt::format("; tail {:.3f} s", last_done - first_done);
}

}  // namespace

// The family a config's layout is (bench::SyntheticFamily): what the report's header names.
const char* layout_name(const ModelConfig& config) {
  if (config.kind == ModelKind::DecoderOnly) return "decoder-only (Llama)";
  if (!config.decoder.pre_norm) return "post-norm (Marian)";
  return config.decoder.embedding_layer_norm ? "pre-norm (mBART)" : "pre-norm (M2M-100/NLLB)";
}

namespace {

// "random decoder-only (Llama) Transformer 0+2 layers, d_model 64, ... (0.1M parameters)": a synthetic shape.
std::string synthetic_shape(const ModelConfig& config) {
  const bench::Row model = bench::model_row(config);
  const int64_t parameters = std::get<int64_t>(model.back().value);
  return fmt::format(
      "random {} Transformer {}+{} layers, d_model {}, {} heads ({} key/value), ffn {}, vocab {} ({:.1f}M parameters)",
      layout_name(config), config.encoder.num_layers, config.decoder.num_layers, config.d_model,
      config.decoder.num_heads, key_value_heads(config.decoder), config.decoder.ffn_dim, config.target_vocab_size,
      static_cast<double>(parameters) / 1e6);
}

}  // namespace

void print_synthetic_report(std::ostream& out, const bench::RunDescription& run, const bench::SyntheticReport& report) {
  const ModelConfig& config = report.config;
  out << fmt::format("seqtrans bench: synthetic, {} {}, {}\n", run.device, precision_name(run), synthetic_shape(config));
  print_run_lines(out, run);
  out << "forced output length (EOS suppressed until it); time = one search of the whole batch, encoder included\n\n";

  TextTable table;
  for (const char* header : {"beam", "batch", "src", "tgt", "median ms", "min ms", "gen tok/s", "sent/s", "ms/step",
                             "peak MiB", "GB/s", "floor ms", "bound", "x of floor"})
    table.add_column(header);
  for (const bench::SyntheticResult& result : report.results) {
    const bench::GridPoint& point = result.point;
    std::vector<std::string> cells = {std::to_string(point.beam),
                                      std::to_string(point.batch),
                                      std::to_string(point.source_length),
                                      std::to_string(point.target_length),
                                      milliseconds(result.time.median),
                                      milliseconds(result.time.min),
                                      rate(result.generated_tokens_per_second),
                                      fmt::format("{:.1f}", result.sentences_per_second),
                                      fmt::format("{:.3f}", 1e3 * result.seconds_per_step),
                                      mebibytes(result.memory.peak_bytes)};
    for (std::string& cell : floor_cells(result.floor, result.time.median, run.hardware.known()))
      cells.push_back(std::move(cell));
    table.add_row(std::move(cells));
  }
  table.print(out);
  if (!report.results.empty())
    out << "peak MiB: " << report.results.front().memory.what << ", highest so far in the process\n";

  if (run.repetitions.profile) {
    std::vector<std::string> values;
    std::vector<double> unprofiled;
    std::vector<const bench::StageProfile*> profiles;
    for (const bench::SyntheticResult& result : report.results) {
      values.push_back(std::to_string(result.point.beam));
      values.push_back(std::to_string(result.point.batch));
      values.push_back(std::to_string(result.point.source_length));
      values.push_back(std::to_string(result.point.target_length));
      unprofiled.push_back(result.time.median);
      profiles.push_back(&*result.profile);
    }
    print_profile_table(out, {"beam", "batch", "src", "tgt"}, values, unprofiled, profiles, bench::model_shape(config),
                        static_cast<int64_t>(dtype_size(run.dtype)));
  }

  if (!report.results.empty() && !report.results.front().ablations.empty()) {
    TextTable ablations;
    for (const char* header : {"beam", "batch", "src", "tgt"}) ablations.add_column(header);
    ablations.add_column("idea", TextTable::Align::Left);
    for (const char* header : {"with ms", "without ms", "speedup"}) ablations.add_column(header);
    for (const bench::SyntheticResult& result : report.results)
      for (const bench::AblationResult& ablation : result.ablations)
        ablations.add_row({std::to_string(result.point.beam), std::to_string(result.point.batch),
                           std::to_string(result.point.source_length), std::to_string(result.point.target_length),
                           ablation.idea, milliseconds(ablation.with_idea.median),
                           milliseconds(ablation.without_idea.median), fmt::format("{:.2f}x", ablation.speedup())});
    out << "\nablations (speedup = median without the idea / median with it)\n";
    ablations.print(out);
    const auto& measured = report.results.front().ablations;
    if (std::any_of(measured.begin(), measured.end(),
                    [](const bench::AblationResult& ablation) { return ablation.name == "naive-batching"; }))
      out << "note: with forced lengths every sentence finishes at the same step, so the shrinking batch has nothing "
             "to drop here; measure it on a real file (-m MODEL -i FILE --ablations)\n";
  }
}

void print_real_report(std::ostream& out, const bench::RunDescription& run, const bench::RealReport& report,
                       const TranslatorOptions& translator) {
  const bench::RealResult& result = report.result;
  const TranslationStats& stats = result.median_run.stats;
  out << fmt::format("seqtrans bench: {} ({} lines), model {}, {} {}, beam {}, batches of at most {} sentences / {} "
                     "tokens\n",
                     run.input, report.lines, run.model, run.device, precision_name(run),
                     report.search.beam_size, translator.batching.max_batch_size,
                     translator.batching.max_batch_tokens);
  print_run_lines(out, run);
  out << '\n';

  const auto line = [&](const std::string& name, const std::string& value) {
    out << fmt::format("{:<17}{}\n", name, value);
  };
  line("time per pass", fmt::format("{:.3f} s median (min {:.3f}, max {:.3f}) over {} runs", result.time.median,
                                    result.time.min, result.time.max, result.time.runs));
  const StartupTimes& startup = result.startup;
  line("start-up", fmt::format("{} ms to load the model and prepare the device (model file {}, device {}, "
                                "tokenizer {}, weights {}, pools {} ms), then {} ms to translate the first line alone",
                                milliseconds(result.startup_seconds), milliseconds(startup.model_file),
                                milliseconds(startup.device), milliseconds(startup.tokenizer),
                                milliseconds(startup.weights), milliseconds(startup.pools),
                                milliseconds(result.first_line_seconds)));
  line("sentences/s", fmt::format("{:.1f}", result.sentences_per_second));
  line("source tokens/s", fmt::format("{} ({} tokens, EOS included)", rate(result.source_tokens_per_second),
                                      stats.source_tokens));
  line("target tokens/s", fmt::format("{} ({} tokens, best hypotheses, EOS excluded)",
                                      rate(result.target_tokens_per_second), stats.target_tokens));
  line("line latency", fmt::format("p50 {} ms, p90 {} ms, p99 {} ms ({} encoder waves, {} decoder steps, {} graph "
                                    "recordings)",
                                    milliseconds(result.latency_p50), milliseconds(result.latency_p90),
                                    milliseconds(result.latency_p99), stats.batches, stats.decoder_steps,
                                    stats.graph_recordings));
  const std::vector<bench::EngineShare>& engines = result.median_run.engines;
  if (engines.size() > 1) line("engines", engine_shares(engines));
  line("time split", fmt::format("search {:.3f} s, text on the decoding thread {:.3f} s (tokenize {:.3f} s and "
                                 "detokenize {:.3f} s of work, on a worker beside the search), other host {:.3f} s{}",
                                 stats.search_seconds, stats.text_wait_seconds, stats.tokenize_seconds,
                                 stats.detokenize_seconds, result.other_host_seconds,
                                 engines.size() > 1 ? fmt::format(" (summed over the {} engines)", engines.size())
                                                    : std::string()));
  const SessionTimes& split = stats.search_split;
  line("search split", fmt::format("encoder {:.3f} s, decoder steps {:.3f} s ({:.1f} us each, GPU wait and copies "
                                   "included), host bookkeeping {:.3f} s",
                                   split.encode, split.model_step,
                                   stats.decoder_steps ? 1e6 * split.model_step / stats.decoder_steps : 0.0,
                                   split.search));
  line("peak memory", fmt::format("{} MiB ({})", mebibytes(result.memory.peak_bytes), result.memory.what));
  if (run.hardware.known()) {
    const bench::Floor& floor = result.floor;
    line("floor", fmt::format("{:.3f} s ({}-bound; {:.1f} GFLOP, {:.2f} GB), a lower bound from the totals",
                              floor.seconds(), floor.bound(), floor.cost.flops / 1e9, floor.cost.bytes / 1e9));
    line("x of floor", fmt::format("{:.1f} ({:.0f} GB/s reached, of {:.0f})", result.median_run.seconds / floor.seconds(),
                                   floor.achieved_bytes_per_second(result.median_run.seconds) / 1e9,
                                   run.hardware.bytes_per_second / 1e9));
  } else {
    line("floor", "n/a");
  }

  if (result.profile) {
    const bench::StageProfile& profile = *result.profile;
    print_profile_table(out, {}, {}, {result.median_run.stats.search_seconds}, {&profile},
                        bench::model_shape(report.config), static_cast<int64_t>(dtype_size(run.dtype)));
    out << fmt::format("(search time only; the profiled pass over the file took {:.3f} s in all)\n", profile.seconds);
  }
  if (!result.ablations.empty()) {
    TextTable ablations;
    ablations.add_column("idea", TextTable::Align::Left);
    for (const char* header : {"with s", "without s", "speedup"}) ablations.add_column(header);
    for (const bench::AblationResult& ablation : result.ablations)
      ablations.add_row({ablation.idea, fmt::format("{:.3f}", ablation.with_idea.median),
                         fmt::format("{:.3f}", ablation.without_idea.median), fmt::format("{:.2f}x", ablation.speedup())});
    out << "\nablations (speedup = median pass without the idea / median pass with it)\n";
    ablations.print(out);
  }
}

void print_arrival_report(std::ostream& out, const bench::RunDescription& run,
                          const std::vector<bench::ArrivalResult>& results, const ModelConfig* synthetic) {
  out << fmt::format("seqtrans bench: arrival simulation, {} on {} ({}); lines arrive at Poisson times\n", run.input,
                     run.device, precision_name(run));
  if (synthetic != nullptr) out << "model: " << synthetic_shape(*synthetic) << "\n";
  TextTable table;
  table.add_column("lines/s");
  table.add_column("batching", TextTable::Align::Left);
  for (const char* header : {"p50 s", "p90 s", "p99 s", "target tok/s", "seconds"}) table.add_column(header);
  for (const bench::ArrivalResult& result : results)
    table.add_row({fmt::format("{:g}", result.rate), bench::arrival_batching_name(result.batching),
                   fmt::format("{:.3f}", result.latency_p50_s), fmt::format("{:.3f}", result.latency_p90_s),
                   fmt::format("{:.3f}", result.latency_p99_s), rate(result.target_tokens_per_s),
                   fmt::format("{:.2f}", result.seconds)});
  table.print(out);
}

}  // namespace seqtrans::app

#include "bench/real_run.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <utility>

#include <fmt/format.h>

#include "bench/statistics.h"
#include "core/error.h"

namespace seqtrans::bench {
namespace {

using Clock = std::chrono::steady_clock;

// What one run added to the translator's running totals.
TranslationStats difference(const TranslationStats& after, const TranslationStats& before) {
  TranslationStats run;
  run.sentences = after.sentences - before.sentences;
  run.source_tokens = after.source_tokens - before.source_tokens;
  run.target_tokens = after.target_tokens - before.target_tokens;
  run.batches = after.batches - before.batches;
  run.tokenize_seconds = after.tokenize_seconds - before.tokenize_seconds;
  run.search_seconds = after.search_seconds - before.search_seconds;
  run.detokenize_seconds = after.detokenize_seconds - before.detokenize_seconds;
  run.text_wait_seconds = after.text_wait_seconds - before.text_wait_seconds;
  run.search_split = after.search_split - before.search_split;
  run.decoder_steps = after.decoder_steps - before.decoder_steps;
  run.graph_recordings = after.graph_recordings - before.graph_recordings;
  run.sentence_seconds.assign(
      after.sentence_seconds.begin() + static_cast<std::ptrdiff_t>(before.sentence_seconds.size()),
      after.sentence_seconds.end());
  return run;
}

std::vector<std::vector<Line>> read_windows(const std::string& path, size_t read_ahead, const LineText& line_text) {
  LineReader reader = LineReader::open(path, read_ahead);
  std::vector<std::vector<Line>> windows;
  for (std::vector<Line> window = reader.read_window(); !window.empty(); window = reader.read_window()) {
    if (line_text)
      for (Line& line : window) line.text = line_text(line.text, line.index);
    windows.push_back(std::move(window));
  }
  return windows;
}

// Translators (one engine per device) by engine setting, each loaded once, outside any timing.
class TranslatorPool {
 public:
  TranslatorPool(const TranslatorOptions& base, const std::vector<int>& device_indices)
      : base_(base), device_indices_(device_indices) {}

  TranslatorGroup& get(const EngineSettings& settings) {
    for (auto& [key, translator] : translators_)
      if (key == settings) return *translator;
    TranslatorOptions options = base_;
    apply(settings, options.model, options.search);
    options.batching_mode = settings.batching;
    translators_.emplace_back(settings, std::make_unique<TranslatorGroup>(options, device_indices_));
    return *translators_.back().second;
  }

 private:
  TranslatorOptions base_;
  std::vector<int> device_indices_;
  std::vector<std::pair<EngineSettings, std::unique_ptr<TranslatorGroup>>> translators_;
};

// Timed passes over the file under different engine settings.
class FileMeasurements {
 public:
  FileMeasurements(TranslatorPool& translators, std::vector<std::vector<Line>> windows, const Repetitions& repetitions)
      : translators_(translators), windows_(std::move(windows)), repetitions_(repetitions) {}

  // One pass over the file; `translations` (when given) receives the output in input order.
  RealRun run(TranslatorGroup& translator, std::vector<Translation>* translations) {
    const std::vector<TranslationStats> before = translator.engine_stats();
    if (translations) translations->clear();
    const auto start = Clock::now();
    // The whole file as one stream, as `translate` reads it: with iteration-level batching, sentences of
    // the next window join while the last ones of this window decode.
    size_t next_window = 0;
    translator.translate_stream(
        [&] { return next_window < windows_.size() ? windows_[next_window++] : std::vector<Line>{}; },
        [&](const Line&, Translation& translation) {
          if (translations) translations->push_back(std::move(translation));
        });
    RealRun run;
    run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const std::vector<TranslationStats> after = translator.engine_stats();
    std::vector<TranslationStats> added;
    for (size_t engine = 0; engine < after.size(); ++engine) {
      added.push_back(difference(after[engine], before[engine]));
      run.engines.push_back(EngineShare{translator.device_indices()[engine], added.back().sentences,
                                        translator.last_stream_engine_seconds()[engine], added.back().search_seconds});
    }
    run.stats = sum(added);
    return run;
  }

  // Timed passes; `runs` receives every timed pass, `translations` the last one's output.
  TimingSummary time(const EngineSettings& settings, std::vector<RealRun>& runs,
                     std::vector<Translation>& translations) {
    TranslatorGroup& translator = translators_.get(settings);
    int pass = 0;
    const TimingSummary summary = summarize(time_runs(repetitions_, [&] {
      RealRun timed = run(translator, &translations);
      if (pass++ >= repetitions_.warmup) runs.push_back(timed);
      return timed.seconds;
    }));
    return summary;
  }

  // With and without the idea, passes timed alternately.
  AblationResult ablate(const Ablation& ablation) {
    TranslatorGroup& with_idea = translators_.get(ablation.with_idea);
    TranslatorGroup& without_idea = translators_.get(ablation.without_idea);
    const auto [with_seconds, without_seconds] = time_interleaved(
        repetitions_, [&] { return run(with_idea, nullptr).seconds; },
        [&] { return run(without_idea, nullptr).seconds; });
    return AblationResult{ablation.name, ablation.idea, summarize(with_seconds), summarize(without_seconds)};
  }

  StageProfile profile(const EngineSettings& settings) {
    TranslatorGroup& translator = translators_.get(settings);
    return profile_run([&](double& seconds) {
      const RealRun pass = run(translator, nullptr);
      seconds = pass.seconds;
      return pass.stats.search_seconds;
    });
  }

 private:
  TranslatorPool& translators_;
  std::vector<std::vector<Line>> windows_;
  Repetitions repetitions_;
};

const RealRun& median_run(const std::vector<RealRun>& runs) {
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return runs[a].seconds < runs[b].seconds; });
  return runs[order[(order.size() - 1) / 2]];
}

}  // namespace

RealReport run_real(const RealOptions& options, const std::function<void(const std::string&)>& progress) {
  SEQTRANS_CHECK(options.repetitions.runs >= 1, "benchmark: runs {} must be at least 1", options.repetitions.runs);
  SEQTRANS_CHECK(options.repetitions.warmup >= 0, "benchmark: warm-up runs {} must be at least 0",
                 options.repetitions.warmup);
  std::vector<std::vector<Line>> windows =
      read_windows(options.input, options.translator.batching.read_ahead, options.line_text);
  RealReport report;
  for (const auto& window : windows) report.lines += window.size();
  SEQTRANS_CHECK(report.lines > 0, "benchmark: '{}' has no lines", options.input);

  TranslatorPool translators(options.translator, options.device_indices);
  RealResult& result = report.result;
  auto start = Clock::now();
  TranslatorGroup& base = translators.get(options.engine);
  result.startup_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.startup = base.startup_times();
  start = Clock::now();
  base.translate({windows.front().front()});
  result.first_line_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.config = base.model_file().config();
  report.search = base.options().search;
  const std::vector<Ablation> chosen_ablations =
      ablations_to_run(options.ablations, options.engine, options.translator.device, Workload::RealFile,
                       report.config.target_vocab_size, options.only_ablations);
  FileMeasurements measurements(translators, std::move(windows), options.repetitions);

  std::vector<RealRun> runs;
  result.time = measurements.time(options.engine, runs, report.translations);
  result.median_run = median_run(runs);
  const RealRun& run = result.median_run;
  const TranslationStats& stats = run.stats;
  result.sentences_per_second = static_cast<double>(stats.sentences) / run.seconds;
  result.source_tokens_per_second = static_cast<double>(stats.source_tokens) / run.seconds;
  result.target_tokens_per_second = static_cast<double>(stats.target_tokens) / run.seconds;
  if (!stats.sentence_seconds.empty()) {
    result.latency_p50 = percentile(stats.sentence_seconds, 50);
    result.latency_p90 = percentile(stats.sentence_seconds, 90);
    result.latency_p99 = percentile(stats.sentence_seconds, 99);
  }
  double engine_seconds = 0;
  for (const EngineShare& engine : run.engines) engine_seconds += engine.seconds;
  result.other_host_seconds = engine_seconds - stats.search_seconds - stats.text_wait_seconds;
  result.memory = peak_memory(options.translator.device);

  RunTotals totals;
  totals.sentences = static_cast<int64_t>(stats.sentences);
  totals.source_tokens = static_cast<int64_t>(stats.source_tokens);
  totals.target_tokens = static_cast<int64_t>(stats.target_tokens);
  totals.batches = static_cast<int64_t>(stats.batches);
  totals.max_batch_sentences = static_cast<int64_t>(options.translator.batching.max_batch_size);
  totals.beam = report.search.beam_size;
  const ElementBytes element_bytes = element_bytes_of(options.translator.dtype, options.translator.model.int8_weights);
  result.floor = make_floor(run_totals_cost(model_shape(report.config), totals, element_bytes), options.hardware);
  if (progress)
    progress(fmt::format("{} lines: {:.3f} s median of {} runs, {:.1f} target tokens/s", report.lines,
                         result.time.median, result.time.runs, result.target_tokens_per_second));

  if (options.repetitions.profile) result.profile = measurements.profile(options.engine);
  for (const Ablation& ablation : chosen_ablations) {
    const AblationResult measured = measurements.ablate(ablation);
    if (progress)
      progress(fmt::format("{}: {:.2f}x ({:.3f} s with, {:.3f} s without)", ablation.idea, measured.speedup(),
                           measured.with_idea.median, measured.without_idea.median));
    result.ablations.push_back(measured);
  }
  return report;
}

}  // namespace seqtrans::bench

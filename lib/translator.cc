#include "translator.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include "memory_budget.h"
#include "models/encoder_decoder_model.h"
#include "ops/runtime.h"
#include "models/model_file.h"
#include "search/search.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace seqtrans {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TokenizerSpec tokenizer_spec(const ModelFile& file) {
  TokenizerSpec spec;
  spec.source_spm = file.tokenizer().source_spm;
  spec.target_spm = file.tokenizer().target_spm;
  spec.source_vocab = file.tokenizer().source_vocab;
  spec.target_vocab = file.tokenizer().target_vocab;
  spec.special_ids = {file.config().eos_id, file.config().unk_id, file.config().pad_id};
  return spec;
}

Translator::Translator(const TranslatorOptions& options) : options_(options) {
  validate(options_.batching);
  SEQTRANS_CHECK(options_.max_input_length >= 1, "--max-input-length must be at least 1");
  if (options_.cpu_threads > 0) ops::set_cpu_threads(options_.cpu_threads);
  file_ = std::make_unique<ModelFile>(ModelFile::open(options_.model_path));
  // Before anything sized by the beam: the model's num_beams may replace it.
  resolve_search(options_.search, options_.open_settings);
  options_.max_input_length =
      std::min(options_.max_input_length, static_cast<size_t>(file_->config().max_positions));
  ReservationInputs reservation_inputs{options_.dtype, options_.batching, slots_per_sentence(options_.search),
                                       options_.max_input_length};
  if (options_.device != Device::CPU) {
    // A budget the device cannot hold is lowered to what fits, not refused.
    FittedBudget fitted = fit_budget_to_memory(
        *file_, reservation_inputs, ops::available_device_memory(options_.device, options_.device_index));
    options_.batching = reservation_inputs.batching = fitted.batching;
    if (!fitted.note.empty()) notes_.push_back(std::move(fitted.note));
  }
  ops::initialize_device(options_.device, options_.device_index, device_reservation(*file_, reservation_inputs));
  tokenizer_ = std::make_unique<Tokenizer>(tokenizer_spec(*file_));
  options_.model.device = options_.device;
  options_.model.dtype = options_.dtype;
  model_ = std::make_unique<EncoderDecoderModel>(*file_, options_.model);
  start_decoding();
}

void Translator::resolve_search(const SearchOptions& search, const OpenSettings& open) {
  SearchOptions resolved = search;
  const SettingSources sources = apply_generation_defaults(file_->generation_defaults(), open, resolved);
  SEQTRANS_CHECK(resolved.num_hypotheses <= slots_per_sentence(resolved), "--n-best {} is larger than the beam size {}",
                 resolved.num_hypotheses, resolved.beam_size);
  validate_options(resolved);
  options_.search = resolved;
  options_.open_settings = open;
  setting_sources_ = sources;
}

void Translator::start_decoding() {
  ops::select_device(options_.device, options_.device_index);
  stream_interrupted_ = false;
  scheduler_.reset();  // the old decode's pools go back before the new one reserves its own
  SchedulerOptions scheduling;
  scheduling.batching = options_.batching_mode;
  scheduling.max_sentences = options_.batching.max_batch_size;
  scheduling.max_tokens = options_.batching.max_batch_tokens;
  scheduling.min_join = options_.min_join > 0 ? options_.min_join : std::max<size_t>(1, scheduling.max_sentences / 2);
  scheduler_ = std::make_unique<DecodingScheduler>(*model_, options_.search, scheduling);
  // The pools' rows are sized for the budget now, so that steps never move them (and graphs are recorded
  // once per bucket). Their positions grow with the longest source and output met: reserving the longest
  // allowed would hold memory most inputs never use.
  DecoderReservation reservation;
  reservation.sentences = static_cast<int64_t>(options_.batching.max_batch_size);
  reservation.slots = reservation.sentences * slots_per_sentence(options_.search);
  model_->reserve(scheduler_->state(), reservation);  // through the scheduler's state
}

void Translator::set_search(const SearchOptions& search, const OpenSettings& open) {
  resolve_search(search, open);
  start_decoding();
}

Translator::~Translator() = default;

std::string Translator::search_settings_summary() const {
  return describe_search_settings(options_.search, setting_sources_, file_->generation_defaults());
}

std::vector<int32_t> Translator::source_ids(const Line& line, const WarningSink& warn) {
  if (is_blank(line.text)) return {};  // an empty line in, an empty line out
  std::vector<int32_t> ids = tokenizer_->encode_source(line.text);
  const size_t original = ids.size();
  if (tokenizer_->truncate_source(ids, options_.max_input_length) && warn)
    warn(fmt::format("line {}: {} source tokens, truncated to {} (--max-input-length)", line.index + 1, original,
                     ids.size()));
  return ids;
}

std::vector<int32_t> Translator::prefix_ids(const Line& line) const {
  const std::vector<std::string>& prefixes = options_.target_prefixes;
  if (prefixes.empty()) return {};
  SEQTRANS_CHECK(line.index < prefixes.size(), "--target-prefix has {} lines; input line {} has none",
                 prefixes.size(), line.index + 1);
  return tokenizer_->encode_target_prefix(prefixes[line.index]);
}

Translation Translator::detokenize(const SearchResult& result) {
  Translation translation;
  for (const Hypothesis& hypothesis : result.hypotheses) {
    translation.texts.push_back(tokenizer_->decode_target(hypothesis.tokens));
    translation.scores.push_back(hypothesis.score);
  }
  if (!result.hypotheses.empty()) stats_.target_tokens += result.hypotheses.front().tokens.size();
  return translation;
}

Translation Translator::blank_translation() const {
  Translation translation;
  translation.texts.assign(static_cast<size_t>(options_.search.num_hypotheses), "");
  translation.scores.assign(static_cast<size_t>(options_.search.num_hypotheses), 0.0f);
  return translation;
}

void Translator::translate_stream(const LineFeed& feed, const TranslationSink& sink, const WarningSink& warn) {
  // The caller's thread may be new to this translator (one engine per device, each on its own thread).
  ops::select_device(options_.device, options_.device_index);
  // A stream that ended in an exception (an input or output error, a group stopping its engines) left
  // sentences in the running decode: start a clean one.
  if (stream_interrupted_) start_decoding();
  stream_interrupted_ = true;
  // Lines from the first not yet handed to the sink on, in input order; sentence ids count lines.
  struct Pending {
    Line line;
    Translation translation;
    Clock::time_point read;
    bool done = false;
  };
  std::deque<Pending> pending;
  uint64_t first_id = 0;  // id of pending.front()
  LineQueue queue(feed, options_.batching.read_ahead);
  std::vector<FinishedSentence> finished;
  const size_t refill_below = 2 * options_.batching.max_batch_size;

  for (;;) {
    // More input once the waiting sentences run low: a whole read-ahead, sorted by length, so that
    // batches (and waves) hold similar lengths. With nothing to decode, wait for input.
    if (scheduler_->waiting() < refill_below) {
      const bool idle = scheduler_->idle();
      if (idle && queue.drained() && pending.empty()) break;
      auto start = Clock::now();
      std::vector<Line> lines = queue.take(options_.batching.read_ahead, idle && !queue.drained());
      std::vector<SessionSentence> sentences;
      for (Line& line : lines) {
        const uint64_t id = first_id + pending.size();
        std::vector<int32_t> ids = source_ids(line, warn);
        stats_.source_tokens += ids.size();
        const bool blank = ids.empty();
        if (!blank) sentences.push_back(SessionSentence{id, std::move(ids), line.index, prefix_ids(line)});
        pending.push_back(Pending{std::move(line), blank ? blank_translation() : Translation{}, start, blank});
      }
      std::stable_sort(sentences.begin(), sentences.end(), [](const SessionSentence& a, const SessionSentence& b) {
        return a.source.size() > b.source.size();
      });
      for (SessionSentence& sentence : sentences) scheduler_->submit(std::move(sentence));
      stats_.tokenize_seconds += seconds_since(start);
    }

    if (!scheduler_->idle()) {
      auto start = Clock::now();
      const SchedulerStats before = scheduler_->stats();
      finished.clear();
      scheduler_->iterate(finished);
      stats_.search_seconds += seconds_since(start);
      stats_.batches += scheduler_->stats().waves - before.waves;
      stats_.decoder_steps += scheduler_->stats().steps - before.steps;
      stats_.graph_recordings = static_cast<size_t>(model_->step_counts().captured);
      stats_.search_split = scheduler_->times();
      if (scheduler_->stats().memory_retries > before.memory_retries && warn)
        warn(fmt::format("out of device memory: continuing with at most {} sentences in flight",
                         scheduler_->max_sentences()));
      start = Clock::now();
      for (FinishedSentence& sentence : finished) {
        Pending& line = pending[static_cast<size_t>(sentence.id - first_id)];
        line.translation = detokenize(sentence.result);
        line.done = true;
        stats_.sentence_seconds.push_back(seconds_since(line.read));
      }
      stats_.detokenize_seconds += seconds_since(start);
    }
    while (!pending.empty() && pending.front().done) {
      sink(pending.front().line, pending.front().translation);
      pending.pop_front();
      ++first_id;
      ++stats_.sentences;
    }
  }
  stream_interrupted_ = false;
}

std::vector<Translation> Translator::translate(const std::vector<Line>& lines, const WarningSink& warn) {
  return translate_window(*this, lines, warn);
}

}  // namespace seqtrans

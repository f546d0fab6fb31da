#include "translator.h"

#include <algorithm>
#include <chrono>
#include <deque>

#include "models/encoder_decoder_model.h"
#include "ops/runtime.h"
#include "models/model_file.h"
#include "search/search.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

extern "C" void openblas_set_num_threads(int threads);

namespace seqtrans {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Device memory taken at start: the weights plus the largest batch's working set (decoder caches for
// every beam up to the model's positions, encoder activations of a full token budget), with headroom.
// The arena still grows if a batch needs more, but a well-sized reservation makes that rare.
size_t device_reservation(const ModelFile& file, const TranslatorOptions& options) {
  const ModelConfig& config = file.config();
  const size_t element = options.dtype == DataType::F16 ? 2 : 4;
  size_t weights = 0;
  for (const auto& [name, tensor] : file.tensors()) weights += static_cast<size_t>(tensor.elements()) * element;
  const size_t slots = options.batching.max_batch_size * static_cast<size_t>(slots_per_sentence(options.search));
  const size_t steps = std::min<size_t>(config.max_positions, 256);
  const size_t caches = 2 * slots * steps * config.d_model * element * config.decoder.num_layers;
  // A batch never holds more tokens than its sentence cap times the longest allowed source.
  const size_t batch_tokens = std::min(options.batching.max_batch_tokens,
                                       options.batching.max_batch_size * options.max_input_length);
  const size_t encoder =
      batch_tokens * (4 * config.d_model + std::max(config.encoder.ffn_dim, config.decoder.ffn_dim)) * element * 4;
  // Logits are fp32; each recorded decoder step (CUDA graph) keeps its own, and at most two live at once.
  const size_t logits = slots * static_cast<size_t>(config.target_vocab_size) * sizeof(float);
  return weights + caches + encoder + 3 * logits + (64u << 20);
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
  if (options_.cpu_threads > 0) openblas_set_num_threads(options_.cpu_threads);
  file_ = std::make_unique<ModelFile>(ModelFile::open(options_.model_path));
  // Before anything sized by the beam: the model's num_beams may replace it.
  setting_sources_ = apply_generation_defaults(file_->generation_defaults(), options_.open_settings, options_.search);
  SEQTRANS_CHECK(options_.search.num_hypotheses <= slots_per_sentence(options_.search),
                 "--n-best {} is larger than the beam size {}", options_.search.num_hypotheses,
                 options_.search.beam_size);
  validate_options(options_.search);
  options_.max_input_length =
      std::min(options_.max_input_length, static_cast<size_t>(file_->config().max_positions));
  ops::initialize_device(options_.device, options_.device_index, device_reservation(*file_, options_));
  tokenizer_ = std::make_unique<Tokenizer>(tokenizer_spec(*file_));
  options_.model.device = options_.device;
  options_.model.dtype = options_.dtype;
  model_ = std::make_unique<EncoderDecoderModel>(*file_, options_.model);

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
}

std::vector<Translation> Translator::translate(const std::vector<Line>& lines, const WarningSink& warn) {
  std::vector<Translation> translations;
  translations.reserve(lines.size());
  bool fed = false;
  translate_stream(
      [&] {
        if (fed) return std::vector<Line>{};
        fed = true;
        return lines;
      },
      [&](const Line&, Translation& translation) { translations.push_back(std::move(translation)); }, warn);
  return translations;
}

}  // namespace seqtrans

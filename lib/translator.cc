#include "translator.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <future>
#include <iterator>
#include <optional>
#include <thread>

#include "memory_budget.h"
#include "models/encoder_decoder_model.h"
#include "ops/runtime.h"
#include "format/model_file.h"
#include "search/search.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace seqtrans {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

PromptSpacePrefix prompt_space_prefix(SpacePrefix prefix) {
  switch (prefix) {
    case SpacePrefix::First: return PromptSpacePrefix::First;
    case SpacePrefix::Always: return PromptSpacePrefix::Always;
    case SpacePrefix::Never: return PromptSpacePrefix::Never;
  }
  return PromptSpacePrefix::First;
}

}  // namespace

TokenizerSpec tokenizer_spec(const ModelFile& file) {
  TokenizerSpec spec;
  spec.source_spm = file.tokenizer().source_spm;
  spec.target_spm = file.tokenizer().target_spm;
  spec.source_vocab = file.tokenizer().source_vocab;
  spec.target_vocab = file.tokenizer().target_vocab;
  spec.special_ids = {file.config().eos_id, file.config().unk_id, file.config().pad_id};
  for (const LanguageCode& language : file.tokenizer().language_codes)
    spec.language_codes.push_back(LanguageToken{language.code, language.id});
  spec.source_language = file.tokenizer().source_language == LanguagePlacement::SourceSuffix
                             ? SourceLanguagePlacement::Suffix
                             : SourceLanguagePlacement::Prefix;
  if (const std::optional<PromptFraming>& framing = file.tokenizer().prompt) {
    spec.special_ids.bos = file.config().bos_id;
    spec.prompt = PromptSpec{framing->add_bos, prompt_space_prefix(framing->space_prefix)};
  }
  return spec;
}

namespace {

// Throws one line unless every entry of `languages` suits `tokenizer` (none given: the empty pair).
void check_languages(const Tokenizer& tokenizer, const std::vector<Languages>& languages) {
  if (languages.empty()) tokenizer.check_languages(Languages{});
  for (const Languages& pair : languages) tokenizer.check_languages(pair);
}

}  // namespace

Translator::Translator(const TranslatorOptions& options) : options_(options) {
  validate(options_.batching);
  SEQTRANS_CHECK(options_.max_input_length >= 1, "--max-input-length must be at least 1");
  if (options_.cpu_threads > 0) ops::set_cpu_threads(options_.cpu_threads);
  // Before the tokenizer and the weights load: the pool's start frees the core the BLAS library's threads
  // poll until then.
  if (options_.device == Device::CPU) ops::start_cpu_threads();
  Clock::time_point phase = Clock::now();
  const auto lap = [&phase](double& seconds) {
    seconds = seconds_since(phase);
    phase = Clock::now();
  };
  file_ = std::make_unique<ModelFile>(ModelFile::open(options_.model_path));
  // Before anything sized by the beam: the model's num_beams may replace it.
  resolve_search(options_.search, options_.open_settings);
  // A decoder-only model's prompt leaves at least one position to generate in.
  const ModelConfig& config = file_->config();
  const int positions = config.kind == ModelKind::DecoderOnly ? config.max_positions - 1 : config.max_positions;
  options_.max_input_length = std::min(options_.max_input_length, static_cast<size_t>(std::max(positions, 1)));
  lap(startup_.model_file);
  // The tokenizer loads on another thread while the device initializes (a CUDA context takes ~100 ms) and
  // the weights are placed.
  std::future<std::unique_ptr<Tokenizer>> tokenizer =
      std::async(std::launch::async, [this] { return make_tokenizer(tokenizer_spec(*file_)); });
  ReservationInputs reservation_inputs{options_.dtype, options_.batching, slots_per_sentence(options_.search),
                                       options_.max_input_length};
  {
    // A budget the device (or the host, for the CPU backend) cannot hold is lowered to what fits, not refused.
    AvailableMemory memory;
    memory.bytes = ops::available_device_memory(options_.device, options_.device_index);
    memory.host = options_.device == Device::CPU;
    memory.capped = !memory.host && options_.max_gpu_memory > 0 && options_.max_gpu_memory < memory.bytes;
    if (memory.capped) memory.bytes = options_.max_gpu_memory;
    FittedBudget fitted = fit_budget_to_memory(*file_, reservation_inputs, memory);
    options_.batching = reservation_inputs.batching = fitted.batching;
    if (!fitted.note.empty()) notes_.push_back(std::move(fitted.note));
  }
  ops::initialize_device(options_.device, options_.device_index, device_reservation(*file_, reservation_inputs),
                         arena_limit_bytes(options_.max_gpu_memory));
  lap(startup_.device);
  options_.model.device = options_.device;
  options_.model.dtype = options_.dtype;
  model_ = make_engine_model(*file_, options_.model);
  lap(startup_.weights);
  tokenizer_ = tokenizer.get();
  // Languages given are checked now; a multilingual model may also get them per call (Python), so their
  // absence is refused when a stream starts.
  if (!options_.languages.empty()) check_languages(*tokenizer_, options_.languages);
  worker_ = std::make_unique<WorkerThread>();
  lap(startup_.tokenizer);  // what was left of it once the device and the weights were ready
  start_decoding();
  lap(startup_.pools);
}

// The arena's cap: --max-gpu-memory, or SEQTRANS_TEST_ARENA_LIMIT_MIB, a test hook that caps the arena
// without fitting the budget under it, so that a run meets the cap in flight (the GPU e2e test of halving).
// It stays because no user setting reaches that path on purpose (--max-gpu-memory fits the budget first).
size_t Translator::arena_limit_bytes(size_t max_gpu_memory) {
  const char* test_limit = std::getenv("SEQTRANS_TEST_ARENA_LIMIT_MIB");
  if (test_limit == nullptr || *test_limit == '\0') return max_gpu_memory;
  return static_cast<size_t>(std::strtoull(test_limit, nullptr, 10)) << 20;
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

SchedulerOptions scheduler_options(const TranslatorOptions& options) {
  SchedulerOptions scheduling;
  scheduling.batching = options.batching_mode;
  scheduling.max_sentences = options.batching.max_batch_size;
  scheduling.max_tokens = options.batching.max_batch_tokens;
  scheduling.min_join = options.min_join > 0 ? options.min_join : std::max<size_t>(1, scheduling.max_sentences / 2);
  return scheduling;
}

void Translator::start_decoding() {
  ops::select_device(options_.device, options_.device_index);
  stream_interrupted_ = false;
  scheduler_.reset();  // the old decode's pools go back before the new one reserves its own
  const SchedulerOptions scheduling = scheduler_options(options_);
  scheduler_ = std::make_unique<DecodingScheduler>(*model_, options_.search, scheduling);
  // The pools' rows are sized for the budget now, so that steps never move them (and graphs are recorded
  // once per bucket). Their positions grow with the longest source and output met: reserving the longest
  // allowed would hold memory most inputs never use. A device with less free than the budget was fitted to
  // (another process took some since) halves the sentences until the reservation fits.
  scheduler_->reserve_pools();
  if (scheduler_->max_sentences() < scheduling.max_sentences)
    notes_.push_back(fmt::format("note: out of device memory reserving for {} sentences: at most {} in flight",
                                 scheduling.max_sentences, scheduler_->max_sentences()));
}

void Translator::set_languages(const std::vector<Languages>& languages) {
  check_languages(*tokenizer_, languages);
  options_.languages = languages;
}

void Translator::set_search(const SearchOptions& search, const OpenSettings& open) {
  resolve_search(search, open);
  start_decoding();
}

Translator::~Translator() {
  // The members free device memory and graphs: on this engine's device, whichever thread destroys it (with
  // several GPUs the caller's thread may have selected none).
  try {
    ops::select_device(options_.device, options_.device_index);
  } catch (...) {  // a destructor must not throw; the members then release what they can
  }
}

std::string Translator::search_settings_summary() const {
  return describe_search_settings(options_.search, setting_sources_, file_->generation_defaults());
}

namespace {

// A window's non-blank lines as sentences, longest first (batches and waves then hold similar lengths),
// with what the tokenizing thread would have reported.
struct TokenizedLines {
  std::vector<SessionSentence> sentences;
  std::vector<std::string> warnings;  // truncated lines, in line order
  size_t source_tokens = 0;
  double seconds = 0;
};

// Finished sentences' texts, by sentence id.
struct DetokenizedSentences {
  std::vector<std::pair<uint64_t, Translation>> translations;
  size_t target_tokens = 0;  // of the best hypotheses
  double seconds = 0;
};

// What tokenizing needs of the translator's settings (copied: the task may outlive a stream).
struct TokenizeSettings {
  size_t max_input_length = 0;
  const std::vector<std::string>* target_prefixes = nullptr;  // the translator's, fixed while a stream runs
  const std::vector<Languages>* languages = nullptr;          // likewise
};

// The languages of input line `index` (none: the empty pair; one entry: every line's).
const Languages& languages_of(const std::vector<Languages>& languages, size_t index) {
  static const Languages none;
  if (languages.empty()) return none;
  if (languages.size() == 1) return languages.front();
  SEQTRANS_CHECK(index < languages.size(), "languages are given for {} lines; input line {} has none",
                 languages.size(), index + 1);
  return languages[index];
}

// Lines (none blank) whose sentence ids are first_id, first_id + 1, ... in order.
// Lines [begin, end) of `lines`, unsorted; seconds: the work's time.
TokenizedLines tokenize_range(const Tokenizer& tokenizer, const TokenizeSettings& settings,
                              const std::vector<Line>& lines, const std::vector<uint64_t>& ids, size_t begin,
                              size_t end) {
  const Clock::time_point start = Clock::now();
  TokenizedLines tokenized;
  for (size_t i = begin; i < end; ++i) {
    const Line& line = lines[i];
    const Languages& languages = languages_of(*settings.languages, line.index);
    std::vector<int32_t> source = tokenizer.encode_source(line.text, languages.source);
    const size_t original = source.size();
    if (tokenizer.truncate_source(source, settings.max_input_length))
      tokenized.warnings.push_back(fmt::format("line {}: {} source tokens, truncated to {} (--max-input-length)",
                                               line.index + 1, original, source.size()));
    // The target language's token (generated), then the line's target prefix (a prompt); with a prefix the
    // language token becomes part of the prompt, as in HF's decoder_input_ids.
    std::vector<int32_t> start = tokenizer.target_start(languages.target);
    size_t generated = start.size();
    const std::vector<std::string>& prefixes = *settings.target_prefixes;
    if (!prefixes.empty()) {
      SEQTRANS_CHECK(line.index < prefixes.size(), "--target-prefix has {} lines; input line {} has none",
                     prefixes.size(), line.index + 1);
      const std::vector<int32_t> prefix = tokenizer.encode_target_prefix(prefixes[line.index]);
      if (!prefix.empty()) generated = 0;
      start.insert(start.end(), prefix.begin(), prefix.end());
    }
    tokenized.source_tokens += source.size();
    tokenized.sentences.push_back(SessionSentence{ids[i], std::move(source), line.index, {std::move(start), generated}});
  }
  tokenized.seconds = seconds_since(start);
  return tokenized;
}

// Below this many lines a thread of its own costs more than it saves.
constexpr size_t kLinesPerTokenizerThread = 256;
constexpr size_t kMostTokenizerThreads = 8;

// The lines' sources, longest first (ties in line order). A read-ahead is tokenized on several threads (the
// tokenizer is const): a run's first one is done in place, before any decoding, and took 0.06 s of a
// 0.5 s newstest2014 pass on one thread. seconds: the work, summed over threads.
TokenizedLines tokenize_lines(const Tokenizer& tokenizer, const TokenizeSettings& settings,
                              const std::vector<Line>& lines, const std::vector<uint64_t>& ids) {
  const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t threads =
      std::clamp<size_t>(lines.size() / kLinesPerTokenizerThread, 1, std::min(cores, kMostTokenizerThreads));
  const size_t per_thread = (lines.size() + threads - 1) / threads;
  std::vector<std::future<TokenizedLines>> others;
  for (size_t t = 1; t < threads; ++t) {
    const size_t begin = std::min(lines.size(), t * per_thread), end = std::min(lines.size(), begin + per_thread);
    others.push_back(std::async(std::launch::async, [&, begin, end] {
      return tokenize_range(tokenizer, settings, lines, ids, begin, end);
    }));
  }
  TokenizedLines tokenized = tokenize_range(tokenizer, settings, lines, ids, 0, std::min(lines.size(), per_thread));
  for (std::future<TokenizedLines>& other : others) {  // in line order; get() rethrows a thread's error
    TokenizedLines part = other.get();
    std::move(part.sentences.begin(), part.sentences.end(), std::back_inserter(tokenized.sentences));
    std::move(part.warnings.begin(), part.warnings.end(), std::back_inserter(tokenized.warnings));
    tokenized.source_tokens += part.source_tokens;
    tokenized.seconds += part.seconds;
  }
  std::stable_sort(tokenized.sentences.begin(), tokenized.sentences.end(),
                   [](const SessionSentence& a, const SessionSentence& b) { return a.source.size() > b.source.size(); });
  return tokenized;
}

DetokenizedSentences detokenize_sentences(const Tokenizer& tokenizer, const std::vector<FinishedSentence>& sentences) {
  const Clock::time_point start = Clock::now();
  DetokenizedSentences detokenized;
  for (const FinishedSentence& sentence : sentences) {
    Translation translation;
    for (const Hypothesis& hypothesis : sentence.result.hypotheses) {
      translation.texts.push_back(tokenizer.decode_target(hypothesis.tokens));
      translation.scores.push_back(hypothesis.score);
      translation.tokens.push_back(hypothesis.tokens.size());
    }
    if (!sentence.result.hypotheses.empty()) detokenized.target_tokens += sentence.result.hypotheses.front().tokens.size();
    detokenized.translations.emplace_back(sentence.id, std::move(translation));
  }
  detokenized.seconds = seconds_since(start);
  return detokenized;
}

}  // namespace

Translation Translator::blank_translation() const {
  Translation translation;
  translation.texts.assign(static_cast<size_t>(options_.search.num_hypotheses), "");
  translation.scores.assign(static_cast<size_t>(options_.search.num_hypotheses), 0.0f);
  translation.tokens.assign(static_cast<size_t>(options_.search.num_hypotheses), 0);
  return translation;
}

// One thread drives the decode; text work goes to worker_ while there are decoder steps to overlap it
// with, and is done in place when the decode is idle (nothing to overlap, and a waiting reader).
void Translator::translate_stream(const LineFeed& feed, const TranslationSink& sink, const WarningSink& warn) {
  check_languages(*tokenizer_, options_.languages);  // before any line is read
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
  const TokenizeSettings tokenize_settings{options_.max_input_length, &options_.target_prefixes, &options_.languages};
  std::optional<std::future<TokenizedLines>> tokenizing;
  std::deque<std::future<DetokenizedSentences>> detokenizing;

  const auto submit = [&](TokenizedLines tokenized) {
    if (warn)
      for (const std::string& warning : tokenized.warnings) warn(warning);
    stats_.source_tokens += tokenized.source_tokens;
    stats_.tokenize_seconds += tokenized.seconds;
    for (SessionSentence& sentence : tokenized.sentences) scheduler_->submit(std::move(sentence));
  };
  const auto settle = [&](DetokenizedSentences detokenized) {
    stats_.target_tokens += detokenized.target_tokens;
    stats_.detokenize_seconds += detokenized.seconds;
    for (auto& [id, translation] : detokenized.translations) {
      Pending& line = pending[static_cast<size_t>(id - first_id)];
      line.translation = std::move(translation);
      line.done = true;
      stats_.sentence_seconds.push_back(seconds_since(line.read));
    }
  };
  const auto emit_done = [&] {
    while (!pending.empty() && pending.front().done) {
      sink(pending.front().line, pending.front().translation);
      pending.pop_front();
      ++first_id;
      ++stats_.sentences;
    }
  };

  for (;;) {
    Clock::time_point text_start = Clock::now();
    // Text work that is back, or that must be waited for: an idle decode has nothing else to do.
    if (tokenizing && (is_ready(*tokenizing) || scheduler_->idle())) {
      submit(tokenizing->get());
      tokenizing.reset();
    }
    while (!detokenizing.empty() && (is_ready(detokenizing.front()) || scheduler_->idle())) {
      settle(detokenizing.front().get());
      detokenizing.pop_front();
    }
    stats_.text_wait_seconds += seconds_since(text_start);
    emit_done();

    // More input once the waiting sentences run low: a whole read-ahead, sorted by length, so that
    // batches (and waves) hold similar lengths. With nothing to decode, wait for input.
    if (!tokenizing && scheduler_->waiting() < refill_below) {
      const bool idle = scheduler_->idle();
      if (idle && queue.drained() && pending.empty()) break;
      const Clock::time_point start = Clock::now();
      text_start = start;
      std::vector<Line> lines = queue.take(options_.batching.read_ahead, idle && !queue.drained());
      std::vector<Line> texts;
      std::vector<uint64_t> ids;
      for (Line& line : lines) {
        const bool blank = is_blank(line.text);  // an empty line in, an empty line out
        if (!blank) {
          texts.push_back(line);
          ids.push_back(first_id + pending.size());
        }
        pending.push_back(Pending{std::move(line), blank ? blank_translation() : Translation{}, start, blank});
      }
      if (!texts.empty()) {
        auto task = [tokenizer = tokenizer_.get(), tokenize_settings, texts = std::move(texts), ids = std::move(ids)] {
          return tokenize_lines(*tokenizer, tokenize_settings, texts, ids);
        };
        if (idle)
          submit(task());
        else
          tokenizing = worker_->post(std::move(task));
      }
      stats_.text_wait_seconds += seconds_since(text_start);
    }

    if (!scheduler_->idle()) {
      const Clock::time_point start = Clock::now();
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
      if (!finished.empty()) {
        auto task = [tokenizer = tokenizer_.get(), sentences = std::move(finished)] {
          return detokenize_sentences(*tokenizer, sentences);
        };
        finished = {};
        // In place only behind no queued task: the tokenizer then serves one thread at a time.
        if (scheduler_->idle() && detokenizing.empty()) {
          text_start = Clock::now();
          settle(task());
          stats_.text_wait_seconds += seconds_since(text_start);
        } else {
          detokenizing.push_back(worker_->post(std::move(task)));
        }
      }
    }
    emit_done();
  }
  stream_interrupted_ = false;
}

std::vector<Translation> Translator::translate(const std::vector<Line>& lines, const WarningSink& warn) {
  return translate_window(*this, lines, warn);
}

}  // namespace seqtrans

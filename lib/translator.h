// The library's public entry: text lines in, translations out (tokenize -> batch -> encode -> search ->
// detokenize). The CLI and the benchmark only configure and call this.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "batching/line_queue.h"
#include "batching/line_reader.h"
#include "batching/options.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/worker_thread.h"
#include "generation_defaults.h"
#include "models/encoder_decoder_model.h"
#include "scheduler/decoding_scheduler.h"
#include "search/options.h"
#include "text/tokenizer.h"

namespace seqtrans {


// The tokenizer a model file describes: its SentencePiece models, vocabularies and special ids.
TokenizerSpec tokenizer_spec(const ModelFile& file);

// Where a translator's construction went, in seconds of wall time (bench's start-up line).
struct StartupTimes {
  double model_file = 0;  // reading and checking the model file
  double device = 0;      // the device's context, its free memory, the arena
  double tokenizer = 0;   // the SentencePiece models and vocabularies (loaded beside the two above: the wait left)
  double weights = 0;     // the model's tensors on the device (converted to the precision)
  double pools = 0;       // the decoder's pools, reserved for the batch budget

  double total() const { return model_file + device + tokenizer + weights + pools; }
};

struct TranslatorOptions {
  std::string model_path;
  Device device = Device::CPU;
  int device_index = 0;
  DataType dtype = DataType::F32;
  BatchingOptions batching;
  // Iteration: sentences join the running decode at any step; Shrinking: batch after batch.
  Batching batching_mode = Batching::Iteration;
  // Iteration: a wave of joining sentences waits until this many fit (see SchedulerOptions::min_join);
  // 0 = half of batching.max_batch_size.
  size_t min_join = 0;
  SearchOptions search;
  // The text each input line's translation must start with, by input line number (Line::index); an
  // empty string: none. Empty: no prefixes. The prefix is part of the translation (SessionSentence::prefix
  // says how it is scored).
  std::vector<std::string> target_prefixes;
  // Multilingual models: each line's languages by input line number (Line::index), or one pair for every
  // line (a single entry). Empty: none, which only models of one language pair accept.
  std::vector<Languages> languages;
  // Search settings left to the model file: those it records replace the values in `search`.
  OpenSettings open_settings;
  // Source tokens per sentence, EOS included; longer lines are cut (with a warning) to fit, and never
  // beyond the model's positions.
  size_t max_input_length = 1024;
  int cpu_threads = 0;  // 0 = the BLAS library's default
  // The most GPU memory the engine's tensors may take on each device, in bytes (0 = what the device has):
  // the batch budget is fitted to it, and a run that reaches it halves its sentences in flight.
  size_t max_gpu_memory = 0;
  ModelOptions model;   // device and dtype are taken from the fields above
};

// One translated line: n-best texts, best first, with their scores.
struct Translation {
  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<size_t> tokens;  // generated tokens of each, EOS excluded
};

// Counters for the summary line and `seqtrans bench`.
struct TranslationStats {
  size_t sentences = 0;
  size_t source_tokens = 0;   // EOS included
  size_t target_tokens = 0;   // best hypothesis, EOS excluded
  size_t batches = 0;       // encoder waves: the batches (shrinking) or groups of joining sentences (iteration)
  size_t decoder_steps = 0;
  size_t graph_recordings = 0;  // decoder steps recorded as CUDA graphs (each row bucket once, ideally)
  double tokenize_seconds = 0;
  double search_seconds = 0;
  SessionTimes search_split;  // search_seconds by part: encoder, decoder steps, host bookkeeping
  double detokenize_seconds = 0;
  // The decoding thread's time on text: reading lines, and tokenizing or detokenizing in place or waiting
  // for the worker (tokenize_seconds and detokenize_seconds are the work, mostly done beside the search).
  double text_wait_seconds = 0;
  std::vector<double> sentence_seconds;  // per translated line: from being read to being translated
};

// Called with each translation in input order, as soon as it and every line before it are done.
using TranslationSink = std::function<void(const Line& line, Translation& translation)>;
// Warnings (e.g. a truncated line, named by its 1-based input line number).
using WarningSink = std::function<void(const std::string&)>;

// One window of lines through an engine's translate_stream (Translator, TranslatorGroup): output i belongs
// to lines[i].
template <typename Engine>
std::vector<Translation> translate_window(Engine& engine, const std::vector<Line>& lines, const WarningSink& warn) {
  std::vector<Translation> translations;
  translations.reserve(lines.size());
  bool fed = false;
  engine.translate_stream(
      [&] {
        if (fed) return std::vector<Line>{};
        fed = true;
        return lines;
      },
      [&](const Line&, Translation& translation) { translations.push_back(std::move(translation)); }, warn);
  return translations;
}

// The decoding scheduler's budget and joining policy under these options: their batching mode, the sentences
// and source tokens in flight, and min_join (0: half the sentences).
SchedulerOptions scheduler_options(const TranslatorOptions& options);

class Translator {
 public:
  explicit Translator(const TranslatorOptions& options);
  ~Translator();

  // Translates every line `feed` yields, handing each translation to `sink` in input order. The feed runs
  // on a reader thread: with iteration-level batching a line that arrives while others are decoding
  // joins at the next step. Blank lines give an empty translation. Output i of the stream belongs to its
  // i-th line; lines are keyed by Line::index for sampling.
  void translate_stream(const LineFeed& feed, const TranslationSink& sink, const WarningSink& warn = {});
  // Translates a window of lines; output i belongs to lines[i].
  std::vector<Translation> translate(const std::vector<Line>& lines, const WarningSink& warn = {});

  // Replaces the search settings for later calls; those left open in `open` take the model file's
  // defaults, as at construction. The running decode is rebuilt for them (its pools, recorded graphs), so
  // this is for a change of settings between calls, not for every call.
  void set_search(const SearchOptions& search, const OpenSettings& open);
  // Replaces TranslatorOptions::target_prefixes for later calls (between streams, never during one).
  void set_target_prefixes(const std::vector<std::string>& target_prefixes) {
    options_.target_prefixes = target_prefixes;
  }
  // Replaces TranslatorOptions::languages for later calls (between streams); throws one line, keeping the
  // old ones, unless the model knows them.
  void set_languages(const std::vector<Languages>& languages);

  const TranslationStats& stats() const { return stats_; }
  // The options in effect: the caller's, with the model file's generation defaults applied.
  const TranslatorOptions& options() const { return options_; }
  // Beam size, length limit and forced EOS, each with where it came from (caller, model file, built-in).
  std::string search_settings_summary() const;
  const ModelFile& model_file() const { return *file_; }
  const StartupTimes& startup_times() const { return startup_; }
  // Notes from start-up for the user (e.g. a batch budget lowered to fit the device's memory).
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  // Applies the model file's defaults to the open settings of `search`, checks the result and keeps it.
  void resolve_search(const SearchOptions& search, const OpenSettings& open);
  static size_t arena_limit_bytes(size_t max_gpu_memory);
  // A new running decode (scheduler, pools) for the current search settings.
  void start_decoding();
  Translation blank_translation() const;

  TranslatorOptions options_;
  std::unique_ptr<ModelFile> file_;
  StartupTimes startup_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<EngineModel> model_;
  SettingSources setting_sources_;
  // The running decode, kept for the translator's life: its pools and recorded step graphs serve every
  // call.
  std::unique_ptr<DecodingScheduler> scheduler_;
  bool stream_interrupted_ = false;  // the last stream ended in an exception: the decode holds its leftovers
  TranslationStats stats_;
  std::vector<std::string> notes_;
  // Tokenizes and detokenizes while the calling thread drives decoder steps. Last: destroyed first,
  // finishing its tasks while the tokenizer they use still exists.
  std::unique_ptr<WorkerThread> worker_;
};

}  // namespace seqtrans

// The engine behind seqtrans.Translator, free of Python: a TranslatorGroup (one engine per device), the
// search settings of the last call, and a lock so that calls from several Python threads run one at a
// time. module.cc binds it and releases the GIL around every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "translator.h"
#include "translator_group.h"
#include "translator_settings.h"

namespace seqtrans::python {

// A Translator's construction settings, as its keyword arguments give them (defaults: the CLI's).
struct EngineArgs {
  std::string model_path;
  std::string device = "auto";
  std::string precision = "auto";
  std::string batching = "iteration";
  int threads = 0;
  std::optional<size_t> max_batch_size;    // none: the device's default (as the CLI's)
  std::optional<size_t> max_batch_tokens;  // none: the device's default
  size_t min_join = TranslatorOptions().min_join;
  size_t read_ahead = BatchingOptions().read_ahead;
  size_t max_input_length = TranslatorOptions().max_input_length;
  size_t max_gpu_memory_mib = 0;  // 0: what the device has
  bool batch_invariant = false;   // the CLI's --batch-invariant
};

// One call's search settings (defaults: the CLI's).
struct CallArgs {
  std::optional<int> beam_size;                  // none: the model file's num_beams, else 4
  int n_best = SearchOptions().num_hypotheses;
  float length_penalty = SearchOptions().length_penalty;
  std::optional<std::vector<float>> max_length;  // [A] or [A, B]; none: the model file's, else 256
  std::optional<bool> force_eos;                 // none: as the model file says
  // Sampling settings left None are not given: as the CLI's flags (TextSettings says what giving one implies).
  std::optional<int> sampling_topk;
  std::optional<float> sampling_topp;
  std::optional<float> sampling_minp;
  float temperature = SearchOptions().temperature;
  uint64_t seed = SearchOptions().seed;
  float repetition_penalty = SearchOptions().repetition_penalty;
  int no_repeat_ngram_size = SearchOptions().no_repeat_ngram_size;
  int beam_groups = SearchOptions().beam_groups;
  float diversity_penalty = SearchOptions().diversity_penalty;

  bool operator==(const CallArgs& other) const;
  bool operator!=(const CallArgs& other) const { return !(*this == other); }
};

// What a call gives line by line besides its search settings.
struct LineSettings {
  std::vector<std::string> target_prefixes;  // empty, or one per line
  std::vector<Languages> languages;          // empty, one for every line, or one per line
};

struct Hypothesis {
  std::string text;
  std::optional<float> score;  // with_scores only
  size_t tokens = 0;           // generated tokens, EOS excluded
};

// One input line's translation: its n-best hypotheses, best first.
struct Result {
  std::vector<Hypothesis> hypotheses;
};

class PythonTranslator {
 public:
  explicit PythonTranslator(const EngineArgs& args);

  // Both block on the lock, then run the engines: call them without the GIL. Warnings (truncated lines)
  // are appended to `warnings` for the caller to raise once it holds the GIL again.
  // target_prefixes: empty, or one per line (an empty string: none), as the CLI's --target-prefix file.
  // languages: empty (a model of one pair), one pair for every line, or one per line.
  std::vector<Result> translate_batch(const std::vector<std::string>& lines, const CallArgs& call, bool with_scores,
                                      const LineSettings& line_settings, std::vector<std::string>& warnings);
  // Returns the number of lines translated. languages: empty or one pair, as --source-lang/--target-lang.
  size_t translate_file(const std::string& input, const std::string& output, const CallArgs& call, bool with_scores,
                        const std::vector<Languages>& languages, std::vector<std::string>& warnings);

  const std::string& device() const { return device_; }
  size_t engines() const { return group_->engines(); }
  const std::string& model_path() const { return group_->options().model_path; }
  // "encoder-decoder" (translation models) or "decoder-only" (generation models).
  std::string model_kind() const;

 private:
  // Gives the engines `call`'s search settings and `target_prefixes` if the last call had others (under the
  // lock).
  void use(const CallArgs& call, const LineSettings& line_settings);

  std::mutex mutex_;
  std::unique_ptr<TranslatorGroup> group_;
  CallArgs current_;
  LineSettings current_lines_;
  std::string device_;
};

}  // namespace seqtrans::python

// TranslatorGroup: one Translator per device behind one front end. Input is dealt in mini-batches to
// whichever engine has room for more, and translations come back in input order. With one device the
// engine runs on the caller's thread, exactly as a Translator alone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "translator.h"

namespace seqtrans {

// Counters added up; sentence_seconds one after the other.
TranslationStats sum(const std::vector<TranslationStats>& parts);

class TranslatorGroup {
 public:
  // One engine per entry of `device_indices`, all on options.device (options.device_index is replaced).
  // Engines load in parallel. On the CPU the indices only name the engines (tests run two CPU engines).
  // With several engines each reads ahead less than options.batching.read_ahead (see engine_read_ahead),
  // so that no engine holds work another could be doing when the input ends.
  TranslatorGroup(const TranslatorOptions& options, const std::vector<int>& device_indices);
  ~TranslatorGroup();
  TranslatorGroup(const TranslatorGroup&) = delete;
  TranslatorGroup& operator=(const TranslatorGroup&) = delete;

  // As Translator::translate_stream. With several engines each runs on a thread of its own and pulls the
  // next deal_size() lines whenever its read-ahead has room, so a faster or less loaded engine takes
  // more. `sink` runs on the caller's thread, in input order; `warn` on engine threads, one at a time.
  void translate_stream(const LineFeed& feed, const TranslationSink& sink, const WarningSink& warn = {});
  // Translates a window of lines; output i belongs to lines[i].
  std::vector<Translation> translate(const std::vector<Line>& lines, const WarningSink& warn = {});
  // As Translator::set_search, on every engine.
  void set_search(const SearchOptions& search, const OpenSettings& open);
  // As Translator::set_target_prefixes and set_languages, on every engine.
  void set_target_prefixes(const std::vector<std::string>& target_prefixes);
  void set_languages(const std::vector<Languages>& languages);

  size_t engines() const { return engines_.size(); }
  // The engines' devices, in the order given.
  const std::vector<int>& device_indices() const { return device_indices_; }
  // Lines handed to an engine at a time (several engines).
  size_t deal_size() const { return deal_size_; }
  // Summed over the engines (sentence_seconds: all of them, engine by engine).
  TranslationStats stats() const { return sum(engine_stats()); }
  // Each engine's, in the order of the device indices.
  std::vector<TranslationStats> engine_stats() const;
  // Seconds from the start of the last translate_stream to the moment each engine had handed back its
  // last line, in the order of the device indices: the gap between the first and the last is the tail
  // one engine decodes alone.
  const std::vector<double>& last_stream_engine_seconds() const { return last_stream_engine_seconds_; }
  // The first engine's: every engine has the same model and settings.
  const TranslatorOptions& options() const { return engines_.front()->options(); }
  std::string search_settings_summary() const { return engines_.front()->search_settings_summary(); }
  const ModelFile& model_file() const { return engines_.front()->model_file(); }
  // The first engine's (the others start alike, on their own devices).
  const StartupTimes& startup_times() const { return engines_.front()->startup_times(); }
  // Start-up notes (a budget lowered to fit memory): the first engine's; with several GPUs, each engine
  // fits its own device, and the first one speaks for them.
  const std::vector<std::string>& notes() const { return engines_.front()->notes(); }

 private:
  void deal_stream(const LineFeed& feed, const TranslationSink& sink, const WarningSink& warn);

  std::vector<std::unique_ptr<Translator>> engines_;
  std::vector<int> device_indices_;
  std::vector<double> last_stream_engine_seconds_;
  size_t deal_size_ = 0;
  size_t max_outstanding_ = 0;  // lines dealt and not yet handed to the sink, at most
};

// The read-ahead of each engine in a group of `engines`: the whole read_ahead for one; for several, four
// batches' worth (at most read_ahead), so that each keeps its decoder full while the input's tail is
// shared out evenly.
size_t engine_read_ahead(const BatchingOptions& batching, size_t engines);

}  // namespace seqtrans

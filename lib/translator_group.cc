#include "translator_group.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"

namespace seqtrans {
namespace {

// Thrown into an engine's stream (from its sink) to end it early once the group is stopping.
struct Stopped {};

// What the caller's thread and the engine threads share while a stream runs. Held by shared_ptr: an
// engine's reader thread left blocked in the feed on an error path (LineQueue's destructor) may outlive
// the call.
struct DealState {
  explicit DealState(const LineFeed& input_feed, size_t engine_count) : feed(input_feed), held(engine_count) {}

  // Reading and dealing, one engine at a time: the caller's feed may block (interactive input) while the
  // other engines go on decoding, since they need only `mutex` to hand back their translations.
  std::mutex feed_mutex;
  LineFeed feed;
  std::vector<Line> window;  // read from the feed, not yet dealt: window[window_taken, ...)
  size_t window_taken = 0;
  bool input_ended = false;

  std::mutex mutex;
  std::condition_variable changed;
  uint64_t next_dealt = 0;  // ordinal (0-based input position) of the next line dealt
  uint64_t next_out = 0;    // ordinal of the next line for the sink
  // Per engine, the ordinals of the lines it holds, in the order it was given them (and translates them).
  std::vector<std::deque<uint64_t>> held;
  std::map<uint64_t, std::pair<Line, Translation>> done;  // translated, waiting for the lines before them
  size_t engines_running = 0;
  bool stopping = false;
  std::exception_ptr error;

  std::mutex warn_mutex;

  void stop(std::exception_ptr cause) {
    std::lock_guard<std::mutex> lock(mutex);
    if (cause && !error) error = cause;
    stopping = true;
    changed.notify_all();
  }
};

// The next lines for `engine`: up to `deal_size`, once fewer than `max_outstanding` lines are dealt and
// not yet written. Empty at the end of the input or when stopping.
std::vector<Line> deal(DealState& state, size_t engine, size_t deal_size, size_t max_outstanding) {
  std::lock_guard<std::mutex> feed_lock(state.feed_mutex);
  {
    std::unique_lock<std::mutex> lock(state.mutex);
    state.changed.wait(lock, [&] { return state.stopping || state.next_dealt - state.next_out < max_outstanding; });
    if (state.stopping) return {};
  }
  if (state.window_taken == state.window.size() && !state.input_ended) {
    state.window_taken = 0;
    try {
      state.window = state.feed();
    } catch (...) {
      state.window.clear();
      state.input_ended = true;
      throw;  // through the engine's stream to the caller
    }
    state.input_ended = state.window.empty();
  }
  const size_t count = std::min(deal_size, state.window.size() - state.window_taken);
  const auto first = state.window.begin() + static_cast<std::ptrdiff_t>(state.window_taken);
  std::vector<Line> lines(std::make_move_iterator(first), std::make_move_iterator(first + static_cast<std::ptrdiff_t>(count)));
  state.window_taken += count;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.stopping) return {};
  for (size_t i = 0; i < count; ++i) state.held[engine].push_back(state.next_dealt++);
  return lines;
}

// Files `engine`'s next translation under its input position.
void hand_back(DealState& state, size_t engine, const Line& line, Translation& translation) {
  std::lock_guard<std::mutex> lock(state.mutex);
  if (state.stopping) throw Stopped{};
  const uint64_t ordinal = state.held[engine].front();
  state.held[engine].pop_front();
  state.done.emplace(ordinal, std::make_pair(line, std::move(translation)));
  state.changed.notify_all();
}

// Loads one engine per device, each on a thread of its own (model reads and uploads overlap).
std::vector<std::unique_ptr<Translator>> load_engines(const TranslatorOptions& options,
                                                      const std::vector<int>& device_indices) {
  std::vector<std::unique_ptr<Translator>> engines(device_indices.size());
  std::vector<std::exception_ptr> errors(device_indices.size());
  std::vector<std::thread> loaders;
  for (size_t i = 0; i < device_indices.size(); ++i) {
    loaders.emplace_back([&, i] {
      try {
        TranslatorOptions engine_options = options;
        engine_options.device_index = device_indices[i];
        engines[i] = std::make_unique<Translator>(engine_options);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (std::thread& loader : loaders) loader.join();
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  return engines;
}

}  // namespace

size_t engine_read_ahead(const BatchingOptions& batching, size_t engines) {
  if (engines <= 1) return batching.read_ahead;
  return std::max<size_t>(1, std::min(batching.read_ahead, 4 * batching.max_batch_size));
}

TranslatorGroup::TranslatorGroup(const TranslatorOptions& options, const std::vector<int>& device_indices)
    : device_indices_(device_indices) {
  SEQTRANS_CHECK(!device_indices.empty(), "a translator group needs at least one device");
  TranslatorOptions engine_options = options;
  engine_options.batching.read_ahead = engine_read_ahead(options.batching, device_indices.size());
  deal_size_ = std::max<size_t>(1, engine_options.batching.read_ahead / 4);
  // Lines may wait behind a slow one for as long as the other engines take to go through four
  // read-aheads each: the bound keeps memory flat if one engine stalls.
  max_outstanding_ = 4 * device_indices.size() * engine_options.batching.read_ahead;
  if (device_indices.size() == 1) {
    engine_options.device_index = device_indices.front();
    engines_.push_back(std::make_unique<Translator>(engine_options));
  } else {
    engines_ = load_engines(engine_options, device_indices);
  }
}

TranslatorGroup::~TranslatorGroup() = default;

void TranslatorGroup::translate_stream(const LineFeed& feed, const TranslationSink& sink, const WarningSink& warn) {
  last_stream_engine_seconds_.assign(engines_.size(), 0.0);
  if (engines_.size() == 1) {
    const auto start = std::chrono::steady_clock::now();
    engines_.front()->translate_stream(feed, sink, warn);
    last_stream_engine_seconds_.front() = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return;
  }
  deal_stream(feed, sink, warn);
}

void TranslatorGroup::deal_stream(const LineFeed& feed, const TranslationSink& sink, const WarningSink& warn) {
  const auto state = std::make_shared<DealState>(feed, engines_.size());
  state->engines_running = engines_.size();
  const size_t deal_size = deal_size_, max_outstanding = max_outstanding_;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t engine = 0; engine < engines_.size(); ++engine) {
    threads.emplace_back([this, state, engine, deal_size, max_outstanding, start, &warn] {
      try {
        engines_[engine]->translate_stream(
            [state, engine, deal_size, max_outstanding] { return deal(*state, engine, deal_size, max_outstanding); },
            [&](const Line& line, Translation& translation) { hand_back(*state, engine, line, translation); },
            [&](const std::string& message) {
              if (!warn) return;
              std::lock_guard<std::mutex> lock(state->warn_mutex);
              warn(message);
            });
      } catch (const Stopped&) {
      } catch (...) {
        state->stop(std::current_exception());
      }
      // Written before the thread is joined, read after: no lock needed.
      last_stream_engine_seconds_[engine] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard<std::mutex> lock(state->mutex);
      --state->engines_running;
      state->changed.notify_all();
    });
  }

  // The caller's thread writes: each translation as soon as it and every line before it are done.
  std::exception_ptr sink_error;
  try {
    std::unique_lock<std::mutex> lock(state->mutex);
    for (;;) {
      state->changed.wait(lock, [&] {
        return state->error || state->done.count(state->next_out) > 0 || state->engines_running == 0;
      });
      if (state->error) break;
      const auto next = state->done.find(state->next_out);
      if (next == state->done.end()) {
        // Every engine has finished: each line dealt must have come back.
        SEQTRANS_CHECK(state->done.empty() && state->next_out == state->next_dealt,
                       "translator group: {} of {} lines came back", state->next_out, state->next_dealt);
        break;
      }
      std::pair<Line, Translation> item = std::move(next->second);
      state->done.erase(next);
      ++state->next_out;
      state->changed.notify_all();  // room under max_outstanding
      lock.unlock();
      sink(item.first, item.second);
      lock.lock();
    }
  } catch (...) {
    sink_error = std::current_exception();
  }
  state->stop(nullptr);
  for (std::thread& thread : threads) thread.join();
  if (sink_error) std::rethrow_exception(sink_error);
  if (state->error) std::rethrow_exception(state->error);
}

std::vector<Translation> TranslatorGroup::translate(const std::vector<Line>& lines, const WarningSink& warn) {
  return translate_window(*this, lines, warn);
}

void TranslatorGroup::set_search(const SearchOptions& search, const OpenSettings& open) {
  for (auto& engine : engines_) engine->set_search(search, open);
}

void TranslatorGroup::set_target_prefixes(const std::vector<std::string>& target_prefixes) {
  for (auto& engine : engines_) engine->set_target_prefixes(target_prefixes);
}

void TranslatorGroup::set_languages(const std::vector<Languages>& languages) {
  for (auto& engine : engines_) engine->set_languages(languages);
}

std::vector<TranslationStats> TranslatorGroup::engine_stats() const {
  std::vector<TranslationStats> parts;
  for (const auto& engine : engines_) parts.push_back(engine->stats());
  return parts;
}

TranslationStats sum(const std::vector<TranslationStats>& parts) {
  TranslationStats total;
  for (const TranslationStats& stats : parts) {
    total.sentences += stats.sentences;
    total.source_tokens += stats.source_tokens;
    total.target_tokens += stats.target_tokens;
    total.batches += stats.batches;
    total.decoder_steps += stats.decoder_steps;
    total.graph_recordings += stats.graph_recordings;
    total.tokenize_seconds += stats.tokenize_seconds;
    total.search_seconds += stats.search_seconds;
    total.search_split += stats.search_split;
    total.detokenize_seconds += stats.detokenize_seconds;
    total.text_wait_seconds += stats.text_wait_seconds;
    total.sentence_seconds.insert(total.sentence_seconds.end(), stats.sentence_seconds.begin(),
                                  stats.sentence_seconds.end());
  }
  return total;
}

}  // namespace seqtrans

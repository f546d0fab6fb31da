// LineQueue: reads input on a thread of its own, so that lines arriving while others are being decoded
// can join the running decode at its next step.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "batching/line_reader.h"

namespace seqtrans {

// The next lines of the input (e.g. LineReader::read_window); empty at its end. May block.
using LineFeed = std::function<std::vector<Line>()>;

// Calls the feed on a reader thread and keeps at most `capacity` lines waiting (the read-ahead), so a
// large file is not read into memory ahead of the decoder. The feed's exceptions reach take().
class LineQueue {
 public:
  LineQueue(LineFeed feed, size_t capacity);
  // Joins the reader thread if it has finished or is waiting for room; one blocked inside the feed (an
  // interactive input on an error path) is left to finish on its own, so that an error never hangs.
  ~LineQueue();
  LineQueue(const LineQueue&) = delete;
  LineQueue& operator=(const LineQueue&) = delete;

  // Up to `max` lines in input order. With `wait`, blocks until at least one line is there or the
  // input has ended; without, returns at once with what is there (maybe nothing).
  std::vector<Line> take(size_t max, bool wait);
  // True once the input has ended and every line has been taken.
  bool drained();

 private:
  // What the reader thread shares with the queue; it outlives the queue if the thread is left running.
  struct Shared {
    size_t capacity = 1;
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<Line> lines;  // read, not yet taken
    size_t taken = 0;         // lines[0, taken) are taken
    bool ended = false;
    bool stopping = false;
    bool in_feed = false;
    std::exception_ptr error;
  };
  static void read_all(const std::shared_ptr<Shared>& shared, const LineFeed& feed);

  std::shared_ptr<Shared> shared_;
  std::thread reader_;
};

}  // namespace seqtrans

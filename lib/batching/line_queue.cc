#include "batching/line_queue.h"

#include <algorithm>
#include <iterator>

namespace seqtrans {

LineQueue::LineQueue(LineFeed feed, size_t capacity) : shared_(std::make_shared<Shared>()) {
  shared_->capacity = std::max<size_t>(capacity, 1);
  reader_ = std::thread([shared = shared_, feed = std::move(feed)] { read_all(shared, feed); });
}

LineQueue::~LineQueue() {
  bool blocked_in_feed = false;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stopping = true;
    blocked_in_feed = shared_->in_feed && !shared_->ended;
  }
  shared_->changed.notify_all();
  if (blocked_in_feed)
    reader_.detach();
  else
    reader_.join();
}

void LineQueue::read_all(const std::shared_ptr<Shared>& shared, const LineFeed& feed) {
  try {
    for (;;) {
      {
        // Read ahead no further than the capacity: wait while enough lines wait.
        std::unique_lock<std::mutex> lock(shared->mutex);
        shared->changed.wait(lock, [&] { return shared->stopping || shared->lines.size() - shared->taken < shared->capacity; });
        if (shared->stopping) break;
        shared->in_feed = true;
      }
      std::vector<Line> window = feed();
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->in_feed = false;
      if (window.empty() || shared->stopping) break;
      if (shared->taken > 0) {
        shared->lines.erase(shared->lines.begin(), shared->lines.begin() + static_cast<std::ptrdiff_t>(shared->taken));
        shared->taken = 0;
      }
      std::move(window.begin(), window.end(), std::back_inserter(shared->lines));
      shared->changed.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(shared->mutex);
  shared->in_feed = false;
  shared->ended = true;
  shared->changed.notify_all();
}

std::vector<Line> LineQueue::take(size_t max, bool wait) {
  Shared& shared = *shared_;
  std::unique_lock<std::mutex> lock(shared.mutex);
  if (wait) shared.changed.wait(lock, [&] { return shared.ended || shared.lines.size() > shared.taken; });
  if (shared.error && shared.lines.size() == shared.taken) std::rethrow_exception(shared.error);
  const size_t count = std::min(max, shared.lines.size() - shared.taken);
  const auto first = shared.lines.begin() + static_cast<std::ptrdiff_t>(shared.taken);
  std::vector<Line> taken(std::make_move_iterator(first),
                          std::make_move_iterator(first + static_cast<std::ptrdiff_t>(count)));
  shared.taken += count;
  if (count > 0) shared.changed.notify_all();
  return taken;
}

bool LineQueue::drained() {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  if (shared_->error && shared_->lines.size() == shared_->taken) std::rethrow_exception(shared_->error);
  return shared_->ended && shared_->lines.size() == shared_->taken;
}

}  // namespace seqtrans

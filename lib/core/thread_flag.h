// A scope that sets one of the calling thread's mode flags (batch invariance, overlapped launches) for its
// lifetime and restores the previous value after, so that scopes nest.
#pragma once

namespace seqtrans {

class ThreadFlagScope {
 public:
  // `flag`: the calling thread's own (thread_local) flag; the scope must end on that thread.
  ThreadFlagScope(bool& flag, bool value) : flag_(flag), previous_(flag) { flag_ = value; }
  ~ThreadFlagScope() { flag_ = previous_; }
  ThreadFlagScope(const ThreadFlagScope&) = delete;
  ThreadFlagScope& operator=(const ThreadFlagScope&) = delete;

 private:
  bool& flag_;
  bool previous_;
};

}  // namespace seqtrans

// Where the time goes: wall time per named stage, collected only when enabled (`seqtrans bench
// --profile`). On a GPU each scope synchronizes the device at its ends, so stage times are exact but the
// total is slower than an unprofiled run; the benchmark reports both.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace seqtrans {

class Profiler {
 public:
  static Profiler& instance();

  void enable(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  void add(const char* stage, double seconds);
  void reset() {
    seconds_.clear();
    counts_.clear();
  }
  // Scopes nest: only the outermost open scope records, so every second is counted once.
  bool enter() { return depth_++ == 0; }
  void leave() { --depth_; }
  // Seconds per stage, summed over the run, and how many times each was added.
  const std::map<std::string, double>& stages() const { return seconds_; }
  const std::map<std::string, int64_t>& counts() const { return counts_; }

 private:
  bool enabled_ = false;
  int depth_ = 0;
  std::map<std::string, double> seconds_;
  std::map<std::string, int64_t> counts_;
};

// Times its own lifetime under `stage` when profiling is on; costs one branch when it is off.
// An inner scope inside another (e.g. the GEMMs inside "encoder") adds nothing.
class ProfileScope {
 public:
  explicit ProfileScope(const char* stage);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  const char* stage_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace seqtrans

#include "core/profiler.h"

#include "core/device.h"

namespace seqtrans {

Profiler& Profiler::instance() {
  static Profiler profiler;
  return profiler;
}

void Profiler::add(const char* stage, double seconds) {
  seconds_[stage] += seconds;
  ++counts_[stage];
}

ProfileScope::ProfileScope(const char* stage) : stage_(Profiler::instance().enabled() ? stage : nullptr) {
  if (stage_ == nullptr) return;
  if (!Profiler::instance().enter()) {
    stage_ = nullptr;
    Profiler::instance().leave();
    return;
  }
  synchronize_devices();
  start_ = std::chrono::steady_clock::now();
}

ProfileScope::~ProfileScope() {
  if (stage_ == nullptr) return;
  synchronize_devices();
  Profiler::instance().leave();
  Profiler::instance().add(stage_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
}

}  // namespace seqtrans

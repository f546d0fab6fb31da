// Overlapped kernel launches: while on, the CUDA backend launches its own kernels so that each may start while
// the kernel before it finishes (programmatic dependent launch, cuda/kernels/launch.cuh). A kernel so launched
// reads only weights before it waits for its inputs, so a caller turns it on only where every product's
// right-hand operand is a weight that no kernel of the work writes: the engine does, around its own work
// (EngineModeScope, models/pooled_model.h), and graphs keep what was on when they were captured. Like batch
// invariance it is a mode of the calling thread; off by default, so that ops called on their own launch as
// they always did.
#pragma once

#include "core/thread_flag.h"

namespace seqtrans {

namespace detail {
inline thread_local bool overlapped_launches = false;
}  // namespace detail

// Whether the CUDA backend's kernels launched on this thread may overlap the kernel before them.
inline bool overlapped_launches() { return detail::overlapped_launches; }

// Sets the mode for its lifetime and restores the previous one after (scopes nest).
class OverlappedLaunchScope : public ThreadFlagScope {
 public:
  explicit OverlappedLaunchScope(bool enabled) : ThreadFlagScope(detail::overlapped_launches, enabled) {}
};

}  // namespace seqtrans

// Batch-invariant arithmetic: while it is on, every op computes a row's values in an order that does not
// depend on how many other rows share the call (docs/ARCHITECTURE.md, "Batch invariance"). It is a mode of
// the calling thread, like the selected device: an engine turns it on around its own work
// (BatchInvariantScope), and the launchers read it when they choose a kernel and its split (CUDA), or
// the shape of a BLAS call (the CPU, whose other ops are per row always).
#pragma once

#include "core/thread_flag.h"

namespace seqtrans {

namespace detail {
inline thread_local bool batch_invariant_arithmetic = false;
}  // namespace detail

// Whether ops on this thread must keep a row's arithmetic independent of the other rows of a call.
inline bool batch_invariant() { return detail::batch_invariant_arithmetic; }

// Sets the mode for its lifetime and restores the previous one after (scopes nest).
class BatchInvariantScope : public ThreadFlagScope {
 public:
  explicit BatchInvariantScope(bool enabled) : ThreadFlagScope(detail::batch_invariant_arithmetic, enabled) {}
};

}  // namespace seqtrans

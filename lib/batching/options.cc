#include "batching/options.h"

#include "core/error.h"

namespace seqtrans {

void validate(const BatchingOptions& options) {
  SEQTRANS_CHECK(options.max_batch_tokens > 0, "batching: max_batch_tokens must be at least 1");
  SEQTRANS_CHECK(options.max_batch_size > 0, "batching: max_batch_size must be at least 1");
  SEQTRANS_CHECK(options.read_ahead > 0, "batching: read_ahead must be at least 1");
}

}  // namespace seqtrans

// The measurement behind the default prefill chunk (EngineTuning::prefill_chunk_tokens), `seqtrans bench
// --prefill-stall`: rows decode while one long prompt joins, and for each chunk size it reports the longest
// time a decoding row waited between two of its steps (the stall) against the prefill's throughput (prompt
// tokens per second of admission work) and the time until the long prompt joined.
#pragma once

#include <ostream>

#include "core/device.h"
#include "core/dtype.h"
#include "format/model_file.h"

namespace seqtrans::bench {

struct PrefillStallOptions {
  Device device = Device::CPU;
  DataType dtype = DataType::F32;
  int prompt_tokens = 0;  // the long prompt's; 0: half the model's positions
};

// One table row per chunk size (0: whole prompts at admission, first and last) on `file`, a decoder-only
// model, written to `out`. Greedy steps are read one at a time, so the stall is one step and one chunk.
void run_prefill_stall(const ModelFile& file, const PrefillStallOptions& options, std::ostream& out);

}  // namespace seqtrans::bench

// Small random Marian-like models for engine tests that need a real EncoderDecoderModel but no trained
// weights.
#pragma once

#include <cstdint>

#include "format/model_file.h"

namespace seqtrans::testing {

// d_model 32, 4 heads, FFN 64, a shared vocabulary of 40 (39 is pad and decoder start, and suppressed; 0
// is EOS), 64 positions; weights drawn from `seed` with spread 0.4.
ModelFile small_random_model(int encoder_layers, int decoder_layers, uint32_t seed);

}  // namespace seqtrans::testing

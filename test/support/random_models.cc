#include "support/random_models.h"

#include "models/tensor_specs.h"

namespace seqtrans::testing {

ModelFile small_random_model(int encoder_layers, int decoder_layers, uint32_t seed) {
  ModelConfig config = transformer_base_config();
  config.d_model = 32;
  config.encoder = {encoder_layers, 4, 64, false, false, false};
  config.decoder = {decoder_layers, 4, 64, false, false, false};
  config.source_vocab_size = config.target_vocab_size = 40;
  config.pad_id = config.decoder_start_id = 39;
  config.suppressed_ids = {39};
  config.max_positions = 64;
  return make_random_model(config, {seed, 0.4f});
}

}  // namespace seqtrans::testing

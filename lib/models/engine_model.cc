#include "models/engine_model.h"

#include "core/host_arena.h"
#include "models/decoder_only_model.h"
#include "models/encoder_decoder_model.h"

namespace seqtrans {

WeightFormats weight_formats(const ModelOptions& options) {
  WeightFormats formats;
  if (options.device != Device::CPU) return formats;
  if (options.tuning.packed_weights) formats.dense = formats.output = ops::WeightFormat::Packed;
  if (options.int8_weights) formats.dense = ops::WeightFormat::Int8;
  return formats;
}

DenseWeight untied_output_weight(const ModelFile& file, const ModelOptions& options, const Shape& shape) {
  const WeightLoader loader(file, options.device, options.dtype, weight_formats(options).output);
  // Every step reads it: its panels are written at load, so that its plain values go before the layers load.
  return loader.get_dense("decoder/output/weight", shape, /*pack_now=*/true);
}

std::unique_ptr<EngineModel> make_engine_model(const ModelFile& file, const ModelOptions& options) {
  // A CPU model's weights come from an arena of huge pages (core/host_arena.h), which their tensors keep
  // for as long as they live.
  const HostArenaRef arena = options.device == Device::CPU ? HostArena::open() : HostArenaRef();
  const HostArenaScope weights(arena.get());
  if (file.config().kind == ModelKind::DecoderOnly) return std::make_unique<DecoderOnlyModel>(file, options);
  return std::make_unique<EncoderDecoderModel>(file, options);
}

}  // namespace seqtrans

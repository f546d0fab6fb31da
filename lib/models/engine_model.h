// What the engine runs: a StepModel of any kind, made from a model file by its config.kind (docs/ARCHITECTURE.md
// §6), with statistics of how its steps ran.
#pragma once

#include <memory>

#include "core/device.h"
#include "core/dtype.h"
#include "format/model_file.h"
#include "layers/weights.h"
#include "models/engine_tuning.h"
#include "models/step_runner.h"
#include "search/step_model.h"

namespace seqtrans {

struct ModelOptions {
  Device device = Device::CPU;
  DataType dtype = DataType::F32;  // compute and weight type on the device
  EngineTuning tuning;             // the speed ideas, each switchable (the benchmark's ablations)
  // CPU: the Dense layers' weights quantized to int8 at load, their products in int32 over activations
  // quantized per row (ops::WeightFormat::Int8; --precision int8). The output layer stays fp32. Last, so that
  // {device, dtype, tuning} still initializes what it says.
  bool int8_weights = false;
};

class EngineModel : public StepModel {
 public:
  // How steps ran, summed over every state the model started (a step changes nothing else in the model).
  const StepCounts& step_counts() const { return step_counts_; }

 protected:
  mutable StepCounts step_counts_;
};

// The model `file` holds: an EncoderDecoderModel or a DecoderOnlyModel, as its config.kind says.
// The forms a model's weights take for its products (ops::prepare_weight): its Dense layers' and its output
// layer's.
struct WeightFormats {
  ops::WeightFormat dense = ops::WeightFormat::Plain;
  ops::WeightFormat output = ops::WeightFormat::Plain;
};
WeightFormats weight_formats(const ModelOptions& options);
// An untied output layer's weight ("decoder/output/weight", `shape`) in the output format: on the CPU a large
// one keeps only its panels, written at load (WeightLoader::get_dense), where a tied one stays the embedding's.
DenseWeight untied_output_weight(const ModelFile& file, const ModelOptions& options, const Shape& shape);

std::unique_ptr<EngineModel> make_engine_model(const ModelFile& file, const ModelOptions& options);

}  // namespace seqtrans

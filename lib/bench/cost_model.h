// The hardware floor of a translation run (docs/BENCHMARKS.md, "The floor"): the floating-point
// operations of the matrix products and the fewest bytes that must cross device memory, each over the
// device's measured peak. The larger of the two times is the floor; measured time / floor is "x of floor".
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "format/model_config.h"

namespace seqtrans::bench {

// What the cost model needs of the architecture.
struct ModelShape {
  int64_t encoder_layers = 0;
  int64_t decoder_layers = 0;
  int64_t d_model = 0;
  int64_t encoder_ffn = 0;
  int64_t decoder_ffn = 0;
  int64_t vocab = 0;  // target vocabulary = output layer rows
  bool output_bias = false;
};
ModelShape model_shape(const ModelConfig& config);

// Bytes per element the floor counts: activations, caches, embeddings, norms and the output layer in the
// compute dtype; the layers' product matrices in int8 where the CPU's int8 mode quantized them.
struct ElementBytes {
  // One size for everything (fp16 on a GPU, fp32 on the CPU): a plain size converts.
  ElementBytes(int64_t all)  // NOLINT(google-explicit-constructor)
      : values(static_cast<double>(all)), dense_weights(static_cast<double>(all)) {}
  ElementBytes(double values, double dense_weights) : values(values), dense_weights(dense_weights) {}
  double values;
  double dense_weights;
};
// The sizes of a run in `dtype`, with int8 Dense weights where `int8_weights` (ModelOptions::int8_weights).
ElementBytes element_bytes_of(DataType dtype, bool int8_weights);

// Work of one phase (the encoder pass of a batch, or one decoder step).
struct Cost {
  double flops = 0;  // multiply-adds count 2
  double bytes = 0;  // device memory traffic: each input read once, each output written once

  Cost& operator+=(const Cost& other) {
    flops += other.flops;
    bytes += other.bytes;
    return *this;
  }
};

// The encoder pass over `sentences` sources of `source_length` tokens each (padding included), plus the
// decoder's cross-attention key/value projections of its output, which our engine computes once there.
Cost encoder_cost(const ModelShape& model, int64_t sentences, int64_t source_length, const ElementBytes& bytes);

// One decoder step: `slots` hypotheses (beams) of `sentences` sentences; each attends over `keys` target
// positions (this step's token included) and `source_length` source positions.
struct DecoderStepShape {
  int64_t slots = 0;
  int64_t sentences = 0;
  int64_t keys = 1;
  int64_t source_length = 0;
};
Cost decoder_step_cost(const ModelShape& model, const DecoderStepShape& step, const ElementBytes& bytes);

// The weight bytes one layer's phase of the persistent decoder kernel reads (its product's matrix; the
// attention phases and the rest read none), `phase` named as StageProfile names it ("FFN inner"): the
// floor to set beside the phase's time.
double persistent_phase_weight_bytes(const ModelShape& model, const std::string& phase, const ElementBytes& bytes);

// Peak rates measured on the device; zero when unknown (then no floor is printed).
struct Hardware {
  double flops_per_second = 0;
  double bytes_per_second = 0;
  bool known() const { return flops_per_second > 0 && bytes_per_second > 0; }
};

// A run's total work and the time it takes at the peaks.
struct Floor {
  Cost cost;
  double flop_seconds = 0;  // cost.flops / peak FLOP rate
  double byte_seconds = 0;  // cost.bytes / peak bandwidth
  double seconds() const { return flop_seconds > byte_seconds ? flop_seconds : byte_seconds; }
  // Which term sets the floor.
  const char* bound() const { return flop_seconds > byte_seconds ? "flops" : "bytes"; }
  // The bandwidth a run of `measured` seconds reached: the bytes it must move over its time. Next to the
  // peak it says how far a small, memory-bound step is from streaming its weights at full speed.
  double achieved_bytes_per_second(double measured) const { return measured > 0 ? cost.bytes / measured : 0; }
};
Floor make_floor(const Cost& cost, const Hardware& hardware);

// A synthetic run (forced output length): the encoder, then target_length decoder steps of batch * beam
// slots; beam search's first step has one slot per sentence.
struct SyntheticWorkload {
  int64_t batch = 1;
  int64_t beam = 1;
  int64_t source_length = 1;
  int64_t target_length = 1;
};
Cost synthetic_cost(const ModelShape& model, const SyntheticWorkload& workload, const ElementBytes& bytes);
// The same for a decoder-only model (config.kind DecoderOnly), the source being the prompt: its prefill (every
// product on every prompt token, causal attention, weights read once), then the steps.
Cost decoder_only_cost(const ModelConfig& config, const SyntheticWorkload& workload, const ElementBytes& bytes);

// Totals of a real run (a file through the translator), which lacks per-step shapes.
struct RunTotals {
  int64_t sentences = 0;      // input lines, blank ones included
  int64_t source_tokens = 0;  // EOS included
  int64_t target_tokens = 0;  // best hypotheses, EOS excluded
  int64_t batches = 0;
  int64_t max_batch_sentences = 1;
  int64_t beam = 1;
};
// A lower bound on a real run's work from its totals alone; attention products and key/value cache
// traffic, which need per-step shapes, are left out (see cost_model.cc).
Cost run_totals_cost(const ModelShape& model, const RunTotals& totals, const ElementBytes& bytes);

}  // namespace seqtrans::bench

// The counts follow the tensors of lib/models/tensor_specs.cc (post-norm Transformer, fused QKV, biases
// on every dense layer, two norm vectors per sublayer). Notation: d = d_model, f = ffn width, V = target
// vocabulary; bytes per element in the compute precision, except the layers' weights in CPU int8 runs
// (ElementBytes: their biases and norms are counted with them, a few elements a row).
//
// FLOPs count the matrix products only (2 per multiply-add); layer norms, softmax, bias and activation
// are elementwise and negligible next to them.
//
// Bytes count what must cross device memory at least once: every weight used by the phase, the embedding
// rows gathered, the key/value caches, and the phase's outputs. Activations between ops are left out (a
// fully fused implementation keeps them on chip), so the floor is a true lower bound.
#include "bench/cost_model.h"

#include <algorithm>
#include <cstring>

#include "ops/ops.h"

namespace seqtrans::bench {
namespace {

// Weights of one encoder layer: QKV [3d, d] + [3d], output [d, d] + [d], FFN [f, d] + [f] and [d, f] +
// [d], two norms of 2d.
double encoder_layer_weights(double d, double f) { return 4 * d * d + 2 * d * f + 9 * d + f; }

// Weights one decoder step reads per layer: self-attention QKV and output, cross-attention query and
// output, FFN, three norms. The cross-attention key/value projection [2d, d] is used by the encoder phase.
double decoder_step_layer_weights(double d, double f) { return 6 * d * d + 2 * d * f + 13 * d + f; }

}  // namespace

ElementBytes element_bytes_of(DataType dtype, bool int8_weights) {
  const double size = static_cast<double>(dtype_size(dtype));
  return {size, int8_weights ? 1.0 : size};
}

ModelShape model_shape(const ModelConfig& config) {
  ModelShape shape;
  shape.encoder_layers = config.encoder.num_layers;
  shape.decoder_layers = config.decoder.num_layers;
  shape.d_model = config.d_model;
  shape.encoder_ffn = config.encoder.ffn_dim;
  shape.decoder_ffn = config.decoder.ffn_dim;
  shape.vocab = config.target_vocab_size;
  shape.output_bias = config.output_bias;
  return shape;
}

Cost encoder_cost(const ModelShape& model, int64_t sentences, int64_t source_length, const ElementBytes& bytes) {
  const double d = static_cast<double>(model.d_model), f = static_cast<double>(model.encoder_ffn);
  const double le = static_cast<double>(model.encoder_layers), ld = static_cast<double>(model.decoder_layers);
  const double b = static_cast<double>(sentences), s = static_cast<double>(source_length);
  const double tokens = b * s;
  Cost cost;
  // Per encoder layer: QKV (3d x d), output (d x d) and the FFN (f x d, d x f) on every token, plus
  // attention scores Q K^T and context P V, each b * s * s * d multiply-adds.
  cost.flops = le * (2 * tokens * d * (4 * d + 2 * f) + 4 * b * s * s * d);
  // Per decoder layer: memory keys and values (2d x d) on every token.
  cost.flops += ld * 2 * tokens * d * 2 * d;
  // Encoder weights and the cross-attention K/V projections read once, the source embedding rows
  // gathered, the cross-attention caches written.
  const double weights = le * encoder_layer_weights(d, f) + ld * (2 * d * d + 2 * d);
  cost.bytes = weights * bytes.dense_weights + (tokens * d + ld * tokens * 2 * d) * bytes.values;
  return cost;
}

Cost decoder_step_cost(const ModelShape& model, const DecoderStepShape& step, const ElementBytes& bytes) {
  const double d = static_cast<double>(model.d_model), f = static_cast<double>(model.decoder_ffn);
  const double ld = static_cast<double>(model.decoder_layers), v = static_cast<double>(model.vocab);
  const double slots = static_cast<double>(step.slots), sentences = static_cast<double>(step.sentences);
  const double keys = static_cast<double>(step.keys), source = static_cast<double>(step.source_length);
  Cost cost;
  // Per layer and slot: QKV (3d), self output, cross query and cross output (d each) and the FFN (2f),
  // all times d; attention over `keys` self positions and `source` memory positions (scores + context).
  cost.flops = ld * slots * (2 * d * (6 * d + 2 * f) + 4 * keys * d + 4 * source * d);
  // Output layer: [slots, d] x [d, V].
  cost.flops += 2 * slots * d * v;
  const double weights = ld * decoder_step_layer_weights(d, f);
  double elements = v * d + (model.output_bias ? v : 0);  // the output layer (not quantized)
  elements += slots * d;  // target embedding rows
  // Self-attention cache: keys - 1 cached keys and values read, this step's key and value written.
  elements += ld * slots * keys * 2 * d;
  // Cross-attention cache: identical for the beams of a sentence, so at least once per sentence.
  elements += ld * sentences * source * 2 * d;
  // Logits [slots, V], written once by the output GEMM. Our fused top-k reads them back once more, and a
  // GEMM with a top-k epilogue could avoid both; the write is the minimum the op set needs.
  elements += slots * v;
  cost.bytes = weights * bytes.dense_weights + elements * bytes.values;
  return cost;
}

double persistent_phase_weight_bytes(const ModelShape& model, const std::string& phase, const ElementBytes& bytes) {
  const double d = static_cast<double>(model.d_model), f = static_cast<double>(model.decoder_ffn);
  // Weight elements of each phase of ops::kPersistentDecoderPhaseNames, in its order.
  const double elements[ops::kPersistentDecoderPhasesPerLayer] = {3 * d * d, 0, d * d, d * d, 0, d * d, f * d, d * f};
  const size_t prefix = std::strlen(ops::kPersistentDecoderStagePrefix);
  for (int64_t i = 0; i < ops::kPersistentDecoderPhasesPerLayer; ++i)
    if (phase == ops::kPersistentDecoderPhaseNames[i] + prefix) return elements[i] * bytes.dense_weights;
  // The greedy output layer folded in: the output weight, and the bias (kept in fp32).
  if (phase == ops::kPersistentDecoderFinalOutputPhase + prefix)
    return static_cast<double>(model.vocab) * (d * bytes.values + (model.output_bias ? 4 : 0));
  return 0;
}

Floor make_floor(const Cost& cost, const Hardware& hardware) {
  Floor floor;
  floor.cost = cost;
  if (!hardware.known()) return floor;
  floor.flop_seconds = cost.flops / hardware.flops_per_second;
  floor.byte_seconds = cost.bytes / hardware.bytes_per_second;
  return floor;
}

Cost synthetic_cost(const ModelShape& model, const SyntheticWorkload& workload, const ElementBytes& bytes) {
  Cost total = encoder_cost(model, workload.batch, workload.source_length, bytes);
  for (int64_t step = 0; step < workload.target_length; ++step) {
    DecoderStepShape shape;
    shape.slots = step == 0 ? workload.batch : workload.batch * workload.beam;
    shape.sentences = workload.batch;
    shape.keys = step + 1;
    shape.source_length = workload.source_length;
    total += decoder_step_cost(model, shape, bytes);
  }
  return total;
}

Cost decoder_only_cost(const ModelConfig& config, const SyntheticWorkload& workload, const ElementBytes& bytes) {
  const StackConfig& stack = config.decoder;
  const double d = config.d_model, f = stack.ffn_dim, v = config.target_vocab_size, layers = stack.num_layers;
  const double queries = double{1} * stack.num_heads * head_width(config, stack);
  const double kv = double{1} * key_value_heads(stack) * head_width(config, stack);
  // Per layer: QKV, output, and the gated feed-forward's three matrices.
  const double layer_weights = d * (queries + 2 * kv) + queries * d + 3 * d * f;
  const double element = bytes.values, weight = bytes.dense_weights, b = static_cast<double>(workload.batch);
  const double prompt = static_cast<double>(workload.source_length);
  Cost total;
  // Prefill: every product on every prompt token, scores and context over the causal half; weights read
  // once, the keys and values written.
  total.flops = layers * (2 * b * prompt * layer_weights + 2 * b * prompt * prompt * queries);
  total.bytes = layers * layer_weights * weight + layers * b * prompt * 2 * kv * element;
  for (int64_t step = 0; step < workload.target_length; ++step) {
    const double slots = step == 0 ? b : b * workload.beam, keys = prompt + static_cast<double>(step);
    total.flops += 2 * slots * (layers * layer_weights + v * d) + layers * 4 * slots * keys * queries;
    // Every weight and the output layer once a step, each slot's keys and values read, logits written (fp32).
    total.bytes += layers * layer_weights * weight + (v * d + layers * slots * keys * 2 * kv) * element + slots * v * 4;
  }
  return total;
}

// Lower bounds from totals:
//  - encoder FLOPs: the per-token products on the real (unpadded) tokens, and attention over sum(s_i^2)
//    >= (sum s_i)^2 / n (Cauchy-Schwarz); bytes: the weights once per batch, rows and caches per token.
//  - decoder slot-steps: a sentence whose best hypothesis has L tokens ran at least L steps, the first
//    with one slot and the rest with `beam` slots: sum(1 + (L - 1) * beam) = beam * T - (beam - 1) * n,
//    and at least T. Each slot-step does the per-slot products and writes its logits.
//  - decoder steps: a batch runs at least as many steps as its longest output, which is at least its
//    mean, so steps >= T / max_batch_sentences, and at least one per batch. Each step reads the weights.
Cost run_totals_cost(const ModelShape& model, const RunTotals& totals, const ElementBytes& bytes) {
  const double d = static_cast<double>(model.d_model), fe = static_cast<double>(model.encoder_ffn);
  const double fd = static_cast<double>(model.decoder_ffn), v = static_cast<double>(model.vocab);
  const double le = static_cast<double>(model.encoder_layers), ld = static_cast<double>(model.decoder_layers);
  const double n = static_cast<double>(std::max<int64_t>(totals.sentences, 1));
  const double source = static_cast<double>(totals.source_tokens);
  const double target = static_cast<double>(totals.target_tokens);
  const double beam = static_cast<double>(totals.beam);
  const double e = bytes.values, w = bytes.dense_weights;

  Cost cost;
  cost.flops = le * (2 * source * d * (4 * d + 2 * fe) + 4 * source * source / n * d) + ld * 4 * source * d * d;
  cost.bytes =
      w * static_cast<double>(totals.batches) * (le * encoder_layer_weights(d, fe) + ld * (2 * d * d + 2 * d)) +
      e * (source * d + ld * source * 2 * d);

  const double slot_steps = std::max(target, beam * target - (beam - 1) * n);
  const double steps = std::max(static_cast<double>(totals.batches),
                                target / static_cast<double>(std::max<int64_t>(totals.max_batch_sentences, 1)));
  cost.flops += slot_steps * (ld * 2 * d * (6 * d + 2 * fd) + 2 * d * v);
  cost.bytes += w * steps * ld * decoder_step_layer_weights(d, fd) +
                e * (steps * (v * d + (model.output_bias ? v : 0)) + slot_steps * (d + v));
  return cost;
}

}  // namespace seqtrans::bench

// Op front ends: each checks shapes, then dispatches once on the device to cpu:: or cuda::.
// Shapes are given in brackets; d = model width, m = rows (tokens), V = vocabulary size.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace seqtrans {

enum class Activation { Relu, Gelu, GeluTanh, Swish };

enum class PositionEncoding { SinusoidalSplit, Learned };

namespace ops {

// [m, n] = alpha * [m, k] x [n, k]^T (transpose_b) or alpha * [m, k] x [k, n].
struct MatmulOptions {
  bool transpose_b = true;
  float alpha = 1.0f;
  // c in fp32 whatever the inputs: fp16 logits would round away the margins search decides on.
  bool fp32_output = false;
};
Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& options = {});

// x[i, :] += bias, in place. x: [m, n], bias: [n].
void add_bias(Tensor& x, const Tensor& bias);

// x = activation(x + bias), in place. x: [m, n], bias: [n].
void bias_activation(Tensor& x, const Tensor& bias, Activation activation);

// Post-norm residual block end: layer_norm(x + bias + residual). x, residual: [m, d]; bias, gamma, beta: [d].
struct LayerNormWeights {
  const Tensor& gamma;  // [d]
  const Tensor& beta;   // [d]
  float epsilon;
};
Tensor add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                    const LayerNormWeights& norm);

// layer_norm(x) over the last axis. x: [m, d].
Tensor layer_norm(const Tensor& x, const LayerNormWeights& norm);

// Adds the bias and splits [m, parts * d] into `parts` contiguous [m, d] tensors (the fused QKV projection).
std::vector<Tensor> add_bias_split(const Tensor& x, const Tensor& bias, int parts);

// Token embeddings times `scale` plus position encodings.
// ids, positions: [n] int32; table: [V, d]; position_table: [max_positions, d] (Learned only) -> [n, d].
struct EmbeddingOptions {
  float scale = 1.0f;
  PositionEncoding positions = PositionEncoding::SinusoidalSplit;
  const Tensor* position_table = nullptr;
};
Tensor embed(const Tensor& ids, const Tensor& positions, const Tensor& table, const EmbeddingOptions& options);

// Multi-head scaled dot-product attention with per-row key lengths (keys at or past the length are
// masked). query: [b, tq, d]; keys, values: [b, tk, d] (tk may be a cache capacity); key_lengths: [b]
// int32 -> [b, tq, d]. Causality is expressed by key_lengths (incremental decoding), never by a mask.
struct AttentionOptions {
  int num_heads = 1;
  float scale = 1.0f;
};
Tensor attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
                 const AttentionOptions& options);

// cache[s, positions[s], :] = values[s, :], in place. cache: [slots, capacity, d]; values: [slots, d];
// positions: [slots] int32.
void kv_cache_write(Tensor& cache, const Tensor& values, const Tensor& positions);

// out[i] = x[indices[i]] along the first axis. x: [n, ...]; indices: [m] int32 -> [m, ...].
Tensor gather_rows(const Tensor& x, const Tensor& indices);

// The fused output layer: per row of logits [rows, V], z = logits + bias, log-probs z - logsumexp(z),
// suppressed ids set to -inf after normalization (Hugging Face's order), and the k best log-probs with
// their ids, best first, ties to the lower id -- without writing the normalized row anywhere.
// values: [rows, k] fp32; ids: [rows, k] int32, both on the logits' device.
enum class TopkAlgorithm {
  Auto,            // the fastest exact method for the shape
  FullScan,        // one pass keeping a running k-best (CUDA: radix select)
  Hierarchical,    // retrieve-then-rerank: group maxima give a threshold, only groups above it are re-read
};
struct TopkOptions {
  int k = 1;
  const Tensor* bias = nullptr;            // [V]
  const Tensor* suppressed_ids = nullptr;  // [n] int32
  TopkAlgorithm algorithm = TopkAlgorithm::Auto;
};
void log_softmax_topk(const Tensor& logits, const TopkOptions& options, Tensor& values, Tensor& ids);
inline constexpr int kMaxDeviceTopk = 64;

// Element type conversion (fp32 <-> fp16), on the tensor's device.
Tensor convert(const Tensor& x, DataType dtype);

}  // namespace ops
}  // namespace seqtrans

// CPU implementations of the ops, fp32: the reference every other backend is tested against.
// Shapes are checked by the front ends in lib/ops; these assume valid, contiguous inputs.
#pragma once

#include "ops/op_types.h"

namespace seqtrans::cpu {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options);
void add_bias(Tensor& x, const Tensor& bias);
void bias_activation(Tensor& x, const Tensor& bias, Activation activation);
void gated_activation(const Tensor& gate_up, Tensor& out);
// The same on columns [begin, end) of x [rows, stride] (bias: [stride]): a matmul's epilogue on the part
// of c one thread has just written, while it is still in cache.
void add_bias_columns(float* x, int64_t rows, int64_t stride, int64_t begin, int64_t end, const float* bias);
void bias_activation_columns(float* x, int64_t rows, int64_t stride, int64_t begin, int64_t end, const float* bias,
                             Activation activation);
void add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                  const ops::LayerNormWeights& norm, Tensor& out);
void layer_norm(const Tensor& x, const ops::LayerNormWeights& norm, Tensor& out);
void add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out);
// The same on rows [begin, end) only: add_bias_residual_norm's sums, row by row with their norms.
void add_bias_residual_rows(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out, int64_t begin,
                            int64_t end);
// ops::add_bias_residual_norm: sum = add_bias_residual's, out = layer_norm's of it.
void add_bias_residual_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                            const ops::LayerNormWeights& norm, Tensor& sum, Tensor& out);
// ops::rms_norm of x; with a residual, ops::add_residual_rms_norm: *sum = x + residual, out its norm.
void rms_norm(const Tensor& x, const Tensor* residual, const ops::RmsNormWeights& norm, Tensor* sum, Tensor& out);
void add_bias_split(const Tensor& x, const Tensor& bias, std::vector<Tensor>& parts);
void embed(const Tensor& ids, const Tensor& positions, const Tensor& table, const ops::EmbeddingOptions& options,
           Tensor& out);
// Out-of-range key_rows entries of keys below the length throw; entries past the length are never read.
void attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
               const ops::AttentionOptions& options, Tensor& out);
// Throws before writing anything when a position is outside the cache.
void append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache, Tensor& value_cache,
                                Tensor& history, const ops::SelfAttentionStepOptions& options, Tensor& query);
void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out);
void copy_with_fed_ids(const Tensor& source, int64_t fed, const Tensor* chosen, Tensor& destination);
// Any dtype (bytes are copied).
void copy(const Tensor& src, Tensor& dst);
void copy_row_prefixes(const Tensor& src, const Tensor* index, const Tensor& lengths, Tensor& dst);
void scatter_prefix(const Tensor& src, const Tensor& rows, Tensor& dst);

void log_softmax_topk(const Tensor& logits, const ops::TopkOptions& options, Tensor& values, Tensor& ids);
// History ids outside the vocabulary throw.
void penalize_repetitions(Tensor& logits, const Tensor& history, const Tensor& lengths,
                          const ops::RepetitionOptions& options);
// Rows whose banned_id is outside the vocabulary ban nothing.
void sample_tokens(const Tensor& logits, const Tensor& rows, const ops::SampleOptions& options, Tensor& ids,
                   Tensor& log_probs);

// Sinusoidal position encoding value, Marian layout (sin over the first half of channels, cos over the
// second), computed in double like Hugging Face's table and rounded to float.
float sinusoidal_position(int64_t position, int64_t channel, int64_t width);
// out [P, width] fp32: row p is position p's encoding.
void sinusoid_table(Tensor& out);
// out [P, head_dim] fp32: ops::rotary_table's cos and sin rows.
void rotary_table(float theta, Tensor& out);
// Positions outside the table throw before anything is rotated.
void apply_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table, const ops::RotaryShape& shape);
// out [P, width] fp32: M2M-100's (fairseq's) sinusoids, evaluated in float as Hugging Face does.
void fairseq_sinusoid_table(Tensor& out);

}  // namespace seqtrans::cpu

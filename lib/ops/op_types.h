// The ops' argument types, enums and limits: what the front ends (ops/ops.h) and the backends (lib/cpu,
// cuda/kernels) share. Below both in the layering (docs/ARCHITECTURE.md), so a backend includes this and never
// ops/ops.h. The ops' own comments in ops/ops.h say what each field does to the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "ops/prepared_weight.h"

namespace seqtrans {

enum class Activation { Relu, Gelu, GeluTanh, Swish };

// SinusoidalSplit: Marian's (channel k of a half turns at 10000^(-2k / width)); SinusoidalFairseq: M2M-100's
// (10000^(-k / (half - 1))); both sin over the first half of the channels and cos over the second.
enum class PositionEncoding { SinusoidalSplit, Learned, SinusoidalFairseq };

namespace ops {

// ops::matmul's product and epilogue (ops/ops.h).
struct MatmulOptions {
  bool transpose_b = true;
  float alpha = 1.0f;
  // c in fp32 whatever the inputs: fp16 logits would round away the margins search decides on.
  bool fp32_output = false;
  // Epilogue: c = activation(a x b + bias), bias [n] in c's dtype. CUDA fuses it into the GEMM (cuBLASLt)
  // for fp16 with no activation or ReLU, and runs a separate kernel otherwise.
  const Tensor* bias = nullptr;
  std::optional<Activation> activation;  // needs a bias
  // b prepared at load for this device (ops::prepare_weight(b, ...), transpose_b and alpha 1 only).
  const PreparedWeight* prepared_b = nullptr;
};

// A layer norm's parameters: layer_norm, add_bias_residual_layer_norm.
struct LayerNormWeights {
  const Tensor& gamma;  // [d]
  const Tensor& beta;   // [d]
  float epsilon;
};

// An RMS norm's parameters: rms_norm, add_residual_rms_norm.
struct RmsNormWeights {
  const Tensor& weight;  // [d]
  float epsilon;
};

// A residual sum and the next norm of it: add_residual_rms_norm's and add_bias_residual_norm's two outputs.
struct ResidualNorm {
  Tensor sum;         // the new residual stream
  Tensor normalized;  // the next sublayer's input
};

// add_residual_rms_norm_matmul_gated's two outputs.
struct ResidualGated {
  Tensor sum;    // the new residual stream
  Tensor gated;  // the feed-forward's SwiGLU of the normalized sum
};

// ops::embed's scale and position encoding.
struct EmbeddingOptions {
  float scale = 1.0f;
  PositionEncoding positions = PositionEncoding::SinusoidalSplit;
  // Learned: [max_positions + position_offset, d] in the table's dtype. SinusoidalFairseq is given as such a
  // table too (sinusoid_table of that kind), with positions = Learned.
  const Tensor* position_table = nullptr;
  // Added to every position before its encoding is looked up or evaluated (ModelConfig::position_offset).
  int position_offset = 0;
  // Sinusoidal positions only, optional: sinusoid_table(P, width) on the table's device, read for positions
  // below P instead of evaluating the sinusoid per element (the same values).
  const Tensor* sinusoid_table = nullptr;
};

// The heads apply_rotary_embedding rotates.
struct RotaryShape {
  int num_heads = 1;
  int num_kv_heads = 1;
};

// ops::attention's heads and where each query row's keys are (ops/ops.h says how they are read).
// Query rows per tile of AttentionOptions::query_tiles.
inline constexpr int kAttentionTileRows = 64;

struct AttentionOptions {
  int num_heads = 1;
  float scale = 1.0f;
  // Where the keys and values of query row b live when not in batch row b of keys/values (whose batch
  // extent may then differ from the query's). Rank 1, [b] int32: all in batch row key_rows[b]
  // (cross-attention: the beams of a sentence share its memory). Rank 2, [b, T] int32: key j in batch
  // row key_rows[b, j] at position j % tk (the self-attention cache, in blocks of tk positions: beam
  // reorders move only these indices; T may exceed tk, and lengths are then bounded by T); tq = 1.
  // Only entries of keys below the length are read (a history table may hold anything past it); one of
  // them outside keys' batch rows is an error (the CUDA backend masks it instead, see cuda_ops.h).
  const Tensor* key_rows = nullptr;
  // Rank-1 key_rows only: the keys of query row b run from position 0 of batch row key_rows[b] on through
  // the rows after it, up to key_span positions (keys [n, tk, d] read as [n * tk, d]; lengths are bounded
  // by key_span instead of tk). The encoder memory pool, [positions, 1, d], holds each sentence as a run of
  // positions this way. 0: a row's keys stay in its batch row.
  int64_t key_span = 0;
  // Grouped-query attention: keys and values hold num_kv_heads heads (d_kv = num_kv_heads * d / num_heads),
  // and query head h reads kv head h / (num_heads / num_kv_heads), the pairing of Hugging Face's repeat_kv.
  // 0: as many as num_heads.
  int num_kv_heads = 0;
  // A hint, for many query rows of their own (tq = 1): [tiles, 2] int32 on the keys' device, each tile a
  // first row and a count of consecutive rows (1 to kAttentionTileRows) that read the same keys (the same
  // key_rows entry or table row), each up to its own length. The packed encoder (a sentence's tokens) and a
  // decoder-only prefill (a prompt's tokens) give it; the CUDA backend then runs the tiles on tensor cores
  // (fp16, head size 64). It does not change what is computed; the CPU ignores it.
  const Tensor* query_tiles = nullptr;
  // The CPU may evaluate the softmax's exp vectorized instead of with libm (not the exact path's bits; the
  // int8 precision, cpu/approximate_math.h). Other devices ignore it.
  bool approximate_exp = false;
};

// append_self_attention_step's general form (ops/ops.h).
struct SelfAttentionStepOptions {
  const Tensor* bias = nullptr;  // [qkv width], qkv's dtype; none: the rows as they are
  // qkv rows are [query_width + 2 d_kv], d_kv the caches' width (kv heads * head size beside heads * head
  // size). 0: as wide as the caches, qkv [s, 3d].
  int64_t query_width = 0;
  const Tensor* cache_rows = nullptr;  // [s] int32, as above
  // [s] int32: slot s records its cache row in history row history_rows[s] instead of row s (history [R, T],
  // any R): the tokens of a prompt's prefill chunk, one slot each, fill their prompt's row. Pairs (history
  // row, position) must be distinct.
  const Tensor* history_rows = nullptr;
  // Rotary positions (Llama): the query and key heads of each row are rotated by its position before they
  // are written, as apply_rotary_embedding(qkv, positions, *rotary, rotary_shape) would rotate qkv first
  // (the same values; CUDA does it in the same pass). [positions, head_dim] fp32 (rotary_table); no bias
  // with it. Null: none.
  const Tensor* rotary = nullptr;
  RotaryShape rotary_shape;
};

// Where append_self_attention_step writes, and the positions it writes at (ops/ops.h).
struct SelfAttentionStepCaches {
  const Tensor& positions;
  Tensor& key_cache;
  Tensor& value_cache;
  Tensor& history;
};

// The norm a product's input goes through first: a layer norm, an RMS norm, or neither (at most one is set).
struct InputNorm {
  const LayerNormWeights* layer = nullptr;
  const RmsNormWeights* rms = nullptr;
};

// How the k best of a row are found; every method is exact (ties to the lower id). The CPU always scans.
enum class TopkAlgorithm {
  Auto,          // CUDA: Hierarchical where the vocabulary makes enough groups, else FullScan
  FullScan,      // CUDA radix select: a histogram of each key's top bits bounds the k-th best, one more pass
                 // gathers the candidates
  Hierarchical,  // retrieve-then-rerank: group maxima give a threshold, only groups above it are re-read
};
inline constexpr int kMaxDeviceTopk = 64;  // the GPU's largest k (beam search asks for 2 x beam)
// The vocabularies where Hierarchical can be forced at every k up to kMaxDeviceTopk, whatever the dtype and
// alignment: each row makes at least k groups (of at most 64 ids) and their maxima fit shared memory.
// Forcing it elsewhere may be an error; Auto then scans.
inline constexpr int64_t kMinHierarchicalTopkVocab = 64 * kMaxDeviceTopk;
inline constexpr int64_t kMaxHierarchicalTopkVocab = 262144;
inline bool hierarchical_topk_fits(int64_t vocab) {
  return vocab >= kMinHierarchicalTopkVocab && vocab <= kMaxHierarchicalTopkVocab;
}
struct TopkOptions {
  int k = 1;                               // 1 <= k <= V, and <= kMaxDeviceTopk on the GPU; 1 is a fused argmax
  const Tensor* bias = nullptr;            // [V], the logits' dtype or fp32
  const Tensor* suppressed_ids = nullptr;  // [n] int32, set to -inf after normalization
  // Optional: suppression_bitmap(*suppressed_ids, V), made once and passed with the ids so that a decoder
  // step does not build it again (the GPU reads the bitmap; the CPU, the ids).
  const Tensor* suppressed_bitmap = nullptr;
  TopkAlgorithm algorithm = TopkAlgorithm::Auto;
  // false: the logits already are log-probs (penalize_repetitions normalized and processed them, as HF's
  // beam search does): the k best are returned as they are.
  bool normalize = true;
};

// penalize_repetitions' settings.
struct RepetitionOptions {
  float penalty = 1.0f;     // 1 = off
  int no_repeat_ngram = 0;  // 0 = off
  const Tensor* bias = nullptr;  // [V] fp32
  bool normalize = false;
};

// One row's sampling settings, packed into int32 words for the device ([rows, kSamplingRowWords]).
// Hugging Face's warpers in HF's order: temperature, then top-k, top-p and min-p.
struct SamplingRow {
  float temperature = 1.0f;
  int32_t top_k = 0;        // 0 = the whole vocabulary
  float top_p = 1.0f;       // 1 = off
  float min_p = 0.0f;       // 0 = off
  int32_t banned_id = -1;   // an id this row must not draw (EOS before the minimum length); -1 = none
  uint32_t seed_low = 0, seed_high = 0;
  uint32_t line_low = 0, line_high = 0;  // the input line: the draw's random stream
  uint32_t step = 0;                     // tokens the sample generated before this draw
  uint32_t sample = 0;                   // the sample's index among the line's samples
};
inline constexpr int64_t kSamplingRowWords = sizeof(SamplingRow) / sizeof(int32_t);
static_assert(sizeof(SamplingRow) % sizeof(int32_t) == 0, "sampling rows travel as int32 words");

// sample_tokens' bias and masks.
struct SampleOptions {
  const Tensor* bias = nullptr;             // [V] fp32
  const Tensor* suppressed_ids = nullptr;   // [n] int32
  const Tensor* suppressed_bitmap = nullptr;  // optional, as in TopkOptions
};

// The persistent decoder step's limits, profile phases and arguments (persistent_decoder_step in ops/ops.h).
inline constexpr int64_t kPersistentDecoderMaxRows = 16;
inline constexpr int64_t kPersistentDecoderMaxLayers = 16;
inline constexpr size_t kPersistentDecoderMaxSharedBytes = 200 * 1024;
// The phases of a layer in the kernel, in order, as `seqtrans bench --profile` names them (each name starts
// with the prefix), and the last one.
inline constexpr const char* kPersistentDecoderStagePrefix = "persistent: ";
inline constexpr int64_t kPersistentDecoderPhasesPerLayer = 8;
inline constexpr const char* kPersistentDecoderPhaseNames[kPersistentDecoderPhasesPerLayer] = {
    "persistent: QKV",           "persistent: self-attention", "persistent: self output", "persistent: cross query",
    "persistent: cross-attention", "persistent: cross output", "persistent: FFN inner",   "persistent: FFN outer"};
inline constexpr const char* kPersistentDecoderFinalPhase = "persistent: final norm";
// The rest of the kernel's wall time: its launch, the step's inputs read at its start, and the return.
inline constexpr const char* kPersistentDecoderLaunchPhase = "persistent: launch and return";
struct PersistentDecoderLayer {
  const Tensor *qkv_weight, *qkv_bias, *self_output_weight, *self_output_bias, *self_gamma, *self_beta;
  const Tensor *cross_query_weight, *cross_query_bias, *cross_output_weight, *cross_output_bias, *cross_gamma,
      *cross_beta;
  const Tensor *inner_weight, *inner_bias, *outer_weight, *outer_bias, *ffn_gamma, *ffn_beta;
  Tensor *self_keys, *self_values;            // [blocks, B, d]
  const Tensor *cross_keys, *cross_values;    // [positions, 1, d]
};
// The step's inputs, as DecoderStepInputs holds them ([rows] int32 each; history [>= rows, T] int32). With a
// reorder ([rows] int32), row r continues history row reorder[r] (a beam's parent): the kernel reads the
// older entries through it and rewrites rows 0..rows-1 in place after its last read, so the history needs
// no reordered copy; without one, row r continues row r.
struct PersistentDecoderStep {
  const Tensor *positions, *key_lengths, *memory_starts, *source_lengths, *cache_rows;
  Tensor* history;
  int64_t source_span = 0;
  int num_heads = 1;
  float epsilon = 1e-5f;
  Activation activation = Activation::Relu;
  const Tensor* reorder = nullptr;
  // Pre-norm layers (mBART, M2M-100/NLLB): each sublayer normalizes its input with its own norm (the layer's
  // self_, cross_ and ffn_ gamma and beta) and adds its output to the stream; the stack's final norm
  // ([d] each) ends the step. Post-norm: each norm is on its sublayer's output.
  bool pre_norm = false;
  const Tensor *final_gamma = nullptr, *final_beta = nullptr;
};
// The output layer folded into the persistent step, for greedy search: each row's best id that the bitmap
// does not suppress and its log-prob, z - logsumexp(z) over the whole vocabulary with z = x W^T + bias,
// written as log_softmax_topk writes k = 1 (ties to the lower id). Saves the logits' product, the argmax and
// their launches; persistent_output_fits says for which shapes.
struct PersistentGreedyOutput {
  const Tensor* weight = nullptr;             // [V, d], x's dtype
  const Tensor* bias = nullptr;               // [V] fp32 (the model keeps it so), or none
  const Tensor* suppressed_bitmap = nullptr;  // suppression_bitmap(ids, V), or none
  Tensor* values = nullptr;                   // [rows] fp32 (any shape of rows elements)
  Tensor* ids = nullptr;                      // [rows] int32
};
inline constexpr const char* kPersistentDecoderFinalOutputPhase = "persistent: final norm and output layer";

}  // namespace ops
}  // namespace seqtrans

// The engine's tuning switches and the measured defaults behind them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "ops/ops.h"

namespace seqtrans {

// Decoder steps of at most this many rows run through the persistent decoder kernel by default: the measured
// crossovers (Transformer-base 32 -> 32, docs/BENCHMARKS.md). In fp16 its products run on tensor cores from
// 3 rows; against the layer-by-layer graph it is ahead up to 8 rows and about even at 16 (H100: 1.12x at 1
// row, 1.24x at 8, 1.04x at 16; H200 leases 1.06-1.17x at 1, 1.12-1.14x at 4, 0.98-1.08x at 16); fp32
// products run on CUDA cores, ahead at 1 and 2 rows only (H200: 1.11x, 1.09x; 0.56x at 16, where every
// warp re-reads each input row per output column).
inline constexpr int64_t kPersistentDecodeRowsF16 = 16, kPersistentDecodeRowsF32 = 2;
// The greedy output layer runs inside the persistent kernel only for weights of at most this many bytes: the
// kernel's grid (a block of 8 warps a multiprocessor) streamed NLLB-600M's 525 MB in 202 us a step against
// 118 us for the separate product (H200, batch 1: 0.94x with it folded, 0.86x at 2 rows; even at 4 and 8),
// while Transformer-base's 33 MB gains (1.05-1.17x). OPUS-MT heads are 30-60 MB.
inline constexpr size_t kPersistentOutputMaxBytes = size_t{128} << 20;
// Pre-norm stacks (mBART, M2M-100/NLLB) take the persistent kernel by default only from this many rows, where
// its fp16 products run on tensor cores; at 1 and 2 rows its CUDA-core products at d = 1,024 lose to the
// graph's small-rows kernels (H200, NLLB-600M shape, ms a step against main: 1 row 0.76-0.79 vs 0.66, 2 rows
// 0.88-0.89 vs 0.79-0.81; 4 rows 0.79-0.81 vs 0.87-0.89, 8 rows 0.83-0.85 vs 0.91-1.01, beam 4 x 1 0.85-0.87
// vs 0.97-1.00). An explicit EngineTuning::persistent_decode_rows applies from one row.
inline constexpr int64_t kPersistentPreNormMinRows = 3;
// EngineTuning::persistent_decode_rows: the crossover of the model's dtype.
inline constexpr int64_t kPersistentDecodeAuto = -1;
// Decoder steps of more rows launch their kernels one after the other even where EngineTuning::overlapped_launches
// is on. H200, fp16, ms a step with it on and off: NLLB-600M batch 1 0.598-0.608 against 0.632-0.635,
// TinyLlama batch 1 0.925-0.947 against 0.979-0.981; batch 4 and 16 even; TinyLlama batch 64 1.585-1.610
// against 1.559-1.564 (from 9 rows the step's products run on cuBLAS, which does not overlap).
inline constexpr int64_t kOverlappedLaunchMaxRows = 8;
// Greedy steps run at once where EngineTuning::steps_per_read asks for it: the host's round trip (50-60 us a
// batch-1 step on an H100) is paid once for them, and a sentence that ends inside wastes at most this many
// less one. H100: 1.03-1.04x at batch 1 and 16 (synthetic), 1.10x translating newstest one sentence at a time.
inline constexpr int kGreedyStepsPerRead = 4;
// EngineTuning::steps_per_read: kGreedyStepsPerRead on CUDA, 1 on the CPU (no round trip to save there).
inline constexpr int kStepsPerReadAuto = -1;
int64_t default_persistent_decode_rows(DataType dtype);
// Prompt tokens a decoder-only model prefills between two decoder steps (EngineTuning::prefill_chunk_tokens).
// 1024 (H200, TinyLlama shape, fp16, prefill attention on tensor cores): 7 rows decoding wait 7.9 ms a chunk
// against 5.5 at 256, and 64 prompts of 512 tokens (128 new each) finish in 540 ms against 862 at 256.
// With no row decoding a pass is not held to it (DecoderOnlyModel::continue_admission).
inline constexpr int64_t kPrefillChunkTokens = 1024;

// The engine's speed ideas, each of which can be switched off: production uses the defaults, and the
// benchmark's ablations (lib/bench/ablations.h) turn one off at a time. Chosen where the engine is put
// together (TranslatorOptions, bench), read by the models and the step runner.
struct EngineTuning {
  ops::TopkAlgorithm topk_algorithm = ops::TopkAlgorithm::Auto;
  // false: copy the full logits to the host and select there (the benchmark's --no-fused-topk ablation).
  bool fused_output = true;
  // Replay each decoder step as one CUDA graph (CUDA with fused_output only; off while profiling, whose
  // per-stage synchronization a graph cannot hold). false: launch every op (--no-cuda-graphs).
  bool cuda_graphs = true;
  // CUDA: each of the engine's own kernels may start while the kernel before it finishes, loading its weights
  // meanwhile (programmatic dependent launch, cuda/kernels/launch.cuh; sm_90 on), in admission and in decoder
  // steps of at most kOverlappedLaunchMaxRows rows. false: ordinary launches (--no-overlapped-launches).
  bool overlapped_launches = true;
  // Encode joining sentences packed, with no padding tokens: GEMMs over their concatenated tokens,
  // attention per sentence over a span of the packed tokens. false: padded to the longest (--no-packed-encoder).
  bool packed_encoder = true;
  // Decoder steps of at most this many rows run every layer in one persistent kernel (CUDA, shapes it
  // fits; ops::persistent_decoder_step) instead of ~12 launches a layer. 0: never (--no-persistent-decode);
  // at most ops::kPersistentDecoderMaxRows; kPersistentDecodeAuto: default_persistent_decode_rows(dtype).
  int64_t persistent_decode_rows = kPersistentDecodeAuto;
  // Greedy steps the session runs at once when nothing else needs the host in between, each fed the last
  // one's choices on the device, read back together (StepModel::steps_per_read); 1 reads every step
  // (--no-steps-at-once); kStepsPerReadAuto: the device's default.
  int steps_per_read = kStepsPerReadAuto;
  // Greedy steps that the persistent kernel runs also run the output layer in it (logits, normalizer and
  // argmax: ops::PersistentGreedyOutput) where the shape allows. false: --no-persistent-argmax.
  bool persistent_argmax = true;
  // A row's arithmetic does not depend on the other rows of its step or encoder pass (core/batch_invariance.h):
  // on CUDA one GEMM algorithm for every row count, no small-rows or persistent kernels, splits fixed per row;
  // on the CPU no small-matrix BLAS kernel. --batch-invariant; off by default for its cost (docs/BENCHMARKS.md).
  bool batch_invariant = false;
  // Chunked prefill (decoder-only models): a joining prompt's keys and values are written at most this many
  // tokens per scheduler iteration (over all prompts being prefilled, packed into one pass), and the rows
  // already decoding take a step between two chunks, so that a long prompt does not stall them; the prompt
  // starts decoding once its prefill is complete. 0: each prompt whole when it is admitted
  // (bench --prefill-chunk 0).
  int64_t prefill_chunk_tokens = kPrefillChunkTokens;
  // CPU: weights packed at load into the panels the CPU's own products read (ops::WeightFormat::Packed;
  // the same bits). false: each product packs the panels it reads again (--no-packed-weights).
  bool packed_weights = true;

  bool operator==(const EngineTuning& other) const {
    return topk_algorithm == other.topk_algorithm && fused_output == other.fused_output &&
           cuda_graphs == other.cuda_graphs &&
           overlapped_launches == other.overlapped_launches && packed_encoder == other.packed_encoder &&
           persistent_decode_rows == other.persistent_decode_rows && steps_per_read == other.steps_per_read &&
           persistent_argmax == other.persistent_argmax && batch_invariant == other.batch_invariant &&
           prefill_chunk_tokens == other.prefill_chunk_tokens && packed_weights == other.packed_weights;
  }
};

}  // namespace seqtrans

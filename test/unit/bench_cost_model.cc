// The FLOP and byte model behind "x of floor", checked against counts done by hand for a tiny shape.
#include "bench/cost_model.h"

#include <cstring>

#include "catch.h"
#include "models/tensor_specs.h"
#include "ops/ops.h"

namespace seqtrans::bench {
namespace {

// 1 encoder and 1 decoder layer, d = 4, ffn 8, vocabulary 10 with an output bias.
ModelShape tiny_shape() {
  ModelShape shape;
  shape.encoder_layers = 1;
  shape.decoder_layers = 1;
  shape.d_model = 4;
  shape.encoder_ffn = 8;
  shape.decoder_ffn = 8;
  shape.vocab = 10;
  shape.output_bias = true;
  return shape;
}

}  // namespace

TEST_CASE("bench cost model: encoder FLOPs and bytes by hand", "[bench]") {
  // 2 sentences x 3 tokens = 6 tokens, fp16 (2 bytes).
  const Cost cost = encoder_cost(tiny_shape(), 2, 3, 2);
  // QKV 2*6*4*12 = 576, output 2*6*4*4 = 192, FFN 2*(2*6*4*8) = 768, attention scores and context
  // 2 * (2*2*3*3*4) = 288; the decoder's memory keys/values 2*6*4*8 = 384.
  CHECK(cost.flops == 576 + 192 + 768 + 288 + 384);
  // Encoder layer weights: QKV 48+12, output 16+4, FFN 32+8 and 32+4, two norms 8+8 = 172;
  // cross K/V projection 32+8 = 40; embedding rows 6*4 = 24; cross caches written 6*8 = 48.
  CHECK(cost.bytes == 2 * (172 + 40 + 24 + 48));
}

TEST_CASE("bench cost model: decoder step FLOPs and bytes by hand", "[bench]") {
  // 2 slots (beams) of 1 sentence, 3 self-attention keys, 3 source positions, fp16.
  const Cost cost = decoder_step_cost(tiny_shape(), DecoderStepShape{2, 1, 3, 3}, 2);
  // QKV 2*2*4*12 = 192; self output, cross query, cross output 3 * 2*2*4*4 = 192; FFN 2*(2*2*4*8) = 256;
  // self attention 2 * (2*3*4) * 2 = 96; cross attention 96; output layer 2*2*4*10 = 160.
  CHECK(cost.flops == 192 + 192 + 256 + 96 + 96 + 160);
  // Layer weights: QKV 60, self output 20, norm 8, cross query 20, cross output 20, norm 8, FFN 40+36,
  // norm 8 = 220; output layer 40 + bias 10; embedding rows 2*4 = 8; self cache 2 slots * 3 keys * 8 =
  // 48; cross cache once per sentence 1 * 3 * 8 = 24; logits written 2*10 = 20.
  CHECK(cost.bytes == 2 * (220 + 50 + 8 + 48 + 24 + 20));
}

TEST_CASE("bench cost model: CPU int8 counts the layers' weights at a byte, the rest at fp32's four", "[bench]") {
  // The decoder step above in fp32 with int8 layers: the 220 layer weights at 1 byte, the output layer
  // (40 + 10), rows, caches and logits (8 + 48 + 24 + 20) at 4.
  const Cost cost =
      decoder_step_cost(tiny_shape(), DecoderStepShape{2, 1, 3, 3}, element_bytes_of(DataType::F32, true));
  CHECK(cost.bytes == 1 * 220 + 4 * (50 + 8 + 48 + 24 + 20));
  // The encoder: 172 layer weights and the 40 of the cross K/V projection at 1 byte, rows and caches at 4.
  CHECK(encoder_cost(tiny_shape(), 2, 3, element_bytes_of(DataType::F32, true)).bytes == 172 + 40 + 4 * (24 + 48));
  CHECK(decoder_step_cost(tiny_shape(), DecoderStepShape{2, 1, 3, 3}, element_bytes_of(DataType::F32, false)).bytes ==
        4 * (220 + 50 + 8 + 48 + 24 + 20));
}

TEST_CASE("bench cost model: a batch-1 greedy step of Transformer-base reads about 77 MB in fp16", "[bench]") {
  const ModelShape shape = model_shape(transformer_base_config());
  const Cost cost = decoder_step_cost(shape, DecoderStepShape{1, 1, 1, 0}, 2);
  // 6 layers x 3,678,720 weights + 32000 x 512 output layer + 32000 bias, then a few rows and the logits.
  CHECK(cost.bytes == 2.0 * (6 * 3678720.0 + 32000 * 512 + 32000 + 512 + 6 * 1024 + 32000));
  CHECK(cost.bytes / 1e6 == Approx(77.05).epsilon(1e-3));
}

TEST_CASE("bench cost model: synthetic run = encoder + forced steps, the first with one slot per sentence",
          "[bench]") {
  const ModelShape shape = tiny_shape();
  const Cost total = synthetic_cost(shape, SyntheticWorkload{2, 3, 5, 2}, 4);
  Cost expected = encoder_cost(shape, 2, 5, 4);
  expected += decoder_step_cost(shape, DecoderStepShape{2, 2, 1, 5}, 4);
  expected += decoder_step_cost(shape, DecoderStepShape{6, 2, 2, 5}, 4);
  CHECK(total.flops == expected.flops);
  CHECK(total.bytes == expected.bytes);
}

TEST_CASE("bench cost model: the floor is the larger of FLOP time and byte time", "[bench]") {
  Cost cost;
  cost.flops = 2e12;
  cost.bytes = 1e9;
  const Floor compute = make_floor(cost, Hardware{1e12, 1e9});
  CHECK(compute.flop_seconds == Approx(2.0));
  CHECK(compute.byte_seconds == Approx(1.0));
  CHECK(compute.seconds() == Approx(2.0));
  CHECK(std::string(compute.bound()) == "flops");
  const Floor memory = make_floor(cost, Hardware{1e13, 1e8});
  CHECK(memory.seconds() == Approx(10.0));
  CHECK(std::string(memory.bound()) == "bytes");
  const Floor unknown = make_floor(cost, Hardware{});
  CHECK(unknown.seconds() == 0);
  CHECK(unknown.cost.flops == 2e12);
}

TEST_CASE("bench cost model: the weight bytes of each persistent-kernel phase", "[bench]") {
  const ModelShape shape = model_shape(transformer_base_config());  // d 512, ffn 2048
  CHECK(persistent_phase_weight_bytes(shape, "QKV", 2) == 3.0 * 512 * 512 * 2);
  CHECK(persistent_phase_weight_bytes(shape, "self output", 2) == 512.0 * 512 * 2);
  CHECK(persistent_phase_weight_bytes(shape, "cross query", 4) == 512.0 * 512 * 4);
  CHECK(persistent_phase_weight_bytes(shape, "FFN inner", 2) == 2048.0 * 512 * 2);
  CHECK(persistent_phase_weight_bytes(shape, "FFN outer", 2) == 2048.0 * 512 * 2);
  // Attention reads caches, not weights; the last two are not a layer's products.
  CHECK(persistent_phase_weight_bytes(shape, "self-attention", 2) == 0);
  CHECK(persistent_phase_weight_bytes(shape, "final norm", 2) == 0);
  // With the greedy output layer folded in, the last phase streams the output weight.
  const double bias_bytes = shape.output_bias ? 4.0 : 0.0;
  CHECK(persistent_phase_weight_bytes(shape, "final norm and output layer", 2) ==
        static_cast<double>(shape.vocab) * (512.0 * 2 + bias_bytes));
  CHECK(persistent_phase_weight_bytes(shape, "no such phase", 2) == 0);
  // A layer's products: 7.3 MB in fp16 at Transformer-base.
  double layer = 0;
  for (const char* name : ops::kPersistentDecoderPhaseNames)
    layer += persistent_phase_weight_bytes(shape, name + std::strlen(ops::kPersistentDecoderStagePrefix), 2);
  CHECK(layer == (3.0 + 1 + 1 + 1 + 4 + 4) * 512 * 512 * 2);
}

TEST_CASE("bench cost model: the real-run bound from totals never exceeds the exact count", "[bench]") {
  const ModelShape shape = model_shape(transformer_base_config());
  for (const int64_t beam : {1, 4}) {
    const SyntheticWorkload workload{16, beam, 20, 25};
    const Cost exact = synthetic_cost(shape, workload, 2);
    RunTotals totals;
    totals.sentences = workload.batch;
    totals.source_tokens = workload.batch * workload.source_length;
    totals.target_tokens = workload.batch * workload.target_length;
    totals.batches = 1;
    totals.max_batch_sentences = workload.batch;
    totals.beam = beam;
    const Cost bound = run_totals_cost(shape, totals, 2);
    CHECK(bound.flops <= exact.flops);
    CHECK(bound.bytes <= exact.bytes);
    // It leaves out only attention and caches, so it stays close for short outputs.
    CHECK(bound.flops > 0.8 * exact.flops);
  }
}

}  // namespace seqtrans::bench

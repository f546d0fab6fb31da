// matmul with a bias (and activation) epilogue on the GPU against the CPU: fused into cuBLASLt for fp16
// with no activation or ReLU, a separate kernel for other activations and for fp32.
#include "catch.h"
#include "core/device.h"
#include "core/error.h"
#include "ops/ops.h"
#include "support/random_tensor.h"

#ifdef SEQTRANS_WITH_CUDA

#include <array>
#include <functional>
#include <initializer_list>
#include <optional>

#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/context.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::max_relative_error;
using seqtrans::testing::random_floats;
using seqtrans::testing::random_ints;

TEST_CASE("cuda matmul with a bias and activation epilogue matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][3] = {{1, 512, 512}, {7, 64, 2048}, {512, 512, 1536}, {33, 100, 257}};
  const std::optional<Activation> activations[] = {std::nullopt, Activation::Relu, Activation::Swish};
  for (DataType dtype : {DataType::F32, DataType::F16})
    for (const auto& shape : shapes)
      for (const std::optional<Activation>& activation : activations)
        for (bool transpose_b : {true, false}) {
          const int64_t m = shape[0], k = shape[1], n = shape[2];
          CAPTURE(dtype_name(dtype), m, k, n, transpose_b, activation.has_value());
          // The CPU gets the fp16-rounded values the GPU computes with.
          const auto rounded = [&](const Tensor& x) { return dtype == DataType::F16 ? x.to(DataType::F16).to(DataType::F32) : x; };
          const Tensor a = rounded(random_floats({m, k}, -1.0f, 1.0f));
          const Tensor b = rounded(random_floats(transpose_b ? Shape{n, k} : Shape{k, n}, -0.1f, 0.1f));
          const Tensor bias = rounded(random_floats({n}, -1.0f, 1.0f));
          ops::MatmulOptions cpu_options;
          cpu_options.transpose_b = transpose_b;
          cpu_options.bias = &bias;
          cpu_options.activation = activation;
          const Tensor expected = ops::matmul(a, b, cpu_options);
          const Tensor gpu_bias = bias.to(dtype).to(Device::CUDA);
          ops::MatmulOptions gpu_options = cpu_options;
          gpu_options.bias = &gpu_bias;
          const Tensor got = ops::matmul(a.to(dtype).to(Device::CUDA), b.to(dtype).to(Device::CUDA), gpu_options);
          cuda::synchronize();
          REQUIRE(got.shape() == expected.shape());
          CHECK(max_relative_error(got.to_float_vector(), expected.to_float_vector()) <
                (dtype == DataType::F16 ? 1e-2 : 1e-5));
        }
}

namespace {

// fp16 products of shape [m, k] x [n, k]^T on the GPU against the CPU, with fp16 or fp32 output, with and
// without a bias and ReLU (fp16 output only).
void check_small_products(std::initializer_list<std::array<int64_t, 3>> shapes) {
  for (const auto& shape : shapes)
    for (bool fp32_output : {false, true})
      for (bool with_bias : {false, true}) {
        if (fp32_output && with_bias) continue;  // fp32 bias epilogues are not used by the model
        const int64_t m = shape[0], k = shape[1], n = shape[2];
        CAPTURE(m, k, n, fp32_output, with_bias);
        const auto rounded = [](const Tensor& x) { return x.to(DataType::F16).to(DataType::F32); };
        const Tensor a = rounded(random_floats({m, k}, -1.0f, 1.0f));
        const Tensor b = rounded(random_floats({n, k}, -0.1f, 0.1f));
        const Tensor bias = rounded(random_floats({n}, -1.0f, 1.0f));
        ops::MatmulOptions options;
        options.alpha = 0.5f;
        options.fp32_output = fp32_output;
        if (with_bias) {
          options.bias = &bias;
          options.activation = Activation::Relu;
        }
        const Tensor expected = ops::matmul(a, b, options);
        const Tensor gpu_bias = bias.to(DataType::F16).to(Device::CUDA);
        if (with_bias) options.bias = &gpu_bias;
        const Tensor got =
            ops::matmul(a.to(DataType::F16).to(Device::CUDA), b.to(DataType::F16).to(Device::CUDA), options);
        cuda::synchronize();
        REQUIRE(got.dtype() == (fp32_output ? DataType::F32 : DataType::F16));
        CHECK(max_relative_error(got.to_float_vector(), expected.to_float_vector()) < (fp32_output ? 1e-4 : 1e-2));
      }
}

}  // namespace

TEST_CASE("cuda matmul with at most 8 rows (the small-rows kernel) matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // Odd column counts and both block widths (n <= 4096 and wider); 1 row of the logits' width and of many
  // inputs; 2 to 8 rows up to 4,096 inputs in all, and past it (cuBLAS).
  check_small_products(
      {{1, 512, 32000}, {4, 512, 1001}, {2, 2048, 512}, {3, 8, 7}, {8, 512, 4100}, {1, 5632, 2048}, {8, 2048, 512}});
}

TEST_CASE("cuda matmul of 2 to 8 rows onto wide outputs (the tensor-core kernel) matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // Column counts not a multiple of 8 or of the block's 64; inputs of 3 and 5 slices of 32 (the loop's
  // remainder) and of 64; 9 and 16 rows go to cuBLAS.
  check_small_products({{2, 512, 32000}, {4, 512, 16384}, {8, 512, 20001}, {7, 2048, 32000}, {3, 96, 16400},
                        {5, 160, 17000}, {9, 512, 20001}, {16, 512, 32000}});
}

namespace {

// The fused op on the GPU against the two ops it stands for, run one by one on the GPU: bit for bit.
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to(Device::CPU).to(DataType::F32).to_float_vector();
  const std::vector<float> y = b.to(Device::CPU).to(DataType::F32).to_float_vector();
  return x == y;
}

Tensor on_gpu(const Tensor& x) { return x.to(DataType::F16).to(Device::CUDA); }

}  // namespace

TEST_CASE("matmul_gated_activation and matmul_bias_residual give the ops' own values, fused or not", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // 1 row and small products of up to 8 rows take the fused epilogues (the tensor-core kernel too for the
  // residual at 16,384 columns); larger ones and 9 and 64 rows run the ops one by one. Widths of TinyLlama's
  // feed-forward and odd ones.
  const int64_t shapes[][3] = {{1, 2048, 5632}, {3, 512, 1001}, {8, 5632, 2048}, {4, 512, 16384}, {2, 2048, 5632},
                               {9, 512, 512},  {64, 256, 384}};
  for (const auto& shape : shapes)
    for (const bool with_bias : {false, true}) {
      const int64_t m = shape[0], k = shape[1], n = shape[2];
      CAPTURE(m, k, n, with_bias);
      const Tensor x = on_gpu(random_floats({m, k}, -1.0f, 1.0f));
      const Tensor gate_up = on_gpu(random_floats({2 * n, k}, -0.1f, 0.1f)), down = on_gpu(random_floats({n, k}, -0.1f, 0.1f));
      const Tensor gate_up_bias = on_gpu(random_floats({2 * n}, -1.0f, 1.0f)), bias = on_gpu(random_floats({n}, -1.0f, 1.0f));
      const Tensor residual = on_gpu(random_floats({m, n}, -4.0f, 4.0f));
      ops::MatmulOptions options;
      if (with_bias) options.bias = &gate_up_bias;
      CHECK(same_bits(ops::matmul_gated_activation(x, gate_up, options.bias),
                      ops::gated_activation(ops::matmul(x, gate_up, options))));
      CHECK(same_bits(ops::matmul_bias_residual(x, down, bias, residual),
                      ops::add_bias_residual(ops::matmul(x, down), bias, residual)));
    }
}

TEST_CASE("rms_norm_matmul and add_residual_rms_norm_matmul_gated give the ops' own bits, fused or not", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // One row takes the prologue (rms_norm's block of 32 to 1,024 threads played by the product's 128 or 256:
  // widths of 40, 1,032 and TinyLlama's 2,048); 2 to 9 rows, 8,192 columns of 2 rows (tensor cores) and 8,200
  // inputs (rms_norm two vectors a thread) run the ops one by one.
  const int64_t shapes[][3] = {{1, 2048, 2560}, {3, 2048, 2560}, {8, 2048, 1000}, {1, 40, 96},   {1, 1032, 300},
                               {2, 512, 8192},  {9, 512, 512},   {1, 8200, 64},   {4, 2048, 5632}, {1, 2048, 5632}};
  for (const auto& shape : shapes)
    for (const bool with_bias : {false, true}) {
      const int64_t m = shape[0], k = shape[1], n = shape[2];
      CAPTURE(m, k, n, with_bias);
      const Tensor x = on_gpu(random_floats({m, k}, -2.0f, 2.0f)), residual = on_gpu(random_floats({m, k}, -2.0f, 2.0f));
      const Tensor gamma = on_gpu(random_floats({k}, 0.5f, 1.5f));
      const Tensor weight = on_gpu(random_floats({n, k}, -0.1f, 0.1f)), gate_up = on_gpu(random_floats({2 * n, k}, -0.1f, 0.1f));
      const Tensor bias = on_gpu(random_floats({n}, -1.0f, 1.0f)), gate_up_bias = on_gpu(random_floats({2 * n}, -1.0f, 1.0f));
      const ops::RmsNormWeights norm{gamma, 1e-5f};
      ops::MatmulOptions options;
      if (with_bias) options.bias = &bias;
      CHECK(same_bits(ops::rms_norm_matmul(x, norm, weight, options.bias),
                      ops::matmul(ops::rms_norm(x, norm), weight, options)));
      ops::MatmulOptions gated_options;
      if (with_bias) gated_options.bias = &gate_up_bias;
      const ops::ResidualGated fused =
          ops::add_residual_rms_norm_matmul_gated(x, residual, norm, gate_up, gated_options.bias);
      const ops::ResidualNorm normed = ops::add_residual_rms_norm(x, residual, norm);
      CHECK(same_bits(fused.sum, normed.sum));
      CHECK(same_bits(fused.gated, ops::gated_activation(ops::matmul(normed.normalized, gate_up, gated_options))));
    }
}

TEST_CASE("layer_norm_matmul gives layer_norm then matmul's bits, one fp16 row through the prologue", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // One row of widths layer_norm's warp kernel takes (1, 2, 4 and 8 vectors a lane: 64 to 2,048) runs the
  // prologue, which must report that it ran; 3 rows and a width past the warp kernel's (2,056) run the ops.
  const int64_t shapes[][3] = {{1, 1024, 3072}, {1, 1024, 4096}, {1, 64, 96}, {1, 512, 200}, {1, 2048, 1000},
                               {1, 4096, 1024}, {3, 1024, 1024}, {1, 2056, 64}};
  for (const auto& shape : shapes)
    for (const int epilogue : {0, 1, 2}) {  // none, bias, bias and ReLU
      const int64_t m = shape[0], k = shape[1], n = shape[2];
      CAPTURE(m, k, n, epilogue);
      const Tensor x = on_gpu(random_floats({m, k}, -2.0f, 2.0f));
      const Tensor gamma = on_gpu(random_floats({k}, 0.5f, 1.5f)), beta = on_gpu(random_floats({k}, -0.5f, 0.5f));
      const Tensor weight = on_gpu(random_floats({n, k}, -0.1f, 0.1f)), bias = on_gpu(random_floats({n}, -1.0f, 1.0f));
      const ops::LayerNormWeights norm{gamma, beta, 1e-5f};
      ops::MatmulOptions options;
      if (epilogue >= 1) options.bias = &bias;
      if (epilogue == 2) options.activation = Activation::Relu;
      const Tensor separate = ops::matmul(ops::layer_norm(x, norm), weight, options);
      CHECK(same_bits(ops::layer_norm_matmul(x, norm, weight, options), separate));
      Tensor fused({m, n}, DataType::F16, Device::CUDA);
      const bool prologue = cuda::fused_layer_norm_matmul(x, norm, weight, options, fused, cuda::current_stream());
      CHECK(prologue == (m == 1 && k <= 2048));
      if (prologue) CHECK(same_bits(fused, separate));
    }
}

// ops::project_self_attention_step against the two ops it stands for (the normalized product, then
// append_self_attention_step): the same bits in the query, both caches and the history. One fp16 row takes
// the fused kernel, which must report that it ran: NLLB's layer norm and bias into whole-row caches and into
// blocks, no norm, TinyLlama's and Llama-2-7B's RMS norm with rotary pairs (and a position past the rotary
// table, left unrotated), and a position past the history (nothing written but the query). Two rows run the
// ops one by one.
TEST_CASE("project_self_attention_step gives the product then append_self_attention_step's bits", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  enum Norm { kNone, kLayer, kRms };
  struct Case {
    const char* name;
    int64_t rows, d, heads, kv_heads, head_dim;
    Norm norm;
    bool bias, rotary, blocks;
    int32_t position;
  };
  const Case cases[] = {
      {"nllb", 1, 1024, 16, 16, 64, kLayer, true, false, false, 7},
      {"nllb blocks", 1, 1024, 16, 16, 64, kLayer, true, false, true, 21},
      {"no norm", 1, 512, 8, 8, 64, kNone, true, false, false, 3},
      {"tinyllama", 1, 2048, 32, 4, 64, kRms, false, true, true, 37},
      {"tinyllama past the table", 1, 2048, 32, 4, 64, kRms, false, true, true, 45},
      {"llama-2-7b", 1, 4096, 32, 32, 128, kRms, false, true, true, 5},
      {"gqa 2 without a norm", 1, 512, 8, 4, 64, kNone, false, true, true, 9},
      {"past the history", 1, 1024, 16, 16, 64, kLayer, true, false, true, 50},
      {"two rows", 2, 1024, 16, 16, 64, kLayer, true, false, true, 12},
  };
  const int64_t capacity = 48, block = 16, blocks = 6, table_positions = 40;
  for (const Case& c : cases) {
    CAPTURE(c.name);
    const int64_t queries = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim, n = queries + 2 * kv;
    const Tensor x = on_gpu(random_floats({c.rows, c.d}, -2.0f, 2.0f));
    const Tensor weight = on_gpu(random_floats({n, c.d}, -0.1f, 0.1f)), bias = on_gpu(random_floats({n}, -1.0f, 1.0f));
    const Tensor gamma = on_gpu(random_floats({c.d}, 0.5f, 1.5f)), beta = on_gpu(random_floats({c.d}, -0.5f, 0.5f));
    const Tensor table = ops::rotary_table(table_positions, c.head_dim, 10000.0f, Device::CUDA);
    const ops::LayerNormWeights layer_norm{gamma, beta, 1e-5f};
    const ops::RmsNormWeights rms_norm{gamma, 1e-5f};
    ops::InputNorm norm;
    if (c.norm == kLayer) norm.layer = &layer_norm;
    if (c.norm == kRms) norm.rms = &rms_norm;
    std::vector<int32_t> positions_of, cache_rows_of;
    for (int64_t r = 0; r < c.rows; ++r) {
      positions_of.push_back(c.position + static_cast<int32_t>(r));
      cache_rows_of.push_back(static_cast<int32_t>((3 + 2 * r) % blocks));
    }
    const Tensor positions = Tensor::from_ints({c.rows}, positions_of).to(Device::CUDA);
    const Tensor cache_rows = Tensor::from_ints({c.rows}, cache_rows_of).to(Device::CUDA);
    ops::SelfAttentionStepOptions options;
    options.query_width = queries;
    if (c.bias) options.bias = &bias;
    if (c.blocks) options.cache_rows = &cache_rows;
    if (c.rotary) options.rotary = &table;
    options.rotary_shape = {static_cast<int>(c.heads), static_cast<int>(c.kv_heads)};
    const Shape cache_shape = c.blocks ? Shape{blocks, block, kv} : Shape{c.rows, capacity, kv};
    const Tensor keys_before = on_gpu(random_floats(cache_shape)), values_before = on_gpu(random_floats(cache_shape));
    const Tensor history_before = random_ints({c.rows, capacity}, -9, -1).to(Device::CUDA);
    struct Written {
      Tensor query, keys, values, history;
    };
    const auto run = [&](const std::function<Tensor(const ops::SelfAttentionStepCaches&)>& step) {
      Written w{Tensor(), keys_before.to(Device::CUDA), values_before.to(Device::CUDA), history_before.to(Device::CUDA)};
      w.query = step({positions, w.keys, w.values, w.history});
      return w;
    };
    const Written separate = run([&](const ops::SelfAttentionStepCaches& caches) {
      const Tensor qkv = c.norm == kLayer ? ops::matmul(ops::layer_norm(x, layer_norm), weight)
                         : c.norm == kRms ? ops::matmul(ops::rms_norm(x, rms_norm), weight)
                                          : ops::matmul(x, weight);
      return ops::append_self_attention_step(qkv, caches.positions, caches.key_cache, caches.value_cache,
                                             caches.history, options);
    });
    const Written op = run([&](const ops::SelfAttentionStepCaches& caches) {
      return ops::project_self_attention_step(x, norm, weight, {}, caches, options);
    });
    bool fused = false;
    const Written kernel = run([&](const ops::SelfAttentionStepCaches& caches) {
      Tensor query({c.rows, queries}, DataType::F16, Device::CUDA);
      fused = cuda::fused_project_self_attention_step(x, norm, weight, caches, options, query, cuda::current_stream());
      return query;
    });
    CHECK(fused == (c.rows == 1));
    for (const Written* got : {&op, fused ? &kernel : &op}) {
      CHECK(same_bits(got->query, separate.query));
      CHECK(same_bits(got->keys, separate.keys));
      CHECK(same_bits(got->values, separate.values));
      CHECK(got->history.to(Device::CPU).to_int_vector() == separate.history.to(Device::CPU).to_int_vector());
    }
    CHECK(!same_bits(separate.keys, keys_before) == (c.position + c.rows <= capacity));
  }
}

#endif

// The front end's checks are the same on every device.
TEST_CASE("matmul refuses an activation without a bias and a bias of the wrong size or type", "[ops]") {
  const seqtrans::Tensor a = seqtrans::testing::random_floats({4, 8}), b = seqtrans::testing::random_floats({6, 8});
  const seqtrans::Tensor short_bias = seqtrans::testing::random_floats({5});
  const seqtrans::Tensor int_bias = seqtrans::Tensor::from_ints({6}, {1, 2, 3, 4, 5, 6});
  seqtrans::ops::MatmulOptions options;
  options.activation = seqtrans::Activation::Relu;
  CHECK_THROWS_AS(seqtrans::ops::matmul(a, b, options), seqtrans::Error);
  options.bias = &short_bias;
  CHECK_THROWS_AS(seqtrans::ops::matmul(a, b, options), seqtrans::Error);
  options.bias = &int_bias;
  CHECK_THROWS_AS(seqtrans::ops::matmul(a, b, options), seqtrans::Error);
}

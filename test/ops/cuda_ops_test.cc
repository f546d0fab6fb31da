// Every op on the CUDA device against the CPU reference, on fresh random inputs, in fp32 and fp16.
// fp16 cases give the CPU the same fp16-rounded inputs, so only the GPU's fp16 storage differs.
#include "catch.h"
#include "core/device.h"

#ifdef SEQTRANS_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/cpu_ops.h"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/context.h"
#include "ops/graph.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/gpu_operands.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

ops::AttentionOptions attention_options(int64_t width, int64_t heads, const Tensor* key_rows) {
  ops::AttentionOptions options;
  options.num_heads = static_cast<int>(heads);
  options.scale = 1.0f / std::sqrt(static_cast<float>(width / heads));
  options.key_rows = key_rows;
  return options;
}

// Per-row key lengths in [1, capacity], the first full and the second a single key.
std::vector<int32_t> varied_lengths(int64_t batch, int64_t capacity) {
  std::vector<int32_t> lengths = random_ints({batch}, 1, static_cast<int32_t>(capacity)).to_int_vector();
  lengths[0] = static_cast<int32_t>(capacity);
  if (batch > 1) lengths[1] = 1;
  return lengths;
}

}  // namespace

TEST_CASE("cuda matmul matches the CPU, with and without transposed b", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][3] = {{1, 64, 64}, {7, 33, 19}, {37, 100, 257}, {128, 512, 1536}, {5, 1, 3}};
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes)
      for (bool transpose_b : {true, false}) {
        const int64_t m = shape[0], k = shape[1], n = shape[2];
        CAPTURE(dtype_name(dtype), m, k, n, transpose_b);
        const Operand a = random_operand({m, k}, dtype);
        const Operand b = random_operand(transpose_b ? Shape{n, k} : Shape{k, n}, dtype);
        const ops::MatmulOptions options{transpose_b, 0.5f};
        const Tensor expected = ops::matmul(a.cpu, b.cpu, options);
        const Tensor got = ops::matmul(a.gpu, b.gpu, options);
        REQUIRE(got.shape() == expected.shape());
        // Rounding grows with the sums' length and size (both ~k here): fp32 at k = 512 reached 1.1e-5 of
        // |result| on one seed, from summation order alone.
        const double k_scale = std::max(1.0, static_cast<double>(k) / 128.0);
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype) * k_scale);
      }
}

TEST_CASE("cuda add_bias and bias_activation match the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][2] = {{5, 12}, {3, 7}, {64, 2048}, {1, 1}, {17, 520}};
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes) {
      CAPTURE(dtype_name(dtype), shape[0], shape[1]);
      const Operand x = random_operand({shape[0], shape[1]}, dtype, -4.0f, 4.0f);
      const Operand bias = random_operand({shape[1]}, dtype);
      Tensor expected = x.cpu.to(Device::CPU);
      Tensor got = x.gpu.to(Device::CUDA);
      ops::add_bias(expected, bias.cpu);
      ops::add_bias(got, bias.gpu);
      CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
      for (Activation activation : {Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Swish}) {
        CAPTURE(static_cast<int>(activation));
        expected = x.cpu.to(Device::CPU);
        got = x.gpu.to(Device::CUDA);
        ops::bias_activation(expected, bias.cpu, activation);
        ops::bias_activation(got, bias.gpu, activation);
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
      }
    }
}

TEST_CASE("cuda layer norms match the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][2] = {{6, 40}, {3, 7}, {320, 512}, {2, 1000}, {1, 4096}, {9, 33}};
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes) {
      const int64_t rows = shape[0], width = shape[1];
      CAPTURE(dtype_name(dtype), rows, width);
      const Operand x = random_operand({rows, width}, dtype, -3.0f, 3.0f);
      const Operand residual = random_operand({rows, width}, dtype);
      const Operand bias = random_operand({width}, dtype);
      const Operand gamma = random_operand({width}, dtype, 0.5f, 1.5f);
      const Operand beta = random_operand({width}, dtype);
      for (float epsilon : {1e-5f, 1e-6f}) {
        const Tensor expected_fused =
            ops::add_bias_residual_layer_norm(x.cpu, bias.cpu, residual.cpu, {gamma.cpu, beta.cpu, epsilon});
        const Tensor got_fused =
            ops::add_bias_residual_layer_norm(x.gpu, bias.gpu, residual.gpu, {gamma.gpu, beta.gpu, epsilon});
        CHECK(max_relative_error(values_of(got_fused), expected_fused.to_float_vector()) < tolerance(dtype));
        const Tensor expected = ops::layer_norm(x.cpu, {gamma.cpu, beta.cpu, epsilon});
        const Tensor got = ops::layer_norm(x.gpu, {gamma.gpu, beta.gpu, epsilon});
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
      }
      // The pre-norm block end (no norm): residual + (x + bias).
      const Tensor expected_sum = ops::add_bias_residual(x.cpu, bias.cpu, residual.cpu);
      const Tensor got_sum = ops::add_bias_residual(x.gpu, bias.gpu, residual.gpu);
      CHECK(max_relative_error(values_of(got_sum), expected_sum.to_float_vector()) < tolerance(dtype));
    }
}

TEST_CASE("cuda add_bias_residual_norm is add_bias_residual then layer_norm bit for bit and matches the CPU",
          "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // Widths: scalar loads (33, 1001); the warp kernel at 1, 2, 4 and 8 vectors a lane (fp16 40 and 256, 512,
  // 1024, 2048; fp32 40, 256, 1024); a block a row past 256 vectors (fp32 2048, 4096).
  const int64_t shapes[][2] = {{6, 40}, {3, 33}, {17, 256}, {4, 512}, {257, 1024}, {256, 1024},
                               {9, 1001}, {5, 2048}, {1, 4096}};
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes)
      for (const int64_t offset : {0, 1}) {
        const int64_t rows = shape[0], width = shape[1];
        CAPTURE(dtype_name(dtype), rows, width, offset);
        const Operand x = random_operand({rows, width}, dtype, -3.0f, 3.0f);
        const Operand bias = random_operand({width}, dtype);
        const Operand gamma = random_operand({width}, dtype, 0.5f, 1.5f);
        const Operand beta = random_operand({width}, dtype);
        // The residual `offset` elements into its memory: at 1 the fused kernel cannot read it in vectors while
        // layer_norm reads the sum so, and the op runs as the two ops.
        const Operand backing = random_operand({rows * width + 1}, dtype);
        const auto element = [&](const Tensor& memory) {
          return static_cast<char*>(memory.raw()) + offset * static_cast<int64_t>(dtype_size(memory.dtype()));
        };
        const Tensor cpu_residual = Tensor::borrow(element(backing.cpu), {rows, width}, DataType::F32, Device::CPU);
        const Tensor residual = Tensor::borrow(element(backing.gpu), {rows, width}, dtype, Device::CUDA);
        const ops::LayerNormWeights norm{gamma.gpu, beta.gpu, 1e-5f};
        const ops::ResidualNorm got = ops::add_bias_residual_norm(x.gpu, bias.gpu, residual, norm);
        const Tensor sum = ops::add_bias_residual(x.gpu, bias.gpu, residual);
        const Tensor normalized = ops::layer_norm(sum, norm);
        cuda::synchronize();
        CHECK(same_bits(got.sum.to(Device::CPU), sum.to(Device::CPU)));
        CHECK(same_bits(got.normalized.to(Device::CPU), normalized.to(Device::CPU)));
        const ops::ResidualNorm expected =
            ops::add_bias_residual_norm(x.cpu, bias.cpu, cpu_residual, {gamma.cpu, beta.cpu, 1e-5f});
        CHECK(max_relative_error(values_of(got.sum), expected.sum.to_float_vector()) < tolerance(dtype));
        CHECK(max_relative_error(values_of(got.normalized), expected.normalized.to_float_vector()) < tolerance(dtype));
      }
}

TEST_CASE("cuda add_bias_split matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][3] = {{4, 9, 3}, {320, 1536, 3}, {7, 10, 2}, {100, 1024, 2}, {1, 5, 1}};
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes) {
      const int64_t rows = shape[0], width = shape[1];
      const int parts = static_cast<int>(shape[2]);
      CAPTURE(dtype_name(dtype), rows, width, parts);
      const Operand x = random_operand({rows, width}, dtype);
      const Operand bias = random_operand({width}, dtype);
      const std::vector<Tensor> expected = ops::add_bias_split(x.cpu, bias.cpu, parts);
      const std::vector<Tensor> got = ops::add_bias_split(x.gpu, bias.gpu, parts);
      REQUIRE(got.size() == expected.size());
      for (size_t p = 0; p < got.size(); ++p)
        CHECK(max_relative_error(values_of(got[p]), expected[p].to_float_vector()) < tolerance(dtype));
    }
}

TEST_CASE("cuda embed matches the CPU with sinusoidal and learned positions", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][3] = {{11, 6, 3}, {1000, 512, 320}, {50, 7, 9}, {64, 33, 1}};  // vocab, width, count
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes)
      for (PositionEncoding encoding : {PositionEncoding::SinusoidalSplit, PositionEncoding::Learned}) {
        const int64_t vocab = shape[0], width = shape[1], count = shape[2], max_positions = 300;
        CAPTURE(dtype_name(dtype), vocab, width, count, static_cast<int>(encoding));
        const Operand table = random_operand({vocab, width}, dtype);
        const Operand position_table = random_operand({max_positions, width}, dtype);
        const Tensor ids = random_ints({count}, 0, static_cast<int32_t>(vocab - 1));
        const int offset = count % 2 == 0 ? 2 : 0;  // mBART's and M2M-100's positions start at 2
        const Tensor positions = random_ints({count}, 0, static_cast<int32_t>(max_positions - 1 - offset));
        ops::EmbeddingOptions cpu_options, gpu_options;
        cpu_options.scale = gpu_options.scale = 22.627417f;
        cpu_options.positions = gpu_options.positions = encoding;
        cpu_options.position_offset = gpu_options.position_offset = offset;
        cpu_options.position_table = &position_table.cpu;
        gpu_options.position_table = &position_table.gpu;
        const Tensor expected = ops::embed(ids, positions, table.cpu, cpu_options);
        const Tensor got = ops::embed(ids.to(Device::CUDA), positions.to(Device::CUDA), table.gpu, gpu_options);
        // Scaled embeddings reach ~20: compare relative to the magnitude.
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
      }
}

TEST_CASE("cuda embed reads its sinusoid table bit for bit as it evaluates the sinusoid", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t vocab = 1000, width = 512, count = 320, table_positions = 200;
  const Tensor sinusoids = ops::sinusoid_table(table_positions, width, Device::CUDA);
  // The table holds what the CPU's formula gives, to float rounding of the double-precision sine.
  const Tensor cpu_sinusoids = ops::sinusoid_table(table_positions, width, Device::CPU);
  CHECK(max_relative_error(sinusoids.to(Device::CPU).to_float_vector(), cpu_sinusoids.to_float_vector()) < 1e-6);
  for (DataType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    const Operand table = random_operand({vocab, width}, dtype);
    const Tensor ids = random_ints({count}, 0, static_cast<int32_t>(vocab - 1)).to(Device::CUDA);
    const Tensor positions = random_ints({count}, 0, 299).to(Device::CUDA);  // some past the table
    ops::EmbeddingOptions evaluated;
    evaluated.scale = 22.627417f;
    ops::EmbeddingOptions tabled = evaluated;
    tabled.sinusoid_table = &sinusoids;
    CHECK(values_of(ops::embed(ids, positions, table.gpu, tabled)) ==
          values_of(ops::embed(ids, positions, table.gpu, evaluated)));
  }
}

TEST_CASE("cuda attention matches the CPU for decoder steps and encoder blocks", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  struct Case {
    int64_t batch, query_len, key_capacity, width, heads;
  };
  const Case cases[] = {
      {5, 1, 40, 64, 4},      // decoder step, head size 16
      {40, 1, 300, 512, 8},   // decoder step over a long cache
      {3, 3, 17, 30, 3},      // few queries, head size 10 (scalar loads)
      {4, 37, 37, 512, 8},    // encoder block
      {3, 150, 150, 1024, 16},  // encoder, NLLB's width: several 64-query and 64-key tiles, a partial last one
      {2, 130, 130, 256, 2},  // encoder, head size 128
      {2, 20, 45, 512, 2},    // head size 256
      {3, 9, 21, 60, 2},      // head size 30, odd everywhere
      {2, 12, 25, 40, 2},     // head size 20: 16-byte loads in fp32 only
      {1, 1, 1, 8, 1},
  };
  for (DataType dtype : kFloatTypes)
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype), c.batch, c.query_len, c.key_capacity, c.width, c.heads);
      const Operand query = random_operand({c.batch, c.query_len, c.width}, dtype);
      Tensor keys = random_floats({c.batch, c.key_capacity, c.width});
      Tensor values = random_floats({c.batch, c.key_capacity, c.width});
      Tensor lengths = random_ints({c.batch}, 0, static_cast<int32_t>(c.key_capacity));
      std::vector<int32_t> length_values = lengths.to_int_vector();
      length_values[0] = static_cast<int32_t>(c.key_capacity);  // full and, where possible, empty rows
      if (c.batch > 2) length_values[1] = 0;
      lengths = Tensor::from_ints({c.batch}, length_values);
      // Past the lengths a cache may hold anything: NaN there must not leak into the result.
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t j = length_values[b]; j < c.key_capacity; ++j)
          for (int64_t i = 0; i < c.width; ++i) {
            keys.data<float>()[(b * c.key_capacity + j) * c.width + i] = std::numeric_limits<float>::quiet_NaN();
            values.data<float>()[(b * c.key_capacity + j) * c.width + i] = std::numeric_limits<float>::quiet_NaN();
          }
      const Operand k = upload(keys, dtype), v = upload(values, dtype);
      const ops::AttentionOptions options{static_cast<int>(c.heads),
                                          1.0f / std::sqrt(static_cast<float>(c.width / c.heads))};
      const Tensor expected = ops::attention(query.cpu, k.cpu, v.cpu, lengths, options);
      const Tensor got = ops::attention(query.gpu, k.gpu, v.gpu, lengths.to(Device::CUDA), options);
      CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
    }
}

TEST_CASE("cuda gather_rows matches the CPU for every dtype and row size", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const Shape shapes[] = {{5, 3, 5}, {10, 8}, {7, 3}, {320, 256, 64}, {4, 1}};
  for (const Shape& shape : shapes) {
    const int32_t rows = static_cast<int32_t>(shape[0]);
    const Tensor indices = random_ints({2 * shape[0] + 1}, 0, rows - 1);
    for (DataType dtype : {DataType::F32, DataType::F16, DataType::I32}) {
      CAPTURE(shape_string(shape), dtype_name(dtype));
      const Tensor host = dtype == DataType::I32 ? random_ints(shape, -1000, 1000) : random_floats(shape).to(dtype);
      const Tensor got = ops::gather_rows(host.to(Device::CUDA), indices.to(Device::CUDA));
      cuda::synchronize();
      const Tensor expected = ops::gather_rows(host, indices);
      const Tensor back = got.to(Device::CPU);
      REQUIRE(back.bytes() == expected.bytes());
      CHECK(std::memcmp(back.raw(), expected.raw(), back.bytes()) == 0);
    }
  }
}

TEST_CASE("cuda convert rounds like the host conversion", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  for (int64_t count : {1, 7, 8, 1000, 65537}) {
    CAPTURE(count);
    Tensor host = random_floats({count}, -70000.0f, 70000.0f);
    host.data<float>()[0] = 1.0f + 1.0f / 2048;  // a tie: rounds to even
    const Tensor half = ops::convert(host.to(Device::CUDA), DataType::F16);
    const Tensor back = ops::convert(half, DataType::F32);
    cuda::synchronize();
    const Tensor expected_half = host.to(DataType::F16);
    const Tensor got_half = half.to(Device::CPU);
    CHECK(std::memcmp(got_half.raw(), expected_half.raw(), expected_half.bytes()) == 0);
    const Tensor got_back = back.to(Device::CPU);
    const Tensor expected_back = expected_half.to(DataType::F32);
    CHECK(std::memcmp(got_back.raw(), expected_back.raw(), expected_back.bytes()) == 0);
  }
}

TEST_CASE("cuda attention with key_rows per row matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  struct Case {
    int64_t batch, key_batch, query_len, key_capacity, width, heads;
  };
  const Case cases[] = {
      {6, 2, 1, 40, 64, 4},       // cross-attention step: 3 beams per sentence share its memory
      {24, 6, 1, 300, 512, 8},    // long memory
      {5, 7, 3, 17, 30, 3},       // more key rows than query rows, head size 10 (scalar loads)
      {8, 2, 37, 37, 512, 8},     // tiled kernel
      {3, 5, 9, 21, 60, 2},       // tiled, head size 30
      {2, 1, 130, 130, 256, 2},   // tiled, head size 128, one shared row
      {4, 3, 12, 25, 40, 2},      // tiled, head size 20
  };
  for (DataType dtype : kFloatTypes)
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype), c.batch, c.key_batch, c.query_len, c.key_capacity, c.width, c.heads);
      const std::vector<int32_t> lengths = varied_lengths(c.batch, c.key_capacity);
      std::vector<int32_t> rows = random_ints({c.batch}, 0, static_cast<int32_t>(c.key_batch - 1)).to_int_vector();
      std::vector<bool> read(static_cast<size_t>(c.key_batch * c.key_capacity), false);
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t j = 0; j < lengths[b]; ++j) read[rows[b] * c.key_capacity + j] = true;
      const Operand query = random_operand({c.batch, c.query_len, c.width}, dtype);
      const Operand keys = upload(poisoned_floats(c.key_batch, c.key_capacity, c.width, read), dtype);
      const Operand values = upload(poisoned_floats(c.key_batch, c.key_capacity, c.width, read), dtype);
      const Tensor lengths_cpu = Tensor::from_ints({c.batch}, lengths), lengths_gpu = lengths_cpu.to(Device::CUDA);
      const Tensor rows_cpu = Tensor::from_ints({c.batch}, rows), rows_gpu = rows_cpu.to(Device::CUDA);
      const Tensor expected = ops::attention(query.cpu, keys.cpu, values.cpu, lengths_cpu,
                                             attention_options(c.width, c.heads, &rows_cpu));
      const Tensor got = ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu,
                                        attention_options(c.width, c.heads, &rows_gpu));
      const std::vector<float> expected_values = expected.to_float_vector();
      CHECK(max_relative_error(values_of(got), expected_values) < tolerance(dtype));

      // A row outside keys' batch extent cannot throw on the GPU: that query row gets zeros.
      rows.back() = static_cast<int32_t>(c.key_batch);
      const Tensor bad_rows = Tensor::from_ints({c.batch}, rows).to(Device::CUDA);
      const std::vector<float> masked = values_of(ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu,
                                                                 attention_options(c.width, c.heads, &bad_rows)));
      const size_t row_size = static_cast<size_t>(c.query_len * c.width), last = masked.size() - row_size;
      CHECK(max_relative_error(std::vector<float>(masked.begin(), masked.begin() + last),
                               std::vector<float>(expected_values.begin(), expected_values.begin() + last)) <
            tolerance(dtype));
      CHECK(std::all_of(masked.begin() + last, masked.end(), [](float x) { return x == 0.0f; }));
    }
}

TEST_CASE("cuda attention with key_rows per key matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  struct Case {
    int64_t batch, key_batch, key_capacity, width, heads;
  };
  const Case cases[] = {
      {8, 8, 40, 64, 4},       // beam search step over a reordered self-attention cache
      {12, 12, 300, 512, 8},   // long cache
      {12, 4, 64, 512, 8},     // fewer cache rows than query rows
      {5, 9, 17, 30, 3},       // more cache rows, head size 10 (scalar loads)
      {16, 16, 64, 256, 2},    // head size 128
      {3, 2, 45, 512, 2},      // head size 256
      {4, 4, 1, 8, 1},
  };
  for (DataType dtype : kFloatTypes)
    for (const Case& c : cases) {
      CAPTURE(dtype_name(dtype), c.batch, c.key_batch, c.key_capacity, c.width, c.heads);
      const int64_t capacity = c.key_capacity;
      std::vector<int32_t> lengths = varied_lengths(c.batch, capacity);
      std::vector<int32_t> history =
          random_ints({c.batch, capacity}, 0, static_cast<int32_t>(c.key_batch - 1)).to_int_vector();
      // Beams sharing a history: row 2 repeats row 0 (same length), row 3 repeats row 0's prefix.
      if (c.batch > 2) {
        std::copy(history.begin(), history.begin() + capacity, history.begin() + 2 * capacity);
        lengths[2] = lengths[0];
      }
      if (c.batch > 3) std::copy(history.begin(), history.begin() + capacity, history.begin() + 3 * capacity);
      // Past a length the table holds anything, out-of-range rows included: never read.
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t j = lengths[b]; j < capacity; ++j)
          history[b * capacity + j] = (j % 2 == 0) ? -3 : static_cast<int32_t>(c.key_batch + 5);
      std::vector<bool> read(static_cast<size_t>(c.key_batch * capacity), false);
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t j = 0; j < lengths[b]; ++j) read[history[b * capacity + j] * capacity + j] = true;
      const Operand query = random_operand({c.batch, 1, c.width}, dtype);
      const Operand keys = upload(poisoned_floats(c.key_batch, capacity, c.width, read), dtype);
      const Operand values = upload(poisoned_floats(c.key_batch, capacity, c.width, read), dtype);
      const Tensor lengths_cpu = Tensor::from_ints({c.batch}, lengths), lengths_gpu = lengths_cpu.to(Device::CUDA);
      const Tensor rows_cpu = Tensor::from_ints({c.batch, capacity}, history), rows_gpu = rows_cpu.to(Device::CUDA);
      const Tensor expected = ops::attention(query.cpu, keys.cpu, values.cpu, lengths_cpu,
                                             attention_options(c.width, c.heads, &rows_cpu));
      const Tensor got = ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu,
                                        attention_options(c.width, c.heads, &rows_gpu));
      CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));

      // An out-of-range row on the GPU masks that key: the last row's last key out equals one key less.
      const int64_t last = c.batch - 1;
      history[last * capacity + lengths[last] - 1] = -1;
      const Tensor bad_rows = Tensor::from_ints({c.batch, capacity}, history).to(Device::CUDA);
      lengths[last] -= 1;
      const Tensor shorter = ops::attention(query.cpu, keys.cpu, values.cpu, Tensor::from_ints({c.batch}, lengths),
                                            attention_options(c.width, c.heads, &rows_cpu));
      const Tensor masked = ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu,
                                           attention_options(c.width, c.heads, &bad_rows));
      CHECK(max_relative_error(values_of(masked), shorter.to_float_vector()) < tolerance(dtype));
    }
}

// The warp decode kernel's thresholds: key lengths around its chunks (2 to 32 keys by head size and dtype),
// head sizes 8 to 512 (fp32 512 takes the block decode kernel), 1 to 16 warps per (query, head) unit
// (few units split long key lengths), no key_rows, rank 1 and rank 2, NaN wherever nothing should read.
TEST_CASE("cuda attention decode matches the CPU across key lengths, head sizes and key_rows", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  struct Case {
    int64_t batch, key_capacity, head_dim, heads;
  };
  const Case cases[] = {
      {1, 1, 64, 8},   {1, 31, 64, 8},  {1, 32, 64, 8},  {1, 33, 64, 8},   {1, 300, 64, 8},   // one sentence
      {3, 300, 32, 4}, {3, 65, 128, 4}, {3, 33, 256, 2}, {2, 40, 512, 1},  {4, 17, 8, 2},     // head sizes
      {200, 33, 64, 4}, {200, 32, 32, 4}, {150, 31, 128, 4}, {100, 300, 32, 4}, {120, 64, 64, 4}, // many units
  };
  enum class Rows { None, PerRow, PerKey };
  for (DataType dtype : kFloatTypes)
    for (const Case& c : cases)
      for (Rows mode : {Rows::None, Rows::PerRow, Rows::PerKey}) {
        const int64_t capacity = c.key_capacity, width = c.head_dim * c.heads;
        const int64_t query_len = mode == Rows::PerKey || c.batch > 3 ? 1 : 5;
        const int64_t key_batch = mode == Rows::None ? c.batch : c.batch / 2 + 1;
        const int mode_index = static_cast<int>(mode);
        CAPTURE(dtype_name(dtype), c.batch, capacity, c.head_dim, c.heads, mode_index, query_len);
        // Lengths: the first row full, the second a single key, then 0 and the lengths around chunk edges.
        std::vector<int32_t> lengths = varied_lengths(c.batch, capacity);
        const int32_t edges[] = {0, 31, 32, 33, 15, 16, 17, 7, 8, 9, 3, 4, 5, 2};
        for (int64_t b = 2; b < c.batch && b - 2 < 14; ++b)
          lengths[b] = std::min(edges[b - 2], static_cast<int32_t>(capacity));
        // The GPU's view: key_rows out of range mask keys; the CPU (which throws on them) sees length 0 there.
        std::vector<int32_t> cpu_lengths = lengths;
        std::vector<int32_t> rows;
        if (mode == Rows::PerRow) {
          rows = random_ints({c.batch}, 0, static_cast<int32_t>(key_batch - 1)).to_int_vector();
          if (c.batch > 1) {
            rows.back() = static_cast<int32_t>(key_batch);  // a whole row out of range: zeros
            cpu_lengths.back() = 0;
          }
        } else if (mode == Rows::PerKey) {
          rows = random_ints({c.batch, capacity}, 0, static_cast<int32_t>(key_batch - 1)).to_int_vector();
          for (int64_t b = 0; b < c.batch; ++b)
            for (int64_t j = lengths[b]; j < capacity; ++j)
              rows[b * capacity + j] = (j % 2 == 0) ? -3 : static_cast<int32_t>(key_batch + 5);
          if (c.batch > 3) {  // every key of row 3 masked: zeros
            lengths[3] = static_cast<int32_t>(capacity);
            for (int64_t j = 0; j < capacity; ++j) rows[3 * capacity + j] = j % 2 == 0 ? -1 : int32_t{1 << 30};
            cpu_lengths[3] = 0;
          }
        }
        std::vector<bool> read(static_cast<size_t>(key_batch * capacity), false);
        for (int64_t b = 0; b < c.batch; ++b)
          for (int64_t j = 0; j < lengths[b]; ++j) {
            int64_t row = b;
            if (mode == Rows::PerRow) row = rows[b];
            if (mode == Rows::PerKey) row = rows[b * capacity + j];
            if (row >= 0 && row < key_batch) read[row * capacity + j] = true;
          }
        const Operand query = random_operand({c.batch, query_len, width}, dtype);
        const Operand keys = upload(poisoned_floats(key_batch, capacity, width, read), dtype);
        const Operand values = upload(poisoned_floats(key_batch, capacity, width, read), dtype);
        Tensor rows_cpu, rows_gpu;
        if (mode != Rows::None) {
          const Shape shape = mode == Rows::PerRow ? Shape{c.batch} : Shape{c.batch, capacity};
          std::vector<int32_t> cpu_rows = rows;  // in range for the CPU; masked entries are past its lengths
          for (int32_t& row : cpu_rows) row = std::clamp<int32_t>(row, 0, static_cast<int32_t>(key_batch - 1));
          rows_cpu = Tensor::from_ints(shape, cpu_rows);
          rows_gpu = Tensor::from_ints(shape, rows).to(Device::CUDA);
        }
        const Tensor expected =
            ops::attention(query.cpu, keys.cpu, values.cpu, Tensor::from_ints({c.batch}, cpu_lengths),
                           attention_options(width, c.heads, mode == Rows::None ? nullptr : &rows_cpu));
        const Tensor got =
            ops::attention(query.gpu, keys.gpu, values.gpu, Tensor::from_ints({c.batch}, lengths).to(Device::CUDA),
                           attention_options(width, c.heads, mode == Rows::None ? nullptr : &rows_gpu));
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
      }
}

// The encoder memory pool: each query row's keys are a run of positions from batch row key_rows[b] on
// (blocks of 1 position as the model keeps it, and of 4), read by the warp decode, block decode (fp32 head
// size 512) and tiled kernels; NaN wherever no run reaches. A run past the pool's end is cut there.
TEST_CASE("cuda attention with a key span matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  struct Case {
    int64_t batch, query_len, block, head_dim, heads, span;
  };
  const Case cases[] = {
      {24, 1, 1, 64, 8, 64},    // decoder step over pooled memory
      {5, 1, 4, 64, 8, 37},     // blocks of 4 positions
      {3, 1, 1, 512, 1, 40},    // head size 512: block decode in fp32
      {4, 12, 1, 32, 4, 50},    // tiled kernel
      {40, 1, 1, 64, 2, 300},   // long runs, few heads
  };
  for (DataType dtype : kFloatTypes)
    for (const Case& c : cases) {
      const int64_t width = c.head_dim * c.heads;
      CAPTURE(dtype_name(dtype), c.batch, c.query_len, c.block, c.head_dim, c.heads, c.span);
      // Runs laid out one after another with a gap of one block, rows in a shuffled order.
      const std::vector<int32_t> lengths = varied_lengths(c.batch, c.span);
      std::vector<int32_t> starts(static_cast<size_t>(c.batch));
      int64_t next_row = 0;
      for (int64_t i = 0; i < c.batch; ++i) {
        const int64_t b = (i * 7) % c.batch;  // a permutation: no batch here is a multiple of 7
        starts[b] = static_cast<int32_t>(next_row);
        next_row += (lengths[b] + c.block - 1) / c.block + 1;
      }
      const int64_t pool_rows = next_row;
      std::vector<bool> read(static_cast<size_t>(pool_rows * c.block), false);
      for (int64_t b = 0; b < c.batch; ++b)
        for (int64_t j = 0; j < lengths[b]; ++j) read[starts[b] * c.block + j] = true;
      const Operand query = random_operand({c.batch, c.query_len, width}, dtype);
      const Operand keys = upload(poisoned_floats(pool_rows, c.block, width, read), dtype);
      const Operand values = upload(poisoned_floats(pool_rows, c.block, width, read), dtype);
      const Tensor rows_cpu = Tensor::from_ints({c.batch}, starts), rows_gpu = rows_cpu.to(Device::CUDA);
      ops::AttentionOptions cpu_options = attention_options(width, c.heads, &rows_cpu);
      ops::AttentionOptions gpu_options = attention_options(width, c.heads, &rows_gpu);
      cpu_options.key_span = gpu_options.key_span = c.span;
      const Tensor lengths_cpu = Tensor::from_ints({c.batch}, lengths);
      const Tensor expected = ops::attention(query.cpu, keys.cpu, values.cpu, lengths_cpu, cpu_options);
      const Tensor got =
          ops::attention(query.gpu, keys.gpu, values.gpu, lengths_cpu.to(Device::CUDA), gpu_options);
      CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));

      // The last row's run moved to the pool's last row: the GPU reads up to the pool's end (the CPU throws
      // there), which equals that row's length cut to one block.
      std::vector<int32_t> moved = starts, cut = lengths;
      moved.back() = static_cast<int32_t>(pool_rows - 1);
      cut.back() = std::min<int32_t>(lengths.back(), static_cast<int32_t>(c.block));
      std::vector<bool> moved_read = read;
      for (int64_t j = 0; j < c.block; ++j) moved_read[(pool_rows - 1) * c.block + j] = true;
      const Operand moved_keys = upload(poisoned_floats(pool_rows, c.block, width, moved_read), dtype);
      const Operand moved_values = upload(poisoned_floats(pool_rows, c.block, width, moved_read), dtype);
      const Tensor moved_cpu = Tensor::from_ints({c.batch}, moved), moved_gpu = moved_cpu.to(Device::CUDA);
      cpu_options.key_rows = &moved_cpu;
      gpu_options.key_rows = &moved_gpu;
      const Tensor expected_cut =
          ops::attention(query.cpu, moved_keys.cpu, moved_values.cpu, Tensor::from_ints({c.batch}, cut), cpu_options);
      const Tensor got_cut =
          ops::attention(query.gpu, moved_keys.gpu, moved_values.gpu, lengths_cpu.to(Device::CUDA), gpu_options);
      CHECK(max_relative_error(values_of(got_cut), expected_cut.to_float_vector()) < tolerance(dtype));
    }
}

TEST_CASE("cuda append_self_attention_step matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][3] = {{3, 4, 5}, {40, 512, 64}, {7, 9, 3}, {1, 1, 1}, {33, 20, 17}};  // slots, d, capacity
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes) {
      const int64_t slots = shape[0], width = shape[1], capacity = shape[2];
      CAPTURE(dtype_name(dtype), slots, width, capacity);
      const Operand qkv = random_operand({slots, 3 * width}, dtype);
      const Operand bias = random_operand({3 * width}, dtype);
      const Operand key_cache = random_operand({slots, capacity, width}, dtype);
      const Operand value_cache = random_operand({slots, capacity, width}, dtype);
      const Tensor history = random_ints({slots, capacity}, -9, -1);
      std::vector<int32_t> position_values =
          random_ints({slots}, 0, static_cast<int32_t>(capacity - 1)).to_int_vector();
      position_values[0] = static_cast<int32_t>(capacity - 1);
      const Tensor positions = Tensor::from_ints({slots}, position_values);

      Tensor expected_keys = key_cache.cpu.to(Device::CPU), expected_values = value_cache.cpu.to(Device::CPU);
      Tensor expected_history = history.to(Device::CPU);
      const Tensor expected_query = ops::append_self_attention_step(qkv.cpu, bias.cpu, positions, expected_keys,
                                                                    expected_values, expected_history);
      Tensor keys = key_cache.gpu.to(Device::CUDA), values = value_cache.gpu.to(Device::CUDA);
      Tensor got_history = history.to(Device::CUDA);
      const Tensor query = ops::append_self_attention_step(qkv.gpu, bias.gpu, positions.to(Device::CUDA), keys, values,
                                                           got_history);
      REQUIRE(query.shape() == Shape{slots, width});
      CHECK(max_relative_error(values_of(query), expected_query.to_float_vector()) < tolerance(dtype));
      CHECK(max_relative_error(values_of(keys), expected_keys.to_float_vector()) < tolerance(dtype));
      CHECK(max_relative_error(values_of(values), expected_values.to_float_vector()) < tolerance(dtype));
      CHECK(ints_of(got_history) == expected_history.to_int_vector());

      // A slot outside the cache is skipped on the GPU (the CPU throws): its query row is still written.
      position_values.back() = static_cast<int32_t>(capacity);
      const Tensor bad_positions = Tensor::from_ints({slots}, position_values).to(Device::CUDA);
      Tensor untouched_keys = key_cache.gpu.to(Device::CUDA), untouched_values = value_cache.gpu.to(Device::CUDA);
      Tensor untouched_history = history.to(Device::CUDA);
      const Tensor skipped_query = ops::append_self_attention_step(qkv.gpu, bias.gpu, bad_positions, untouched_keys,
                                                                   untouched_values, untouched_history);
      CHECK(max_relative_error(values_of(skipped_query), expected_query.to_float_vector()) < tolerance(dtype));
      const std::vector<float> keys_after = values_of(untouched_keys), keys_before = key_cache.cpu.to_float_vector();
      const std::vector<float> expected_after = expected_keys.to_float_vector();
      const std::vector<int32_t> history_after = ints_of(untouched_history), history_before = history.to_int_vector();
      const std::vector<int32_t> history_expected = expected_history.to_int_vector();
      for (int64_t s = 0; s < slots; ++s) {
        const bool skipped = s == slots - 1;
        for (int64_t j = 0; j < capacity; ++j) {
          CHECK(history_after[s * capacity + j] == (skipped ? history_before : history_expected)[s * capacity + j]);
          const size_t row = static_cast<size_t>((s * capacity + j) * width);
          const std::vector<float>& want = skipped ? keys_before : expected_after;
          CHECK(max_relative_error(std::vector<float>(keys_after.begin() + row, keys_after.begin() + row + width),
                                   std::vector<float>(want.begin() + row, want.begin() + row + width)) <
                tolerance(dtype));
        }
      }
    }
}

TEST_CASE("cuda copy and copy_row_prefixes match the CPU for every dtype", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const auto random_of = [](const Shape& shape, DataType dtype) {
    return dtype == DataType::I32 ? random_ints(shape, -1000, 1000) : random_floats(shape).to(dtype);
  };
  const auto same_bytes = [](const Tensor& gpu, const Tensor& cpu) {
    cuda::synchronize();
    const Tensor back = gpu.to(Device::CPU);
    return back.bytes() == cpu.bytes() && std::memcmp(back.raw(), cpu.raw(), cpu.bytes()) == 0;
  };
  // src, dst shapes: trailing extents agree; the second axis may be longer or shorter either way.
  const Shape pairs[][2] = {{{3, 4}, {3, 7}},           {{8, 37, 64}, {8, 100, 64}}, {{5, 3, 3}, {5, 3, 3}},
                            {{2, 1, 5}, {2, 9, 5}},     {{7, 1, 1}, {7, 2, 1}},      {{64, 33}, {64, 128}},
                            {{4, 2, 3, 5}, {4, 6, 3, 5}}, {{6, 16, 8}, {9, 16, 8}},  {{5, 12}, {3, 7}}};
  for (DataType dtype : {DataType::F32, DataType::F16, DataType::I32})
    for (const auto& pair : pairs) {
      CAPTURE(dtype_name(dtype), shape_string(pair[0]), shape_string(pair[1]));
      const Tensor src = random_of(pair[0], dtype), dst = random_of(pair[1], dtype);
      const int64_t rows = std::min(pair[0][0], pair[1][0]);
      const int32_t longest = static_cast<int32_t>(std::min(pair[0][1], pair[1][1]));
      const Tensor lengths = random_ints({rows}, 0, longest);
      const Tensor index = random_ints({rows}, 0, static_cast<int32_t>(pair[0][0] - 1));
      for (const Tensor* by : {static_cast<const Tensor*>(nullptr), &index}) {
        CAPTURE(by != nullptr);
        Tensor expected = dst.to(Device::CPU), got = dst.to(Device::CUDA);
        ops::copy_row_prefixes(src, by, lengths, expected);
        const Tensor device_index = index.to(Device::CUDA);
        ops::copy_row_prefixes(src.to(Device::CUDA), by != nullptr ? &device_index : nullptr,
                               lengths.to(Device::CUDA), got);
        CHECK(same_bytes(got, expected));
      }

      Tensor copied = random_of(pair[0], dtype).to(Device::CUDA);
      ops::copy(src.to(Device::CUDA), copied);
      CHECK(same_bytes(copied, src));
    }
}

TEST_CASE("cuda graph replays the step append, attention through the history and the copies", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t slots = 6, width = 64, heads = 4, capacity = 12, longer = 20;
  for (DataType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    // Slot s appends at position p_s and attends over p_s + 1 keys whose rows come from a shared history.
    std::vector<int32_t> position_values = random_ints({slots}, 0, static_cast<int32_t>(capacity - 1)).to_int_vector();
    position_values[0] = static_cast<int32_t>(capacity - 1);
    position_values[1] = 0;
    std::vector<int32_t> length_values;
    for (int32_t position : position_values) length_values.push_back(position + 1);
    std::vector<int32_t> history_values =
        random_ints({slots, capacity}, 0, static_cast<int32_t>(slots - 1)).to_int_vector();
    std::copy(history_values.begin(), history_values.begin() + capacity, history_values.begin() + 2 * capacity);
    const Tensor initial_history = Tensor::from_ints({slots, capacity}, history_values);
    const Operand bias = random_operand({3 * width}, dtype);
    const Operand key_cache = random_operand({slots, capacity, width}, dtype);
    const Operand value_cache = random_operand({slots, capacity, width}, dtype);

    // Device state the graph reads and writes, allocated before the capture.
    Tensor qkv = Tensor({slots, 3 * width}, dtype, Device::CUDA);
    Tensor keys = key_cache.gpu.to(Device::CUDA), values = value_cache.gpu.to(Device::CUDA);
    Tensor history = initial_history.to(Device::CUDA), history_copy = initial_history.to(Device::CUDA);
    Tensor grown_keys = random_floats({slots, longer, width}).to(dtype).to(Device::CUDA);
    Tensor grown_history = random_ints({slots, longer}, 0, 3).to(Device::CUDA);
    Tensor positions_gpu({slots}, DataType::I32, Device::CUDA), lengths_gpu({slots}, DataType::I32, Device::CUDA);
    const Tensor whole_rows =
        Tensor::from_ints({slots}, std::vector<int32_t>(slots, static_cast<int32_t>(capacity))).to(Device::CUDA);
    const ops::AttentionOptions options = attention_options(width, heads, &history);
    Tensor context;
    ops::DeviceGraph graph(Device::CUDA);
    graph.capture([&] {
      const Tensor query = ops::append_self_attention_step(qkv, bias.gpu, positions_gpu, keys, values, history);
      context = ops::attention(query.reshape({slots, 1, width}), keys, values, lengths_gpu, options);
      ops::copy_row_prefixes(keys, nullptr, whole_rows, grown_keys);
      ops::copy_row_prefixes(history, nullptr, lengths_gpu, grown_history);  // lengths read at each replay
      ops::copy(history, history_copy);
    });

    // Two replays on fresh inputs, the second one position further (the last slot stays at the end).
    Tensor cpu_keys = key_cache.cpu.to(Device::CPU), cpu_values = value_cache.cpu.to(Device::CPU);
    Tensor cpu_history = initial_history.to(Device::CPU);
    for (int replay = 0; replay < 2; ++replay) {
      CAPTURE(replay);
      if (replay > 0)
        for (size_t s = 0; s < position_values.size(); ++s) {
          position_values[s] = std::min(position_values[s] + 1, static_cast<int32_t>(capacity - 1));
          length_values[s] = position_values[s] + 1;
        }
      const Tensor positions = Tensor::from_ints({slots}, position_values);
      const Tensor lengths = Tensor::from_ints({slots}, length_values);
      positions_gpu.copy_from(positions);
      lengths_gpu.copy_from(lengths);
      const Operand input = random_operand({slots, 3 * width}, dtype);
      qkv.copy_from(input.gpu);
      graph.replay();
      const Tensor query = ops::append_self_attention_step(input.cpu, bias.cpu, positions, cpu_keys, cpu_values,
                                                           cpu_history);
      const ops::AttentionOptions cpu_options = attention_options(width, heads, &cpu_history);
      const Tensor expected =
          ops::attention(query.reshape({slots, 1, width}), cpu_keys, cpu_values, lengths, cpu_options);
      CHECK(max_relative_error(values_of(context), expected.to_float_vector()) < tolerance(dtype));
      CHECK(max_relative_error(values_of(keys), cpu_keys.to_float_vector()) < tolerance(dtype));
      CHECK(ints_of(history) == cpu_history.to_int_vector());
      CHECK(ints_of(history_copy) == cpu_history.to_int_vector());
      const std::vector<float> grown = values_of(grown_keys), cache = cpu_keys.to_float_vector();
      const std::vector<int32_t> grown_rows = ints_of(grown_history), rows = cpu_history.to_int_vector();
      double worst = 0.0;
      for (int64_t s = 0; s < slots; ++s)
        for (int64_t j = 0; j < capacity; ++j) {
          if (j < length_values[s]) CHECK(grown_rows[s * longer + j] == rows[s * capacity + j]);
          for (int64_t c = 0; c < width; ++c)
            worst = std::max(worst, std::abs(static_cast<double>(grown[(s * longer + j) * width + c]) -
                                             cache[(s * capacity + j) * width + c]));
        }
      CHECK(worst < tolerance(dtype));
    }
  }
}

TEST_CASE("cuda pool ops match the CPU: append and attention through blocks, scatter_prefix", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  for (DataType dtype : kFloatTypes) {
    CAPTURE(dtype_name(dtype));
    // Caches of 24 blocks of 4 positions; history rows of 17 positions.
    const int64_t slots = 9, width = 64, capacity = 17, pool_rows = 24, block = 4;
    const Operand qkv = random_operand({slots, 3 * width}, dtype);
    const Operand bias = random_operand({3 * width}, dtype);
    const Operand key_cache = random_operand({pool_rows, block, width}, dtype);
    const Operand value_cache = random_operand({pool_rows, block, width}, dtype);
    const Tensor history = random_ints({slots, capacity}, -9, -1);
    const Tensor positions = random_ints({slots}, 0, static_cast<int32_t>(capacity - 1));
    // Distinct pool rows, two padding slots (-1).
    const Tensor cache_rows = Tensor::from_ints({slots}, {23, 4, -1, 0, 11, 7, -1, 19, 2});
    Tensor expected_keys = key_cache.cpu.to(Device::CPU), expected_values = value_cache.cpu.to(Device::CPU);
    Tensor expected_history = history.to(Device::CPU);
    const Tensor expected_query = ops::append_self_attention_step(qkv.cpu, bias.cpu, positions, expected_keys,
                                                                  expected_values, expected_history, &cache_rows);
    Tensor keys = key_cache.gpu.to(Device::CUDA), values = value_cache.gpu.to(Device::CUDA);
    Tensor got_history = history.to(Device::CUDA);
    const Tensor rows_gpu = cache_rows.to(Device::CUDA);
    const Tensor query = ops::append_self_attention_step(qkv.gpu, bias.gpu, positions.to(Device::CUDA), keys, values,
                                                         got_history, &rows_gpu);
    CHECK(max_relative_error(values_of(query), expected_query.to_float_vector()) < tolerance(dtype));
    CHECK(max_relative_error(values_of(keys), expected_keys.to_float_vector()) < tolerance(dtype));
    CHECK(max_relative_error(values_of(values), expected_values.to_float_vector()) < tolerance(dtype));
    CHECK(ints_of(got_history) == expected_history.to_int_vector());

    // Attention through a block table [slots, 17]: random blocks, lengths up to the table's width.
    const Tensor table = random_ints({slots, capacity}, 0, static_cast<int32_t>(pool_rows - 1));
    const Tensor lengths = random_ints({slots}, 0, static_cast<int32_t>(capacity));
    const Operand step_query = random_operand({slots, 1, width}, dtype);
    ops::AttentionOptions paged = attention_options(width, 4, &table);
    const Tensor expected_context = ops::attention(step_query.cpu, key_cache.cpu, value_cache.cpu, lengths, paged);
    const Tensor table_gpu = table.to(Device::CUDA);
    paged.key_rows = &table_gpu;
    const Tensor context =
        ops::attention(step_query.gpu, key_cache.gpu, value_cache.gpu, lengths.to(Device::CUDA), paged);
    CHECK(max_relative_error(values_of(context), expected_context.to_float_vector()) < tolerance(dtype));

    // A wave of 5 sentences of 13 positions into a pool of 16 rows of 32.
    const Operand memory = random_operand({5, 13, width}, dtype);
    const Operand pool = random_operand({16, 32, width}, dtype);
    const Tensor targets = Tensor::from_ints({5}, {15, 3, 0, 8, 9});
    Tensor expected_pool = pool.cpu.to(Device::CPU), got_pool = pool.gpu.to(Device::CUDA);
    ops::scatter_prefix(memory.cpu, targets, expected_pool);
    ops::scatter_prefix(memory.gpu, targets.to(Device::CUDA), got_pool);
    CHECK(max_relative_error(values_of(got_pool), expected_pool.to_float_vector()) < tolerance(dtype));
  }
}

#else  // no CUDA in this build: the CUDA cases above are not compiled, and CUDA is refused in one line

#include <string>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"
#include "ops/runtime.h"
#include "support/errors.h"

TEST_CASE("a build without CUDA refuses the CUDA device and CUDA tensors with a clear error", "[ops]") {
  using namespace seqtrans;
  using seqtrans::testing::error_of;
  CHECK(error_of([] { ops::initialize_device(Device::CUDA, 0, 0); }).find("no CUDA support") != std::string::npos);
  // Borrowed host memory labelled CUDA passes the front end's checks and reaches the device switch.
  std::vector<float> x_values(6, 1.0f), bias_values(3, 0.5f);
  Tensor x = Tensor::borrow(x_values.data(), {2, 3}, DataType::F32, Device::CUDA);
  const Tensor bias = Tensor::borrow(bias_values.data(), {3}, DataType::F32, Device::CUDA);
  const std::string message = error_of([&] { ops::add_bias(x, bias); });
  CHECK(message.find("add_bias") != std::string::npos);
  CHECK(message.find("no CUDA support") != std::string::npos);
  CHECK(x_values == std::vector<float>(6, 1.0f));
}

#endif

// Every op on the CUDA device against the CPU reference, on fresh random inputs, in fp32 and fp16.
// fp16 cases give the CPU the same fp16-rounded inputs, so only the GPU's fp16 storage differs.
#include "catch.h"
#include "core/device.h"

#ifdef SEQTRANS_WITH_CUDA

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/cpu_ops.h"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/context.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::max_relative_error;
using seqtrans::testing::random_floats;
using seqtrans::testing::random_ints;


namespace {

// One random input as the CPU sees it (fp32, already rounded to fp16 when testing fp16) and on the GPU.
struct Operand {
  Tensor cpu;
  Tensor gpu;
};

Operand upload(const Tensor& host, DataType dtype) {
  const Tensor rounded = dtype == DataType::F16 ? host.to(DataType::F16).to(DataType::F32) : host;
  return {rounded, host.to(dtype).to(Device::CUDA)};
}

Operand random_operand(const Shape& shape, DataType dtype, float low = -1.0f, float high = 1.0f) {
  return upload(random_floats(shape, low, high), dtype);
}

double tolerance(DataType dtype) { return dtype == DataType::F16 ? 1e-2 : 1e-5; }

std::vector<float> values_of(const Tensor& x) {
  cuda::synchronize();
  return x.to_float_vector();
}

const DataType kFloatTypes[] = {DataType::F32, DataType::F16};

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
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
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
        const Tensor positions = random_ints({count}, 0, static_cast<int32_t>(max_positions - 1));
        ops::EmbeddingOptions cpu_options, gpu_options;
        cpu_options.scale = gpu_options.scale = 22.627417f;
        cpu_options.positions = gpu_options.positions = encoding;
        cpu_options.position_table = &position_table.cpu;
        gpu_options.position_table = &position_table.gpu;
        const Tensor expected = ops::embed(ids, positions, table.cpu, cpu_options);
        const Tensor got = ops::embed(ids.to(Device::CUDA), positions.to(Device::CUDA), table.gpu, gpu_options);
        // Scaled embeddings reach ~20: compare relative to the magnitude.
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
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

TEST_CASE("cuda kv_cache_write matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][3] = {{2, 3, 4}, {320, 256, 512}, {7, 5, 9}};  // slots, capacity, width
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes) {
      const int64_t slots = shape[0], capacity = shape[1], width = shape[2];
      CAPTURE(dtype_name(dtype), slots, capacity, width);
      const Operand cache = random_operand({slots, capacity, width}, dtype);
      const Operand values = random_operand({slots, width}, dtype);
      const Tensor positions = random_ints({slots}, 0, static_cast<int32_t>(capacity - 1));
      Tensor expected = cache.cpu.to(Device::CPU);
      Tensor got = cache.gpu.to(Device::CUDA);
      ops::kv_cache_write(expected, values.cpu, positions);
      ops::kv_cache_write(got, values.gpu, positions.to(Device::CUDA));
      CHECK(max_relative_error(values_of(got), expected.to_float_vector()) == 0.0);
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

#else  // no CUDA in this build

TEST_CASE("cuda ops are not compiled in this build", "[gpu]") {
  WARN("this build of seqtrans has no CUDA backend: GPU op tests skipped");
}

#endif

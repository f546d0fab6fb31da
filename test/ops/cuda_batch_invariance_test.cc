// Batch-invariant mode (core/batch_invariance.h) on the ops whose kernels or splits follow the row count:
// a row's values must be bit for bit the same whether it is computed alone or among up to 1,000 rows.
// Without the mode the small-rows products differ from cuBLAS's, which the first case shows, so that the
// checks here are known to be able to fail.
#ifdef SEQTRANS_WITH_CUDA

#include <cstring>
#include <vector>

#include "catch.h"
#include "core/batch_invariance.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/gpu_operands.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

const int64_t kRowCounts[] = {1, 2, 3, 5, 8, 9, 16, 33, 64, 100, 256, 512, 1000};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A device result's values as fp32 on the host.
std::vector<float> host_floats(const Tensor& x) { return values_of(x.to(Device::CPU).to(DataType::F32)); }

// Rows [0, count) of a [rows, n] host vector.
std::vector<float> first_rows(const std::vector<float>& all, int64_t count, int64_t n) {
  return std::vector<float>(all.begin(), all.begin() + count * n);
}

// How many of kRowCounts give a product whose rows differ from the same rows of the 1,000-row product.
int row_counts_differing(const Tensor& a, const Tensor& b, const ops::MatmulOptions& options) {
  const int64_t n = options.transpose_b ? b.dim(0) : b.dim(1);
  const std::vector<float> all = host_floats(ops::matmul(a, b, options));
  int differing = 0;
  for (const int64_t rows : kRowCounts) {
    const std::vector<float> part = host_floats(ops::matmul(a.slice_rows(0, rows), b, options));
    differing += !same_bits(part, first_rows(all, rows, n));
  }
  return differing;
}

}  // namespace

TEST_CASE("without batch-invariant mode, fp16 products of few rows sum in another order than of many", "[gpu][ops]") {
  REQUIRE_GPU_OR_SKIP();
  const Operand a = random_operand({1000, 512}, DataType::F16), b = random_operand({2048, 512}, DataType::F16);
  CHECK(row_counts_differing(a.gpu, b.gpu, {}) > 0);
}

TEST_CASE("batch-invariant products give each row the same bits at any row count", "[gpu][ops]") {
  REQUIRE_GPU_OR_SKIP();
  const BatchInvariantScope invariant(true);
  struct Shape3 {
    int64_t n, k;
  };
  // The decoder's projections, the FFN's two products and a wide output layer.
  for (const DataType dtype : kFloatTypes)
    for (const Shape3 shape : {Shape3{512, 512}, Shape3{1536, 512}, Shape3{2048, 512}, Shape3{512, 2048},
                               Shape3{32000, 512}}) {
      const Operand a = random_operand({1000, shape.k}, dtype), b = random_operand({shape.n, shape.k}, dtype);
      const Operand bias = random_operand({shape.n}, dtype);
      ops::MatmulOptions plain, with_bias, relu, logits;
      with_bias.bias = &bias.gpu;
      relu.bias = &bias.gpu;
      relu.activation = Activation::Relu;
      logits.fp32_output = true;
      CAPTURE(dtype_name(dtype), shape.n, shape.k);
      CHECK(row_counts_differing(a.gpu, b.gpu, plain) == 0);
      CHECK(row_counts_differing(a.gpu, b.gpu, with_bias) == 0);
      CHECK(row_counts_differing(a.gpu, b.gpu, relu) == 0);
      if (dtype == DataType::F16) CHECK(row_counts_differing(a.gpu, b.gpu, logits) == 0);
    }
}

TEST_CASE("batch-invariant products stay as accurate as the default ones", "[gpu][ops]") {
  REQUIRE_GPU_OR_SKIP();
  const Operand a = random_operand({64, 512}, DataType::F16), b = random_operand({2048, 512}, DataType::F16);
  const std::vector<float> expected = ops::matmul(a.cpu, b.cpu).to_float_vector();
  const BatchInvariantScope invariant(true);
  CHECK(max_relative_error(host_floats(ops::matmul(a.gpu, b.gpu)), expected) < tolerance(DataType::F16));
}

namespace {

// Row counts at which decoder attention (one query a row, 8 heads over up to 200 cached keys) gives rows that
// differ from the same rows of a 64-row call. Few rows spread a row's keys over several warps by default.
int attention_row_counts_differing() {
  const int64_t batch = 64, keys_per_row = 200, width = 512;
  ops::AttentionOptions options;
  options.num_heads = 8;
  options.scale = 0.125f;
  const Operand query = random_operand({batch, 1, width}, DataType::F16);
  const Operand keys = random_operand({batch, keys_per_row, width}, DataType::F16);
  const Operand values = random_operand({batch, keys_per_row, width}, DataType::F16);
  std::vector<int32_t> lengths(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) lengths[static_cast<size_t>(b)] = static_cast<int32_t>(20 + (b * 37) % 180);
  const Tensor lengths_gpu = Tensor::from_ints({batch}, lengths).to(Device::CUDA);
  const std::vector<float> all = host_floats(ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu, options));
  int differing = 0;
  for (const int64_t rows : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{16}}) {
    const std::vector<float> part =
        host_floats(ops::attention(query.gpu.slice_rows(0, rows), keys.gpu.slice_rows(0, rows),
                                   values.gpu.slice_rows(0, rows), lengths_gpu.slice_rows(0, rows), options));
    differing += !same_bits(part, first_rows(all, rows, width));
  }
  return differing;
}

// Row counts at which the fused output layer's scores or ids differ from the same rows of a 512-row call,
// over k = 1, 4 and 8. Few rows split their normalizer over more blocks by default.
int output_layer_row_counts_differing() {
  const int64_t vocab = 58101;  // odd-sized, as real vocabularies: rows start off the vector boundary
  const Tensor logits = random_floats({512, vocab}, -8.0f, 8.0f).to(Device::CUDA);
  int differing = 0;
  for (const int k : {1, 4, 8}) {
    ops::TopkOptions options;
    options.k = k;
    Tensor all_values, all_ids;
    ops::log_softmax_topk(logits, options, all_values, all_ids);
    const std::vector<float> all = values_of(all_values);
    const std::vector<int32_t> all_ids_host = ints_of(all_ids);
    for (const int64_t rows : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{100}}) {
      Tensor values, ids;
      ops::log_softmax_topk(logits.slice_rows(0, rows), options, values, ids);
      differing += !same_bits(values_of(values), first_rows(all, rows, k)) ||
                   ints_of(ids) != std::vector<int32_t>(all_ids_host.begin(), all_ids_host.begin() + rows * k);
    }
  }
  return differing;
}

}  // namespace

TEST_CASE("without batch-invariant mode, decoder attention and the output layer split few rows differently",
          "[gpu][ops]") {
  REQUIRE_GPU_OR_SKIP();
  CHECK(attention_row_counts_differing() > 0);
  CHECK(output_layer_row_counts_differing() > 0);
}

TEST_CASE("batch-invariant decoder attention and output layers give each row the same bits at any row count",
          "[gpu][ops]") {
  REQUIRE_GPU_OR_SKIP();
  const BatchInvariantScope invariant(true);
  CHECK(attention_row_counts_differing() == 0);
  CHECK(output_layer_row_counts_differing() == 0);
}

#endif  // SEQTRANS_WITH_CUDA

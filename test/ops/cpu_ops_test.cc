// Each CPU op against a naive formula, in double, on fresh random inputs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "catch.h"
#include "core/error.h"
#include "cpu/cpu_ops.h"
#include "cpu/vector_math.h"
#include "ops/ops.h"
#include "ops/runtime.h"
#include "support/errors.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::error_of;
using seqtrans::testing::max_relative_error;
using seqtrans::testing::random_floats;
using seqtrans::testing::random_ints;
using seqtrans::testing::same_bits;

namespace {

constexpr double kTolerance = 1e-5;

std::vector<float> naive_layer_norm(std::vector<double> row, const std::vector<float>& gamma,
                                    const std::vector<float>& beta, double epsilon) {
  double mean = 0, variance = 0;
  for (double v : row) mean += v;
  mean /= row.size();
  for (double v : row) variance += (v - mean) * (v - mean);
  variance /= row.size();
  std::vector<float> out;
  for (size_t i = 0; i < row.size(); ++i)
    out.push_back(static_cast<float>((row[i] - mean) / std::sqrt(variance + epsilon) * gamma[i] + beta[i]));
  return out;
}

// A view of `host`'s memory labelled CUDA: it stands for a device operand without a GPU. Front ends must
// refuse it before any kernel reads it.
Tensor labelled_cuda(const Tensor& host) { return Tensor::borrow(host.raw(), host.shape(), host.dtype(), Device::CUDA); }

}  // namespace

TEST_CASE("matmul matches the triple loop, with and without transposed b", "[ops]") {
  const int64_t m = 7, k = 33, n = 19;
  for (bool transpose_b : {true, false}) {
    const Tensor a = random_floats({m, k});
    const Tensor b = transpose_b ? random_floats({n, k}) : random_floats({k, n});
    const Tensor c = ops::matmul(a, b, {transpose_b, 0.5f});
    REQUIRE(c.shape() == Shape{m, n});
    const auto av = a.to_float_vector(), bv = b.to_float_vector();
    std::vector<float> expected;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += double(av[i * k + p]) * (transpose_b ? bv[j * k + p] : bv[p * n + j]);
        expected.push_back(static_cast<float>(0.5 * sum));
      }
    CHECK(max_relative_error(c.to_float_vector(), expected) < kTolerance);
  }
}

TEST_CASE("matmul rejects mismatched inner dimensions", "[ops]") {
  CHECK_THROWS_AS(ops::matmul(random_floats({2, 3}), random_floats({4, 5})), Error);
}

TEST_CASE("matmul refuses an extent past BLAS's int instead of wrapping it", "[ops]") {
  // Views of a few floats that claim 2^31 columns: the check must come before BLAS reads anything.
  std::vector<float> few(16, 0.0f);
  const int64_t wide = int64_t{1} << 31;
  const Tensor a = Tensor::borrow(few.data(), {1, wide}, DataType::F32, Device::CPU);
  const Tensor b = Tensor::borrow(few.data(), {1, wide}, DataType::F32, Device::CPU);
  CHECK(error_of([&] { ops::matmul(a, b); }).find("exceeds the BLAS limit") != std::string::npos);
}

TEST_CASE("the BLAS thread count is settable (OpenBLAS, as the setup scripts install) and at least 1", "[ops]") {
  CHECK(ops::cpu_threads_settable());
  CHECK_THROWS_AS(ops::set_cpu_threads(0), Error);
  ops::set_cpu_threads(1);
  const Tensor product = ops::matmul(random_floats({4, 8}), random_floats({3, 8}));
  CHECK(product.shape() == Shape{4, 3});
}

TEST_CASE("add_bias and bias_activation match their formulas", "[ops]") {
  const Tensor x = random_floats({5, 12}, -4.0f, 4.0f);
  const Tensor bias = random_floats({12});
  const auto xv = x.to_float_vector(), bv = bias.to_float_vector();
  const auto reference = [](double v, Activation activation) {
    switch (activation) {
      case Activation::Relu: return std::max(v, 0.0);
      case Activation::Gelu: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      case Activation::GeluTanh: return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      case Activation::Swish: return v / (1 + std::exp(-v));
    }
    return v;
  };
  for (Activation activation : {Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Swish}) {
    Tensor y = x.to(Device::CPU);
    ops::bias_activation(y, bias, activation);
    std::vector<float> expected;
    for (size_t i = 0; i < xv.size(); ++i) expected.push_back(static_cast<float>(reference(xv[i] + bv[i % 12], activation)));
    CHECK(max_relative_error(y.to_float_vector(), expected) < kTolerance);
  }
  Tensor y = x.to(Device::CPU);
  ops::add_bias(y, bias);
  std::vector<float> expected;
  for (size_t i = 0; i < xv.size(); ++i) expected.push_back(xv[i] + bv[i % 12]);
  CHECK(max_relative_error(y.to_float_vector(), expected) < kTolerance);
}

TEST_CASE("layer norms match the formula", "[ops]") {
  const int64_t rows = 6, width = 40;
  const Tensor x = random_floats({rows, width}, -3.0f, 3.0f), residual = random_floats({rows, width});
  const Tensor bias = random_floats({width}), gamma = random_floats({width}, 0.5f, 1.5f), beta = random_floats({width});
  const float epsilon = 1e-5f;
  const Tensor fused = ops::add_bias_residual_layer_norm(x, bias, residual, {gamma, beta, epsilon});
  const Tensor plain = ops::layer_norm(x, {gamma, beta, epsilon});
  const auto xv = x.to_float_vector(), rv = residual.to_float_vector(), bv = bias.to_float_vector();
  const auto gv = gamma.to_float_vector(), betav = beta.to_float_vector();
  std::vector<float> expected_fused, expected_plain;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> summed, raw;
    for (int64_t c = 0; c < width; ++c) {
      summed.push_back(double(xv[r * width + c]) + bv[c] + rv[r * width + c]);
      raw.push_back(xv[r * width + c]);
    }
    for (float v : naive_layer_norm(summed, gv, betav, epsilon)) expected_fused.push_back(v);
    for (float v : naive_layer_norm(raw, gv, betav, epsilon)) expected_plain.push_back(v);
  }
  CHECK(max_relative_error(fused.to_float_vector(), expected_fused) < kTolerance);
  CHECK(max_relative_error(plain.to_float_vector(), expected_plain) < kTolerance);
}

TEST_CASE("add_bias_residual_norm is add_bias_residual then layer_norm of the sum bit for bit", "[ops]") {
  // The CPU computes in fp32 (fp16 tensors are refused, as by the two ops); an fp16 model's values are fp32
  // inputs rounded to fp16 first.
  for (const bool fp16_values : {false, true})
    for (const int64_t rows : {1, 7, 33, 257})
      for (const int64_t width : {5, 64, 1000, 1024}) {
        CAPTURE(fp16_values, rows, width);
        const auto operand = [&](const Shape& shape, float low, float high) {
          const Tensor values = random_floats(shape, low, high);
          return fp16_values ? values.to(DataType::F16).to(DataType::F32) : values;
        };
        const Tensor x = operand({rows, width}, -3.0f, 3.0f), residual = operand({rows, width}, -1.0f, 1.0f);
        const Tensor bias = operand({width}, -1.0f, 1.0f), beta = operand({width}, -1.0f, 1.0f);
        const Tensor gamma = operand({width}, 0.5f, 1.5f);
        const ops::LayerNormWeights norm{gamma, beta, 1e-5f};
        const ops::ResidualNorm fused = ops::add_bias_residual_norm(x, bias, residual, norm);
        const Tensor sum = ops::add_bias_residual(x, bias, residual);
        CHECK(same_bits(fused.sum, sum));
        CHECK(same_bits(fused.normalized, ops::layer_norm(sum, norm)));
      }
  const Tensor x = random_floats({3, 8}), bias = random_floats({8});
  const Tensor gamma = random_floats({8}), beta = random_floats({8});
  CHECK_THROWS_AS(ops::add_bias_residual_norm(x, random_floats({7}), x, {gamma, beta, 1e-5f}), Error);
  CHECK_THROWS_AS(ops::add_bias_residual_norm(x, bias, random_floats({3, 7}), {gamma, beta, 1e-5f}), Error);
  CHECK_THROWS_AS(ops::add_bias_residual_norm(x, bias, x, {random_floats({7}), beta, 1e-5f}), Error);
  const Tensor half_x = x.to(DataType::F16), half_bias = bias.to(DataType::F16);
  const Tensor half_gamma = gamma.to(DataType::F16), half_beta = beta.to(DataType::F16);
  CHECK_THROWS_AS(ops::add_bias_residual_norm(half_x, half_bias, half_x, {half_gamma, half_beta, 1e-5f}), Error);
  CHECK(error_of([&] { ops::add_bias_residual_norm(x, bias, labelled_cuda(x), {gamma, beta, 1e-5f}); })
            .find("residual") != std::string::npos);
}

TEST_CASE("add_bias_split adds the bias and splits columns in order", "[ops]") {
  const Tensor x = random_floats({4, 9}), bias = random_floats({9});
  const std::vector<Tensor> parts = ops::add_bias_split(x, bias, 3);
  REQUIRE(parts.size() == 3);
  const auto xv = x.to_float_vector(), bv = bias.to_float_vector();
  for (int p = 0; p < 3; ++p) {
    std::vector<float> expected;
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 3; ++c) expected.push_back(xv[r * 9 + p * 3 + c] + bv[p * 3 + c]);
    CHECK(max_relative_error(parts[p].to_float_vector(), expected) < kTolerance);
  }
}

TEST_CASE("embed scales tokens and adds Marian's split sinusoids", "[ops]") {
  const int64_t vocab = 11, width = 6;
  const Tensor table = random_floats({vocab, width});
  const Tensor ids = Tensor::from_ints({3}, {4, 0, 10});
  const Tensor positions = Tensor::from_ints({3}, {0, 5, 2});
  ops::EmbeddingOptions options;
  options.scale = 2.5f;
  const Tensor out = ops::embed(ids, positions, table, options);
  const auto tv = table.to_float_vector(), ov = out.to_float_vector();
  const int token[3] = {4, 0, 10}, position[3] = {0, 5, 2};
  std::vector<float> expected;
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < width; ++c) {
      // sin for channels 0..2 with frequency index c, cos for 3..5 with index c-3.
      const int pair = c < 3 ? c : c - 3;
      const double angle = position[i] / std::pow(10000.0, 2.0 * pair / width);
      expected.push_back(static_cast<float>(2.5 * tv[token[i] * width + c] + (c < 3 ? std::sin(angle) : std::cos(angle))));
    }
  CHECK(max_relative_error(ov, expected) < kTolerance);
  CHECK_THROWS_AS(ops::embed(Tensor::from_ints({1}, {11}), Tensor::from_ints({1}, {0}), table, options), Error);
}

TEST_CASE("embed reads a sinusoid table as it evaluates the sinusoid, and past the table evaluates it", "[ops]") {
  const int64_t vocab = 11, width = 7;
  const Tensor table = random_floats({vocab, width});
  const Tensor ids = Tensor::from_ints({4}, {4, 0, 10, 3});
  const Tensor positions = Tensor::from_ints({4}, {0, 5, 2, 9});  // 9: past the table's 8 positions
  ops::EmbeddingOptions evaluated;
  evaluated.scale = 2.5f;
  ops::EmbeddingOptions tabled = evaluated;
  const Tensor sinusoids = ops::sinusoid_table(8, width, Device::CPU);
  tabled.sinusoid_table = &sinusoids;
  CHECK(ops::embed(ids, positions, table, tabled).to_float_vector() ==
        ops::embed(ids, positions, table, evaluated).to_float_vector());
  const Tensor narrow = ops::sinusoid_table(8, width - 1, Device::CPU);
  tabled.sinusoid_table = &narrow;
  CHECK_THROWS_AS(ops::embed(ids, positions, table, tabled), Error);
}

TEST_CASE("fairseq sinusoids follow M2M-100's formula, and a position offset shifts the lookup", "[ops]") {
  const int64_t width = 8, half = 4;
  const Tensor table = ops::sinusoid_table(5, width, Device::CPU, PositionEncoding::SinusoidalFairseq);
  const std::vector<float> values = table.to_float_vector();
  for (int64_t p = 0; p < 5; ++p)
    for (int64_t k = 0; k < half; ++k) {
      // Hugging Face: exp(k * -(ln 10000 / (half - 1))), sin in the first half, cos in the second.
      const double angle = static_cast<double>(p) * std::exp(static_cast<double>(k) * -std::log(10000.0) / (half - 1));
      CHECK(std::abs(values[p * width + k] - std::sin(angle)) < 1e-6);
      CHECK(std::abs(values[p * width + half + k] - std::cos(angle)) < 1e-6);
    }
  // Embedding through the table with an offset of 2 reads row position + 2.
  const Tensor tokens = random_floats({3, width});
  ops::EmbeddingOptions options;
  options.positions = PositionEncoding::Learned;
  options.position_table = &table;
  options.position_offset = 2;
  const std::vector<float> out = ops::embed(Tensor::from_ints({1}, {1}), Tensor::from_ints({1}, {1}), tokens, options)
                                     .to_float_vector();
  const std::vector<float> token = tokens.to_float_vector();
  for (int64_t c = 0; c < width; ++c) CHECK(out[c] == token[width + c] + values[3 * width + c]);
  CHECK_THROWS_AS(ops::embed(Tensor::from_ints({1}, {1}), Tensor::from_ints({1}, {3}), tokens, options), Error);
}

TEST_CASE("add_bias_residual adds the bias, then the residual", "[ops]") {
  const Tensor x = random_floats({5, 7}), bias = random_floats({7}), residual = random_floats({5, 7});
  const std::vector<float> got = ops::add_bias_residual(x, bias, residual).to_float_vector();
  const std::vector<float> xv = x.to_float_vector(), bv = bias.to_float_vector(), rv = residual.to_float_vector();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == rv[i] + (xv[i] + bv[i % 7]));
  CHECK_THROWS_AS(ops::add_bias_residual(x, bias, random_floats({5, 6})), Error);
}

TEST_CASE("attention_query_tiles splits runs of rows into tiles, and the CPU's attention ignores them", "[ops]") {
  const Tensor tiles = ops::attention_query_tiles({1, 130, 0, 64}, Device::CPU);
  CHECK(tiles.shape() == Shape{5, 2});
  CHECK(tiles.to_int_vector() == std::vector<int32_t>{0, 1, 1, 64, 65, 64, 129, 2, 131, 64});
  CHECK_THROWS(ops::attention_query_tiles({3, -1}, Device::CPU));
  // Two sentences of 3 and 5 tokens, packed: the same output with and without the tiles.
  const Tensor x = random_floats({8, 1, 16});
  const Tensor starts = Tensor::from_ints({8}, {0, 0, 0, 3, 3, 3, 3, 3});
  const Tensor lengths = Tensor::from_ints({8}, {3, 3, 3, 5, 5, 5, 5, 5});
  ops::AttentionOptions options{2, 0.25f};
  options.key_rows = &starts;
  options.key_span = 5;
  const Tensor plain = ops::attention(x, x, x, lengths, options);
  const Tensor sentence_tiles = ops::attention_query_tiles({3, 5}, Device::CPU);
  options.query_tiles = &sentence_tiles;
  const Tensor tiled = ops::attention(x, x, x, lengths, options);
  CHECK(tiled.to_float_vector() == plain.to_float_vector());
  const Tensor wrong = Tensor::from_ints({2, 3}, {0, 3, 0, 3, 5, 0});
  options.query_tiles = &wrong;
  CHECK_THROWS(ops::attention(x, x, x, lengths, options));
}

TEST_CASE("attention matches per-head softmax(q k^T scale) v with key lengths", "[ops]") {
  const int64_t batch = 3, query_len = 4, key_capacity = 6, heads = 2, width = 8, head_dim = 4;
  const Tensor q = random_floats({batch, query_len, width}), k = random_floats({batch, key_capacity, width});
  const Tensor v = random_floats({batch, key_capacity, width});
  const std::vector<int32_t> lengths = {6, 1, 3};
  const float scale = 0.5f;
  const Tensor out = ops::attention(q, k, v, Tensor::from_ints({batch}, lengths), {static_cast<int>(heads), scale});
  const auto qv = q.to_float_vector(), kv = k.to_float_vector(), vv = v.to_float_vector();
  std::vector<float> expected(static_cast<size_t>(batch * query_len * width));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < query_len; ++t) {
        std::vector<double> scores;
        for (int64_t j = 0; j < lengths[b]; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < head_dim; ++c)
            dot += double(qv[(b * query_len + t) * width + h * head_dim + c]) * kv[(b * key_capacity + j) * width + h * head_dim + c];
          scores.push_back(dot * scale);
        }
        double top = *std::max_element(scores.begin(), scores.end()), total = 0;
        for (double& s : scores) total += (s = std::exp(s - top));
        for (int64_t c = 0; c < head_dim; ++c) {
          double sum = 0;
          for (int64_t j = 0; j < lengths[b]; ++j) sum += scores[j] / total * vv[(b * key_capacity + j) * width + h * head_dim + c];
          expected[(b * query_len + t) * width + h * head_dim + c] = static_cast<float>(sum);
        }
      }
  CHECK(max_relative_error(out.to_float_vector(), expected) < kTolerance);
}

TEST_CASE("gather_rows moves whole rows", "[ops]") {
  const Tensor cache = random_floats({2, 3, 4});
  const auto after = cache.to_float_vector();
  const Tensor gathered = ops::gather_rows(cache, Tensor::from_ints({3}, {1, 1, 0}));
  REQUIRE(gathered.shape() == Shape{3, 3, 4});
  const auto gv = gathered.to_float_vector();
  for (int i = 0; i < 12; ++i) {
    CHECK(gv[i] == after[12 + i]);
    CHECK(gv[12 + i] == after[12 + i]);
    CHECK(gv[24 + i] == after[i]);
  }
  CHECK_THROWS_AS(ops::gather_rows(cache, Tensor::from_ints({1}, {2})), Error);
}

TEST_CASE("fp16 conversion round-trips representable values and rounds to nearest even", "[ops]") {
  for (float value : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f, 0.333251953125f})
    CHECK(half_to_float(float_to_half(value)) == value);
  CHECK(half_to_float(float_to_half(1.0f + 1.0f / 2048)) == 1.0f);  // ties go to the even mantissa
  CHECK(half_to_float(float_to_half(1.0f + 3.0f / 2048)) == 1.0f + 1.0f / 512);
  CHECK(std::isinf(half_to_float(float_to_half(70000.0f))));
  CHECK(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}

TEST_CASE("log_softmax_topk equals a full sort of the normalized row, with ties and -inf", "[ops]") {
  const int64_t rows = 5, vocab = 300;
  Tensor logits = random_floats({rows, vocab}, -5.0f, 5.0f);
  float* values = logits.data<float>();
  for (int64_t i = 0; i < vocab; i += 7) values[i] = 2.0f;  // many exact ties in row 0
  for (int64_t i = 0; i < vocab; i += 3) values[vocab + i] = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) values[2 * vocab + i] = -std::numeric_limits<float>::infinity();
  Tensor bias = random_floats({vocab});
  for (int64_t i = 0; i < vocab; i += 7) bias.data<float>()[i] = 0.5f;  // keeps row 0's ties after the bias
  const Tensor suppressed = Tensor::from_ints({2}, {5, 14});
  for (int k : {1, 8, 64}) {
    ops::TopkOptions options;
    options.k = k;
    options.bias = &bias;
    options.suppressed_ids = &suppressed;
    Tensor top_values, top_ids;
    ops::log_softmax_topk(logits, options, top_values, top_ids);
    const auto got_values = top_values.to_float_vector();
    const auto got_ids = top_ids.to_int_vector();
    const auto lv = logits.to_float_vector(), bv = bias.to_float_vector();
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> z(vocab);
      double top = -INFINITY, sum = 0;
      for (int64_t i = 0; i < vocab; ++i) top = std::max(top, z[i] = double(lv[r * vocab + i]) + bv[i]);
      for (int64_t i = 0; i < vocab; ++i) sum += std::isinf(top) ? 0 : std::exp(z[i] - top);
      for (int64_t i = 0; i < vocab; ++i) z[i] = std::isinf(top) ? -INFINITY : z[i] - top - std::log(sum);
      z[5] = z[14] = -INFINITY;
      std::vector<int32_t> order(vocab);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return z[a] > z[b]; });
      for (int i = 0; i < k; ++i) {
        INFO("row " << r << " k " << k << " rank " << i);
        CHECK(got_ids[r * k + i] == order[i]);
        if (std::isinf(z[order[i]])) CHECK(std::isinf(got_values[r * k + i]));
        else CHECK(std::abs(got_values[r * k + i] - z[order[i]]) < 1e-5);
      }
    }
  }
}

TEST_CASE("log_softmax_topk ranks by the normalized floats: raw logits that normalize alike tie, lower id first",
          "[ops]") {
  // Raw logits a few ulps apart just below the maximum normalize (z - max - log_sum, about -9) to the same
  // float; placed with the larger raw values at the larger ids, ranking by raw value would pick other ids.
  const int64_t vocab = 8000;
  Tensor logits = random_floats({1, vocab}, -30.0f, -10.0f);
  float* z = logits.data<float>();
  z[7000] = 0.5f;  // the maximum
  for (int64_t j = 0; j < 40; ++j) z[100 + j] = std::nextafter(0.5f - 64 * 6e-8f, 0.0f) + static_cast<float>(j) * 6e-8f;
  for (int k : {1, 4, 16}) {
    ops::TopkOptions options;
    options.k = k;
    Tensor top_values, top_ids;
    ops::log_softmax_topk(logits, options, top_values, top_ids);
    // The reference: every id normalized in float as the op does, then a stable sort by value.
    const float top = 0.5f;
    const float log_sum = static_cast<float>(std::log(cpu::exp_sum(z, vocab, top)));
    std::vector<float> normalized(vocab);
    for (int64_t i = 0; i < vocab; ++i) normalized[i] = (z[i] - top) - log_sum;
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return normalized[a] > normalized[b]; });
    const auto ids = top_ids.to_int_vector();
    const auto values = top_values.to_float_vector();
    int merged = 0;  // neighbours among the 40 that normalize alike: the case must test something
    for (int64_t j = 1; j < 40; ++j) merged += normalized[100 + j] == normalized[100 + j - 1];
    CHECK(merged > 10);
    for (int i = 0; i < k; ++i) {
      INFO("k " << k << " rank " << i);
      CHECK(ids[i] == order[i]);
      CHECK(values[i] == normalized[order[i]]);
    }
  }
}

TEST_CASE("front ends refuse operands on another device or of another dtype than the input", "[ops]") {
  const Tensor x = random_floats({3, 8}), gamma = random_floats({8}), beta = random_floats({8});
  const Tensor beta_on_gpu = labelled_cuda(beta), int_beta = random_ints({8}, 0, 3);
  CHECK(error_of([&] { ops::layer_norm(x, {gamma, beta_on_gpu, 1e-5f}); }).find("beta") != std::string::npos);
  CHECK(error_of([&] { ops::layer_norm(x, {gamma, int_beta, 1e-5f}); }).find("beta") != std::string::npos);
  const Tensor residual_on_gpu = labelled_cuda(x);
  CHECK(error_of([&] { ops::add_bias_residual_layer_norm(x, beta, residual_on_gpu, {gamma, beta, 1e-5f}); })
            .find("residual") != std::string::npos);
  const Tensor qkv = random_floats({3, 12}), bias_on_gpu = labelled_cuda(random_floats({12}));
  CHECK(error_of([&] { ops::add_bias_split(qkv, bias_on_gpu, 3); }).find("bias") != std::string::npos);

  const Tensor query = random_floats({2, 1, 8}), keys = random_floats({2, 4, 8}), values = random_floats({2, 4, 8});
  const Tensor lengths = Tensor::from_ints({2}, {4, 2});
  const ops::AttentionOptions options{2, 0.5f};
  const Tensor values_on_gpu = labelled_cuda(values), lengths_on_gpu = labelled_cuda(lengths);
  CHECK_THROWS_AS(ops::attention(query, keys, values_on_gpu, lengths, options), Error);
  CHECK_THROWS_AS(ops::attention(query, keys, values, lengths_on_gpu, options), Error);
  CHECK_NOTHROW(ops::attention(query, keys, values, lengths, options));

  const Tensor ids = Tensor::from_ints({2}, {1, 0}), positions = Tensor::from_ints({2}, {0, 1});
  const Tensor table = random_floats({4, 8}), positions_on_gpu = labelled_cuda(positions);
  CHECK_THROWS_AS(ops::embed(ids, positions_on_gpu, table, {}), Error);
  ops::EmbeddingOptions learned;
  learned.positions = PositionEncoding::Learned;
  const Tensor int_position_table = random_ints({4, 8}, 0, 3);
  learned.position_table = &int_position_table;
  CHECK(error_of([&] { ops::embed(ids, positions, table, learned); }).find("position table") != std::string::npos);
}

TEST_CASE("the persistent decoder step is a CUDA kernel: CPU tensors are refused with one line", "[ops]") {
  const Tensor x({1, 8}, DataType::F32, Device::CPU);
  const ops::PersistentDecoderStep step{};
  CHECK_FALSE(ops::persistent_decoder_fits(x, {}, step));
  try {
    ops::persistent_decoder_step(x, {}, step);
    FAIL("a CPU tensor ran through the persistent decoder step");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find("do not fit the persistent kernel (CUDA only)") != std::string::npos);
  }
}

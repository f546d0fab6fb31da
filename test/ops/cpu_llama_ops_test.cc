// The ops of a Llama-style decoder-only model on the CPU against naive formulas in double, on fresh random
// inputs: RMS norm, SwiGLU, rotary embedding (Hugging Face's formulas, one value by hand), grouped-query
// attention (plain, per row, per key, packed causal prefill), and the step append with GQA widths and
// chunked prefill through the block pool.
#include <algorithm>
#include <cmath>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "ops/ops.h"
#include "support/attention_heads.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::max_relative_error;
using seqtrans::testing::random_floats;
using seqtrans::testing::random_ints;
using seqtrans::testing::gqa_options;
using seqtrans::testing::Heads;

namespace {

constexpr double kTolerance = 1e-5;

// GQA ratios 1, 2 and 4 at head sizes 64 and 128.
const Heads kHeadShapes[] = {{4, 4, 64}, {4, 2, 64}, {8, 2, 64}, {2, 2, 128}, {4, 2, 128}, {4, 1, 128}};

// Softmax attention of one query row [heads * head_dim] over key and value rows [kv_heads * head_dim], in
// double; query head h reads kv head h / (heads / kv_heads), as Hugging Face's repeat_kv repeats them.
std::vector<float> naive_attend(const float* query, const std::vector<const float*>& keys,
                                const std::vector<const float*>& values, const Heads& shape) {
  const int group = shape.heads / shape.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  std::vector<float> out(static_cast<size_t>(shape.width()), 0.0f);
  for (int h = 0; h < shape.heads; ++h) {
    const int64_t q_at = int64_t{h} * shape.head_dim, kv_at = int64_t{h / group} * shape.head_dim;
    std::vector<double> scores;
    for (const float* key : keys) {
      double dot = 0.0;
      for (int c = 0; c < shape.head_dim; ++c) dot += double(query[q_at + c]) * key[kv_at + c];
      scores.push_back(dot * scale);
    }
    if (scores.empty()) continue;
    const double top = *std::max_element(scores.begin(), scores.end());
    double total = 0.0;
    for (double& score : scores) total += score = std::exp(score - top);
    for (int c = 0; c < shape.head_dim; ++c) {
      double sum = 0.0;
      for (size_t j = 0; j < keys.size(); ++j) sum += scores[j] / total * values[j][kv_at + c];
      out[q_at + c] = static_cast<float>(sum);
    }
  }
  return out;
}

// HF's LlamaRMSNorm in double: weight * x / sqrt(mean(x^2) + epsilon).
std::vector<float> naive_rms_norm(const std::vector<double>& row, const std::vector<float>& weight, double epsilon) {
  double squares = 0.0;
  for (double v : row) squares += v * v;
  const double inverse_rms = 1.0 / std::sqrt(squares / static_cast<double>(row.size()) + epsilon);
  std::vector<float> out;
  for (size_t i = 0; i < row.size(); ++i) out.push_back(static_cast<float>(weight[i] * row[i] * inverse_rms));
  return out;
}

// Prompts of these lengths packed one after another: each token's prompt start and position.
struct Packing {
  std::vector<int32_t> starts, positions, prompt_of;
};
Packing pack(const std::vector<int32_t>& lengths) {
  Packing packing;
  int32_t start = 0;
  for (size_t p = 0; p < lengths.size(); ++p) {
    for (int32_t t = 0; t < lengths[p]; ++t) {
      packing.starts.push_back(start);
      packing.positions.push_back(t);
      packing.prompt_of.push_back(static_cast<int32_t>(p));
    }
    start += lengths[p];
  }
  return packing;
}

}  // namespace

TEST_CASE("rms_norm and add_residual_rms_norm match Hugging Face's LlamaRMSNorm", "[ops]") {
  for (const int64_t rows : {1, 7, 33})
    for (const int64_t width : {5, 64, 1000}) {
      CAPTURE(rows, width);
      const Tensor x = random_floats({rows, width}, -3.0f, 3.0f);
      const Tensor residual = random_floats({rows, width});
      const Tensor weight = random_floats({width}, 0.5f, 1.5f);
      const float epsilon = 1e-6f;
      const Tensor normalized = ops::rms_norm(x, {weight, epsilon});
      const ops::ResidualNorm fused = ops::add_residual_rms_norm(x, residual, {weight, epsilon});
      REQUIRE(normalized.shape() == x.shape());
      REQUIRE(fused.sum.shape() == x.shape());
      REQUIRE(fused.normalized.shape() == x.shape());
      const std::vector<float> xv = x.to_float_vector(), rv = residual.to_float_vector(), w = weight.to_float_vector();
      std::vector<float> expected, expected_sum, expected_fused;
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> row(xv.begin() + r * width, xv.begin() + (r + 1) * width), sum_row;
        for (int64_t c = 0; c < width; ++c) {
          const float sum = xv[r * width + c] + rv[r * width + c];  // HF adds in the model's dtype
          expected_sum.push_back(sum);
          sum_row.push_back(sum);
        }
        for (float v : naive_rms_norm(row, w, epsilon)) expected.push_back(v);
        for (float v : naive_rms_norm(sum_row, w, epsilon)) expected_fused.push_back(v);
      }
      CHECK(max_relative_error(normalized.to_float_vector(), expected) < kTolerance);
      CHECK(fused.sum.to_float_vector() == expected_sum);
      CHECK(max_relative_error(fused.normalized.to_float_vector(), expected_fused) < kTolerance);
    }
  const Tensor x = random_floats({3, 8});
  CHECK_THROWS_AS(ops::rms_norm(x, {random_floats({7}), 1e-6f}), Error);
  CHECK_THROWS_AS(ops::add_residual_rms_norm(x, random_floats({3, 7}), {random_floats({8}), 1e-6f}), Error);
  CHECK_THROWS_AS(ops::rms_norm(random_floats({8}), {random_floats({8}), 1e-6f}), Error);
}

TEST_CASE("gated_activation is silu of the first half times the second half", "[ops]") {
  for (const int64_t rows : {1, 5})
    for (const int64_t f : {3, 64, 344}) {
      CAPTURE(rows, f);
      const Tensor gate_up = random_floats({rows, 2 * f}, -6.0f, 6.0f);
      const Tensor out = ops::gated_activation(gate_up);
      REQUIRE(out.shape() == Shape{rows, f});
      const std::vector<float> in = gate_up.to_float_vector();
      std::vector<float> expected;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < f; ++c) {
          const double gate = in[r * 2 * f + c], up = in[r * 2 * f + f + c];
          expected.push_back(static_cast<float>(gate / (1.0 + std::exp(-gate)) * up));
        }
      CHECK(max_relative_error(out.to_float_vector(), expected) < kTolerance);
    }
  CHECK_THROWS_AS(ops::gated_activation(random_floats({2, 7})), Error);
}

TEST_CASE("rotary_table holds Hugging Face's cos and sin, checked by hand", "[ops]") {
  const Tensor table = ops::rotary_table(1100, 128, 10000.0f, Device::CPU);
  REQUIRE(table.shape() == Shape{1100, 128});
  const std::vector<float> values = table.to_float_vector();
  // Position 0: no rotation.
  for (int i = 0; i < 64; ++i) {
    CHECK(values[i] == 1.0f);
    CHECK(values[64 + i] == 0.0f);
  }
  // By hand, position 7, pair 3: inv_freq = 1 / 10000^(6/128) = 1 / e^(0.046875 ln 10000) = 1 / 1.5399265
  // = 0.64938163; angle 7 x 0.64938163 = 4.5456714; cos -0.1659463, sin -0.9861348.
  CHECK(std::abs(values[7 * 128 + 3] - -0.1659463) < 1e-6);
  CHECK(std::abs(values[7 * 128 + 64 + 3] - -0.9861348) < 1e-6);
  // Llama 3's theta, position 1000, pair 10: 1 / 500000^(20/128) = 1 / e^(0.15625 ln 500000) = 0.12868738;
  // the fp32 angle 128.68738 gives cos -0.9930554, sin 0.1176478.
  const Tensor llama3 = ops::rotary_table(1001, 128, 500000.0f, Device::CPU);
  CHECK(std::abs(llama3.to_float_vector()[1000 * 128 + 10] - -0.9930554) < 1e-6);
  CHECK(std::abs(llama3.to_float_vector()[1000 * 128 + 64 + 10] - 0.1176478) < 1e-6);
  // Every entry: HF's fp32 angle, its cos and sin in double.
  double worst = 0.0;
  for (int64_t p = 0; p < 1100; ++p)
    for (int64_t i = 0; i < 64; ++i) {
      const float inverse = 1.0f / static_cast<float>(std::pow(10000.0, static_cast<double>(float(2 * i) / 128.0f)));
      const double angle = static_cast<float>(p) * inverse;
      worst = std::max(worst, std::abs(values[p * 128 + i] - std::cos(angle)));
      worst = std::max(worst, std::abs(values[p * 128 + 64 + i] - std::sin(angle)));
    }
  CHECK(worst < 1e-7);
  CHECK_THROWS_AS(ops::rotary_table(10, 7, 10000.0f, Device::CPU), Error);
}

TEST_CASE("apply_rotary_embedding rotates half-split pairs of query and key heads, not the values", "[ops]") {
  // By hand: head size 128, position 7, pair 3 (channels 3 and 67) = (1, 0.5) in the first query head:
  // (1 cos - 0.5 sin, 0.5 cos + 1 sin) = (0.3271211, -1.0691079) with the cos and sin above.
  {
    const Tensor table = ops::rotary_table(8, 128, 10000.0f, Device::CPU);
    std::vector<float> row(3 * 128, 0.0f);
    row[3] = 1.0f;
    row[67] = 0.5f;
    Tensor qkv = Tensor::from_floats({1, 3 * 128}, row);
    ops::apply_rotary_embedding(qkv, Tensor::from_ints({1}, {7}), table, {1, 1});
    const std::vector<float> out = qkv.to_float_vector();
    CHECK(std::abs(out[3] - 0.3271211) < 1e-6);
    CHECK(std::abs(out[67] - -1.0691079) < 1e-6);
    CHECK(std::count(out.begin(), out.end(), 0.0f) == 3 * 128 - 2);
  }
  for (const Heads& shape : kHeadShapes)
    for (const int64_t tokens : {1, 9}) {
      CAPTURE(shape.heads, shape.kv_heads, shape.head_dim, tokens);
      const int64_t positions_count = 50, half = shape.head_dim / 2;
      const int64_t width = shape.width() + 2 * shape.kv_width();
      const Tensor table = ops::rotary_table(positions_count, shape.head_dim, 10000.0f, Device::CPU);
      const Tensor positions = random_ints({tokens}, 0, static_cast<int32_t>(positions_count - 1));
      const Tensor input = random_floats({tokens, width});
      Tensor qkv = input.to(Device::CPU);
      ops::apply_rotary_embedding(qkv, positions, table, {shape.heads, shape.kv_heads});
      const std::vector<float> in = input.to_float_vector(), got = qkv.to_float_vector();
      const std::vector<float> cos_sin = table.to_float_vector();
      const std::vector<int32_t> at = positions.to_int_vector();
      std::vector<float> expected = in;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t head = 0; head < shape.heads + shape.kv_heads; ++head)
          for (int64_t c = 0; c < shape.head_dim; ++c) {
            // HF: q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q[half:], q[:half]).
            const int64_t i = c % half, base = t * width + head * shape.head_dim;
            const double rotated = c < half ? -in[base + c + half] : in[base + c - half];
            const double cos = cos_sin[at[t] * shape.head_dim + i], sin = cos_sin[at[t] * shape.head_dim + half + i];
            expected[base + c] = static_cast<float>(in[base + c] * cos + rotated * sin);
          }
      CHECK(max_relative_error(got, expected) < 1e-6);
      // The values' columns are untouched.
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t c = shape.width() + shape.kv_width(); c < width; ++c)
          CHECK(got[t * width + c] == in[t * width + c]);
    }
  const Tensor table = ops::rotary_table(4, 8, 10000.0f, Device::CPU);
  Tensor qkv = random_floats({2, 4 * 8});
  CHECK_THROWS_AS(ops::apply_rotary_embedding(qkv, Tensor::from_ints({2}, {0, 4}), table, {2, 1}), Error);
  CHECK_THROWS_AS(ops::apply_rotary_embedding(qkv, Tensor::from_ints({2}, {0, 1}), table, {1, 1}), Error);
}

TEST_CASE("attention with kv heads matches repeat_kv attention: plain, per row and per key", "[ops]") {
  for (const Heads& shape : kHeadShapes) {
    const int64_t batch = 5, query_len = 3, capacity = 11;
    CAPTURE(shape.heads, shape.kv_heads, shape.head_dim);
    const Tensor query = random_floats({batch, query_len, shape.width()});
    const Tensor keys = random_floats({batch, capacity, shape.kv_width()});
    const Tensor values = random_floats({batch, capacity, shape.kv_width()});
    const std::vector<int32_t> lengths = {11, 1, 0, 6, 9};
    const Tensor lengths_tensor = Tensor::from_ints({batch}, lengths);
    const std::vector<float> q = query.to_float_vector(), k = keys.to_float_vector(), v = values.to_float_vector();
    const auto key_at = [&](const std::vector<float>& x, int64_t row, int64_t j) {
      return x.data() + (row * capacity + j) * shape.kv_width();
    };
    // Plain, then every row's keys in batch row key_rows[b].
    const Tensor rows = Tensor::from_ints({batch}, {3, 3, 0, 4, 1});
    for (const Tensor* key_rows : {static_cast<const Tensor*>(nullptr), &rows}) {
      CAPTURE(key_rows != nullptr);
      const Tensor got = ops::attention(query, keys, values, lengths_tensor, gqa_options(shape, key_rows));
      REQUIRE(got.shape() == query.shape());
      std::vector<float> expected;
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t row = key_rows != nullptr ? key_rows->to_int_vector()[b] : b;
        std::vector<const float*> key_list, value_list;
        for (int64_t j = 0; j < lengths[b]; ++j) {
          key_list.push_back(key_at(k, row, j));
          value_list.push_back(key_at(v, row, j));
        }
        for (int64_t t = 0; t < query_len; ++t)
          for (float x : naive_attend(q.data() + (b * query_len + t) * shape.width(), key_list, value_list, shape))
            expected.push_back(x);
      }
      CHECK(max_relative_error(got.to_float_vector(), expected) < kTolerance);
    }
    // Per key, the block-paged cache: key j of row b in block history[b, j] at j % capacity.
    const int64_t table_width = 3 * capacity;
    const Tensor history = random_ints({batch, table_width}, 0, static_cast<int32_t>(batch - 1));
    const std::vector<int32_t> long_lengths = {33, 1, 0, 12, 20};
    const Tensor step_query = random_floats({batch, 1, shape.width()});
    const Tensor got = ops::attention(step_query, keys, values, Tensor::from_ints({batch}, long_lengths),
                                      gqa_options(shape, &history));
    const std::vector<int32_t> blocks = history.to_int_vector();
    const std::vector<float> sq = step_query.to_float_vector();
    std::vector<float> expected;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<const float*> key_list, value_list;
      for (int64_t j = 0; j < long_lengths[b]; ++j) {
        key_list.push_back(key_at(k, blocks[b * table_width + j], j % capacity));
        value_list.push_back(key_at(v, blocks[b * table_width + j], j % capacity));
      }
      for (float x : naive_attend(sq.data() + b * shape.width(), key_list, value_list, shape)) expected.push_back(x);
    }
    CHECK(max_relative_error(got.to_float_vector(), expected) < kTolerance);
  }
  // Keys must be kv_heads head sizes wide, and the heads must split into whole groups.
  const Heads shape{4, 2, 8};
  const Tensor query = random_floats({2, 1, 32}), lengths = Tensor::from_ints({2}, {1, 1});
  const Tensor wide_keys = random_floats({2, 3, 32}), keys = random_floats({2, 3, 16});
  CHECK_THROWS_AS(ops::attention(query, wide_keys, wide_keys, lengths, gqa_options(shape)), Error);
  CHECK_THROWS_AS(ops::attention(query, keys, keys, lengths, gqa_options({4, 3, 8})), Error);
  CHECK_NOTHROW(ops::attention(query, keys, keys, lengths, gqa_options(shape)));
}

TEST_CASE("packed causal prefill: each token attends to its prompt's keys up to itself, with kv heads", "[ops]") {
  for (const Heads& shape : kHeadShapes) {
    CAPTURE(shape.heads, shape.kv_heads, shape.head_dim);
    const std::vector<int32_t> prompt_lengths = {5, 1, 13, 7};
    const Packing packing = pack(prompt_lengths);
    const int64_t tokens = static_cast<int64_t>(packing.starts.size());  // 26 tokens, odd prompts
    const Tensor query = random_floats({tokens, 1, shape.width()});
    const Tensor keys = random_floats({tokens, 1, shape.kv_width()});
    const Tensor values = random_floats({tokens, 1, shape.kv_width()});
    const Tensor starts = Tensor::from_ints({tokens}, packing.starts);
    std::vector<int32_t> lengths;
    for (int32_t position : packing.positions) lengths.push_back(position + 1);
    ops::AttentionOptions options = gqa_options(shape, &starts);
    options.key_span = *std::max_element(prompt_lengths.begin(), prompt_lengths.end());
    const Tensor got = ops::attention(query, keys, values, Tensor::from_ints({tokens}, lengths), options);
    const std::vector<float> q = query.to_float_vector(), k = keys.to_float_vector(), v = values.to_float_vector();
    std::vector<float> expected;
    for (int64_t i = 0; i < tokens; ++i) {
      std::vector<const float*> key_list, value_list;
      for (int64_t j = packing.starts[i]; j <= i; ++j) {
        key_list.push_back(k.data() + j * shape.kv_width());
        value_list.push_back(v.data() + j * shape.kv_width());
      }
      for (float x : naive_attend(q.data() + i * shape.width(), key_list, value_list, shape)) expected.push_back(x);
    }
    CHECK(max_relative_error(got.to_float_vector(), expected) < kTolerance);
  }
}

TEST_CASE("append_self_attention_step splits GQA rows without a bias and fills shared history rows", "[ops]") {
  const Heads shape{4, 2, 8};
  const int64_t slots = 5, block = 4, blocks = 6, table_width = 12;
  const int64_t width = shape.width() + 2 * shape.kv_width();
  const Tensor qkv = random_floats({slots, width});
  // Slots 0-2 are three tokens of prompt 1 (positions 3, 4, 5 across a block edge), slot 3 prompt 0's token
  // at 0, slot 4 padding.
  const Tensor positions = Tensor::from_ints({slots}, {3, 4, 5, 0, 2});
  const Tensor cache_rows = Tensor::from_ints({slots}, {2, 5, 5, 0, -1});
  const Tensor history_rows = Tensor::from_ints({slots}, {1, 1, 1, 0, 0});
  Tensor keys = random_floats({blocks, block, shape.kv_width()});
  Tensor values = random_floats({blocks, block, shape.kv_width()});
  const std::vector<float> keys_before = keys.to_float_vector(), values_before = values.to_float_vector();
  Tensor history = Tensor::from_ints({2, table_width}, std::vector<int32_t>(2 * table_width, -7));
  ops::SelfAttentionStepOptions options;
  options.query_width = shape.width();
  options.cache_rows = &cache_rows;
  options.history_rows = &history_rows;
  const Tensor query = ops::append_self_attention_step(qkv, positions, keys, values, history, options);
  REQUIRE(query.shape() == Shape{slots, shape.width()});
  const std::vector<float> in = qkv.to_float_vector(), q = query.to_float_vector();
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t c = 0; c < shape.width(); ++c) CHECK(q[s * shape.width() + c] == in[s * width + c]);
  std::vector<float> expected_keys = keys_before, expected_values = values_before;
  std::vector<int32_t> expected_history(2 * table_width, -7);
  const std::vector<int32_t> at = positions.to_int_vector(), row = cache_rows.to_int_vector();
  const std::vector<int32_t> history_row = history_rows.to_int_vector();
  for (int64_t s = 0; s < slots; ++s) {
    if (row[s] < 0) continue;
    const int64_t entry = (row[s] * block + at[s] % block) * shape.kv_width();
    for (int64_t c = 0; c < shape.kv_width(); ++c) {
      expected_keys[entry + c] = in[s * width + shape.width() + c];
      expected_values[entry + c] = in[s * width + shape.width() + shape.kv_width() + c];
    }
    expected_history[history_row[s] * table_width + at[s]] = row[s];
  }
  CHECK(keys.to_float_vector() == expected_keys);
  CHECK(values.to_float_vector() == expected_values);
  CHECK(history.to_int_vector() == expected_history);

  // A qkv row that does not split into the query width and two cache widths, a history row outside the table.
  options.query_width = shape.width() + 8;
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, positions, keys, values, history, options), Error);
  options.query_width = shape.width();
  const Tensor outside = Tensor::from_ints({slots}, {1, 1, 2, 0, 0});
  options.history_rows = &outside;
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, positions, keys, values, history, options), Error);
  CHECK(history.to_int_vector() == expected_history);
}

// Chunked prefill through the block pool (ops.h, AttentionOptions): a chunk's K/V rows go into their blocks
// and their prompt's history row (append_self_attention_step with history_rows), then each token attends over
// the pool through its copy of that row with length position + 1. Two chunks equal one causal pass.
TEST_CASE("chunked prefill over the block pool equals causal attention over whole prompts", "[ops]") {
  for (const Heads& shape : kHeadShapes) {
    CAPTURE(shape.heads, shape.kv_heads, shape.head_dim);
    const int64_t block = 16, blocks = 8, table_width = 48;
    const int64_t width = shape.width() + 2 * shape.kv_width();
    // Prompt 0: 21 tokens, in chunks of 13 and 8; prompt 1: 9 tokens, all in the first chunk.
    const std::vector<int32_t> prompt_lengths = {21, 9};
    const std::vector<std::vector<int32_t>> block_tables = {{6, 1}, {3}};
    const std::vector<Tensor> rows_of = {random_floats({21, width}), random_floats({9, width})};
    struct Chunk {
      int32_t prompt, first, count;
    };
    const std::vector<std::vector<Chunk>> passes = {{{0, 0, 13}, {1, 0, 9}}, {{0, 13, 8}}};
    Tensor keys({blocks, block, shape.kv_width()}, DataType::F32);
    Tensor values({blocks, block, shape.kv_width()}, DataType::F32);
    Tensor history = Tensor::from_ints({2, table_width}, std::vector<int32_t>(2 * table_width, -1));
    for (const std::vector<Chunk>& pass : passes) {
      std::vector<float> qkv_values;
      std::vector<int32_t> positions, cache_rows, history_rows, lengths;
      for (const Chunk& chunk : pass) {
        const std::vector<float> prompt = rows_of[chunk.prompt].to_float_vector();
        for (int32_t t = chunk.first; t < chunk.first + chunk.count; ++t) {
          qkv_values.insert(qkv_values.end(), prompt.begin() + t * width, prompt.begin() + (t + 1) * width);
          positions.push_back(t);
          cache_rows.push_back(block_tables[chunk.prompt][t / block]);
          history_rows.push_back(chunk.prompt);
          lengths.push_back(t + 1);
        }
      }
      const int64_t tokens = static_cast<int64_t>(positions.size());
      const Tensor qkv = Tensor::from_floats({tokens, width}, qkv_values);
      const Tensor cache_rows_tensor = Tensor::from_ints({tokens}, cache_rows);
      const Tensor history_rows_tensor = Tensor::from_ints({tokens}, history_rows);
      ops::SelfAttentionStepOptions step;
      step.query_width = shape.width();
      step.cache_rows = &cache_rows_tensor;
      step.history_rows = &history_rows_tensor;
      const Tensor query = ops::append_self_attention_step(qkv, Tensor::from_ints({tokens}, positions), keys, values,
                                                           history, step);
      const Tensor token_history = ops::gather_rows(history, history_rows_tensor);
      const Tensor got = ops::attention(query.reshape({tokens, 1, shape.width()}), keys, values,
                                        Tensor::from_ints({tokens}, lengths), gqa_options(shape, &token_history));
      // Expected: token t of a prompt over the prompt's rows 0..t, straight from qkv.
      std::vector<float> expected;
      for (int64_t i = 0; i < tokens; ++i) {
        const std::vector<float> prompt = rows_of[history_rows[i]].to_float_vector();
        std::vector<const float*> key_list, value_list;
        for (int32_t j = 0; j <= positions[i]; ++j) {
          key_list.push_back(prompt.data() + j * width + shape.width());
          value_list.push_back(prompt.data() + j * width + shape.width() + shape.kv_width());
        }
        for (float x : naive_attend(prompt.data() + positions[i] * width, key_list, value_list, shape))
          expected.push_back(x);
      }
      CHECK(max_relative_error(got.to_float_vector(), expected) < kTolerance);
    }
  }
}

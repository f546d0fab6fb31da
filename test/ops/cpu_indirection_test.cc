// The ops that let decoder state move by index instead of by copy, on the CPU: attention through
// key_rows, the fused self-attention step append, and the device copies (copy, copy_row_prefixes).
#include <algorithm>
#include <cstring>
#include <vector>

#include "catch.h"
#include "cpu/cpu_ops.h"
#include "ops/ops.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::max_relative_error;
using seqtrans::testing::random_floats;
using seqtrans::testing::random_ints;

namespace {

constexpr double kTolerance = 1e-6;

ops::AttentionOptions attention_options(int heads, float scale, const Tensor* key_rows = nullptr) {
  ops::AttentionOptions options;
  options.num_heads = heads;
  options.scale = scale;
  options.key_rows = key_rows;
  return options;
}

// keys [rows, capacity, width] -> [b, capacity, width] with key j of row b taken from (rows[b][j], j);
// keys at or past lengths[b] are zero.
Tensor assemble_keys(const Tensor& keys, const std::vector<std::vector<int32_t>>& rows,
                     const std::vector<int32_t>& lengths) {
  const int64_t batch = static_cast<int64_t>(rows.size()), capacity = keys.dim(1), width = keys.dim(2);
  std::vector<float> values(static_cast<size_t>(batch * capacity * width), 0.0f);
  const std::vector<float> source = keys.to_float_vector();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < lengths[b]; ++j)
      for (int64_t c = 0; c < width; ++c)
        values[(b * capacity + j) * width + c] = source[(rows[b][j] * capacity + j) * width + c];
  return Tensor::from_floats({batch, capacity, width}, values);
}

}  // namespace

TEST_CASE("attention with key_rows [b] equals attention on gathered keys and values", "[ops]") {
  const int64_t batch = 5, key_batch = 3, capacity = 7, width = 12;
  for (int64_t query_len : {1, 4}) {
    CAPTURE(query_len);
    const Tensor query = random_floats({batch, query_len, width});
    const Tensor keys = random_floats({key_batch, capacity, width});
    const Tensor values = random_floats({key_batch, capacity, width});
    const Tensor rows = Tensor::from_ints({batch}, {2, 0, 2, 1, 0});
    const Tensor lengths = Tensor::from_ints({batch}, {7, 1, 4, 0, 7});
    const ops::AttentionOptions plain = attention_options(3, 0.5f);
    const ops::AttentionOptions indirect = attention_options(3, 0.5f, &rows);
    const Tensor got = ops::attention(query, keys, values, lengths, indirect);
    const Tensor expected =
        ops::attention(query, ops::gather_rows(keys, rows), ops::gather_rows(values, rows), lengths, plain);
    REQUIRE(got.shape() == Shape{batch, query_len, width});
    CHECK(max_relative_error(got.to_float_vector(), expected.to_float_vector()) < kTolerance);
    // Row 3 has no keys: zeros, like any empty row.
    const auto out = got.to_float_vector();
    for (int64_t i = 3 * query_len * width; i < 4 * query_len * width; ++i) CHECK(out[i] == 0.0f);
  }
}

TEST_CASE("attention with key_rows [b, tk] equals attention on keys assembled per key", "[ops]") {
  const int64_t batch = 4, key_batch = 3, capacity = 5, width = 8;
  const Tensor query = random_floats({batch, 1, width});
  const Tensor keys = random_floats({key_batch, capacity, width});
  const Tensor values = random_floats({key_batch, capacity, width});
  const std::vector<int32_t> lengths = {5, 1, 3, 5};
  // Rows 0 and 3 share a history (beams of one sentence); entries past a length are garbage, never read.
  std::vector<std::vector<int32_t>> rows = {{0, 2, 1, 1, 2}, {1, -7, 99, 0, 0}, {2, 0, 2, 1000, -1}, {0, 2, 1, 1, 2}};
  std::vector<int32_t> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  const Tensor key_rows = Tensor::from_ints({batch, capacity}, flat);
  const Tensor length_tensor = Tensor::from_ints({batch}, lengths);
  const Tensor got = ops::attention(query, keys, values, length_tensor, attention_options(2, 0.7f, &key_rows));
  const Tensor assembled_keys = assemble_keys(keys, rows, lengths);
  const Tensor assembled_values = assemble_keys(values, rows, lengths);
  const Tensor expected =
      ops::attention(query, assembled_keys, assembled_values, length_tensor, attention_options(2, 0.7f));
  CHECK(max_relative_error(got.to_float_vector(), expected.to_float_vector()) < kTolerance);
}

TEST_CASE("attention with key_rows [b, T] reads blocks: key j at (key_rows[b, j], j % block)", "[ops]") {
  const int64_t batch = 3, blocks = 6, block = 2, width = 8, table = 7;
  const Tensor query = random_floats({batch, 1, width});
  const Tensor keys = random_floats({blocks, block, width}), values = random_floats({blocks, block, width});
  const std::vector<int32_t> lengths = {7, 3, 5};
  // Each row's positions in blocks of 2: row 0 holds blocks 4, 0, 5, 1; past a length anything goes.
  const std::vector<int32_t> flat = {4, 4, 0, 0, 5, 5, 1,   2, 2, 3, -1, 99, 0, 0,   4, 4, 0, 0, 3, 77, 77};
  const Tensor key_rows = Tensor::from_ints({batch, table}, flat);
  const Tensor got = ops::attention(query, keys, values, Tensor::from_ints({batch}, lengths),
                                    attention_options(2, 0.5f, &key_rows));
  // The same keys laid out per row: [b, T, width].
  const std::vector<float> key_values = keys.to_float_vector(), value_values = values.to_float_vector();
  std::vector<float> row_keys(static_cast<size_t>(batch * table * width), 0.0f), row_values = row_keys;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < lengths[b]; ++j)
      for (int64_t c = 0; c < width; ++c) {
        const size_t from = static_cast<size_t>((flat[b * table + j] * block + j % block) * width + c);
        row_keys[static_cast<size_t>((b * table + j) * width + c)] = key_values[from];
        row_values[static_cast<size_t>((b * table + j) * width + c)] = value_values[from];
      }
  const Tensor expected = ops::attention(query, Tensor::from_floats({batch, table, width}, row_keys),
                                         Tensor::from_floats({batch, table, width}, row_values),
                                         Tensor::from_ints({batch}, lengths), attention_options(2, 0.5f));
  CHECK(max_relative_error(got.to_float_vector(), expected.to_float_vector()) < kTolerance);
}

TEST_CASE("attention with a key span reads each row's keys as a run of positions across batch rows", "[ops]") {
  // A pool of 5 batch rows of 3 positions (15 positions); query row b's keys start at row key_rows[b].
  const int64_t batch = 4, pool_rows = 5, block = 3, width = 8, span = 9;
  const Tensor query = random_floats({batch, 1, width});
  const Tensor keys = random_floats({pool_rows, block, width}), values = random_floats({pool_rows, block, width});
  const std::vector<int32_t> starts = {0, 3, 1, 4}, lengths = {9, 2, 7, 3};  // row 1 ends where row 4 ends
  const Tensor key_rows = Tensor::from_ints({batch}, starts);
  ops::AttentionOptions options = attention_options(2, 0.6f, &key_rows);
  options.key_span = span;
  const Tensor got = ops::attention(query, keys, values, Tensor::from_ints({batch}, lengths), options);
  // The same keys laid out per row: [b, span, width], run positions start * block + j.
  const std::vector<float> key_values = keys.to_float_vector(), value_values = values.to_float_vector();
  std::vector<float> row_keys(static_cast<size_t>(batch * span * width), 0.0f), row_values = row_keys;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < lengths[b]; ++j)
      for (int64_t c = 0; c < width; ++c) {
        const size_t from = static_cast<size_t>((starts[b] * block + j) * width + c);
        row_keys[static_cast<size_t>((b * span + j) * width + c)] = key_values[from];
        row_values[static_cast<size_t>((b * span + j) * width + c)] = value_values[from];
      }
  const Tensor expected = ops::attention(query, Tensor::from_floats({batch, span, width}, row_keys),
                                         Tensor::from_floats({batch, span, width}, row_values),
                                         Tensor::from_ints({batch}, lengths), attention_options(2, 0.6f));
  CHECK(max_relative_error(got.to_float_vector(), expected.to_float_vector()) < kTolerance);

  // A run past the pool's last position, a span without rank-1 rows, and a negative span are errors.
  const Tensor too_long = Tensor::from_ints({batch}, {9, 2, 7, 4});
  CHECK_THROWS_AS(ops::attention(query, keys, values, too_long, options), Error);
  const Tensor per_key = Tensor::from_ints({batch, 2}, std::vector<int32_t>(8, 0));
  ops::AttentionOptions bad = attention_options(2, 0.6f, &per_key);
  bad.key_span = span;
  CHECK_THROWS_AS(ops::attention(query, keys, values, Tensor::from_ints({batch}, lengths), bad), Error);
  ops::AttentionOptions negative = options;
  negative.key_span = -1;
  CHECK_THROWS_AS(ops::attention(query, keys, values, Tensor::from_ints({batch}, lengths), negative), Error);
}

TEST_CASE("attention rejects bad key_rows", "[ops]") {
  const Tensor query = random_floats({2, 1, 4}), keys = random_floats({3, 5, 4}), values = random_floats({3, 5, 4});
  const Tensor lengths = Tensor::from_ints({2}, {5, 2});
  const auto run = [&](const Tensor& query_in, const Tensor& rows) {
    return ops::attention(query_in, keys, values, lengths, attention_options(1, 1.0f, &rows));
  };
  CHECK_NOTHROW(run(query, Tensor::from_ints({2}, {2, 0})));
  CHECK_THROWS_AS(run(query, random_floats({2})), Error);                       // not int32
  CHECK_THROWS_AS(run(query, Tensor::from_ints({3}, {0, 1, 2})), Error);        // not one per query row
  CHECK_NOTHROW(run(query, Tensor::from_ints({2, 7}, std::vector<int32_t>(14, 0))));  // blocks of 5, T = 7
  CHECK_THROWS_AS(run(query, Tensor::from_ints({2, 5, 1}, std::vector<int32_t>(10, 0))), Error);  // rank 3
  CHECK_THROWS_AS(run(random_floats({2, 2, 4}), Tensor::from_ints({2, 5}, std::vector<int32_t>(10, 0))),
                  Error);                                                        // per key needs tq = 1
  CHECK_THROWS_AS(run(query, Tensor::from_ints({2}, {3, 0})), Error);           // outside keys' 3 rows
  CHECK_THROWS_AS(run(query, Tensor::from_ints({2}, {0, -1})), Error);
  CHECK_THROWS_AS(run(query, Tensor::from_ints({2, 5}, {0, 0, 0, 0, 0, 0, 3, 0, 0, 0})), Error);  // row 1, key 1
  // Past row 1's length 2 anything goes.
  CHECK_NOTHROW(run(query, Tensor::from_ints({2, 5}, {0, 0, 0, 0, 0, 0, 2, -5, 77, 3})));
  // Without key_rows the batch extents must still agree.
  CHECK_THROWS_AS(ops::attention(query, keys, values, lengths, attention_options(1, 1.0f)), Error);
}

namespace {

// The reference for one cache: cache[s, positions[s], :] = rows[s, :].
void write_rows(Tensor& cache, const Tensor& rows, const std::vector<int32_t>& positions) {
  const int64_t capacity = cache.dim(1), width = cache.dim(2);
  const std::vector<float> values = rows.to_float_vector();
  float* out = cache.data<float>();
  for (size_t s = 0; s < positions.size(); ++s)
    for (int64_t c = 0; c < width; ++c)
      out[(static_cast<int64_t>(s) * capacity + positions[s]) * width + c] = values[s * width + c];
}

}  // namespace

TEST_CASE("append_self_attention_step equals add_bias_split and two row writes, and records the slot", "[ops]") {
  const int64_t slots = 3, width = 4, capacity = 5;
  const Tensor qkv = random_floats({slots, 3 * width}), bias = random_floats({3 * width});
  const Tensor key_cache = random_floats({slots, capacity, width});
  const Tensor value_cache = random_floats({slots, capacity, width});
  const std::vector<int32_t> position_values = {2, 0, 4};
  const Tensor positions = Tensor::from_ints({slots}, position_values);
  Tensor keys = key_cache.to(Device::CPU), values = value_cache.to(Device::CPU);
  Tensor history = Tensor::from_ints({slots, capacity}, std::vector<int32_t>(slots * capacity, -5));
  const Tensor query = ops::append_self_attention_step(qkv, bias, positions, keys, values, history);

  const std::vector<Tensor> parts = ops::add_bias_split(qkv, bias, 3);
  Tensor expected_keys = key_cache.to(Device::CPU), expected_values = value_cache.to(Device::CPU);
  write_rows(expected_keys, parts[1], position_values);
  write_rows(expected_values, parts[2], position_values);
  REQUIRE(query.shape() == Shape{slots, width});
  CHECK(query.to_float_vector() == parts[0].to_float_vector());
  CHECK(keys.to_float_vector() == expected_keys.to_float_vector());
  CHECK(values.to_float_vector() == expected_values.to_float_vector());
  CHECK(keys.to_float_vector() != key_cache.to_float_vector());
  const std::vector<int32_t> rows = history.to_int_vector();
  for (int64_t s = 0; s < slots; ++s)
    for (int64_t j = 0; j < capacity; ++j) CHECK(rows[s * capacity + j] == (j == position_values[s] ? s : -5));

  // A position outside the cache throws and writes nothing.
  const auto keys_before = keys.to_float_vector();
  const auto history_before = history.to_int_vector();
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, Tensor::from_ints({slots}, {1, 5, 0}), keys, values,
                                                  history),
                  Error);
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, Tensor::from_ints({slots}, {-1, 0, 0}), keys, values,
                                                  history),
                  Error);
  CHECK(keys.to_float_vector() == keys_before);
  CHECK(history.to_int_vector() == history_before);

  // Shapes and dtypes.
  Tensor short_history = Tensor::from_ints({slots, capacity - 1}, std::vector<int32_t>(slots * (capacity - 1), 0));
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, positions, keys, values, short_history), Error);
  Tensor float_history = random_floats({slots, capacity});
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, positions, keys, values, float_history), Error);
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, random_floats({2 * width}), positions, keys, values, history),
                  Error);
  CHECK_THROWS_AS(ops::append_self_attention_step(random_floats({slots, 3 * width + 1}), random_floats({3 * width + 1}),
                                                  positions, keys, values, history),
                  Error);
  Tensor narrow_values = random_floats({slots, capacity, width - 1});
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, positions, keys, narrow_values, history), Error);
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, Tensor::from_ints({2}, {0, 0}), keys, values, history),
                  Error);
}

// The step from its input (ops::project_self_attention_step): on the CPU the normalized product then the
// append, the same values as those two ops, for each norm; a product with a bias, or two norms, is refused.
TEST_CASE("project_self_attention_step equals the normalized product then append_self_attention_step", "[ops]") {
  const int64_t slots = 2, d = 16, heads = 4, kv_heads = 2, head_dim = 4, capacity = 6;
  const int64_t queries = heads * head_dim, kv = kv_heads * head_dim, n = queries + 2 * kv;
  const Tensor x = random_floats({slots, d}, -2.0f, 2.0f), weight = random_floats({n, d}, -0.5f, 0.5f);
  const Tensor gamma = random_floats({d}, 0.5f, 1.5f), beta = random_floats({d}), bias = random_floats({n});
  const Tensor table = ops::rotary_table(capacity, head_dim, 10000.0f, Device::CPU);
  const Tensor positions = Tensor::from_ints({slots}, {4, 1});
  const ops::LayerNormWeights layer_norm{gamma, beta, 1e-5f};
  const ops::RmsNormWeights rms_norm{gamma, 1e-6f};
  const Tensor keys_before = random_floats({slots, capacity, kv}), values_before = random_floats({slots, capacity, kv});
  for (int norm_kind = 0; norm_kind < 3; ++norm_kind) {
    CAPTURE(norm_kind);
    ops::InputNorm norm;
    if (norm_kind == 1) norm.layer = &layer_norm;
    if (norm_kind == 2) norm.rms = &rms_norm;
    ops::SelfAttentionStepOptions options;
    options.query_width = queries;
    options.rotary_shape = {static_cast<int>(heads), static_cast<int>(kv_heads)};
    if (norm_kind == 2) options.rotary = &table;  // Llama's: rotary positions, no bias
    if (norm_kind != 2) options.bias = &bias;
    Tensor keys = keys_before.to(Device::CPU), values = values_before.to(Device::CPU);
    Tensor history = Tensor::from_ints({slots, capacity}, std::vector<int32_t>(slots * capacity, -1));
    const Tensor query = ops::project_self_attention_step(x, norm, weight, {}, {positions, keys, values, history}, options);
    const Tensor normalized = norm_kind == 1 ? ops::layer_norm(x, layer_norm) : norm_kind == 2 ? ops::rms_norm(x, rms_norm) : x;
    Tensor expected_keys = keys_before.to(Device::CPU), expected_values = values_before.to(Device::CPU);
    Tensor expected_history = Tensor::from_ints({slots, capacity}, std::vector<int32_t>(slots * capacity, -1));
    const Tensor expected = ops::append_self_attention_step(ops::matmul(normalized, weight), positions, expected_keys,
                                                            expected_values, expected_history, options);
    CHECK(query.to_float_vector() == expected.to_float_vector());
    CHECK(keys.to_float_vector() == expected_keys.to_float_vector());
    CHECK(values.to_float_vector() == expected_values.to_float_vector());
    CHECK(history.to_int_vector() == expected_history.to_int_vector());
    CHECK(keys.to_float_vector() != keys_before.to_float_vector());
  }
  Tensor keys = keys_before.to(Device::CPU), values = values_before.to(Device::CPU);
  Tensor history = Tensor::from_ints({slots, capacity}, std::vector<int32_t>(slots * capacity, -1));
  ops::SelfAttentionStepOptions options;
  options.query_width = queries;
  ops::MatmulOptions with_bias;
  with_bias.bias = &bias;
  CHECK_THROWS_AS(ops::project_self_attention_step(x, {}, weight, with_bias, {positions, keys, values, history}, options),
                  Error);
  CHECK_THROWS_AS(ops::project_self_attention_step(x, {&layer_norm, &rms_norm}, weight, {},
                                                   {positions, keys, values, history}, options),
                  Error);
  CHECK_THROWS_AS(ops::project_self_attention_step(x, {}, random_floats({n + 1, d}), {}, {positions, keys, values, history},
                                                   options),
                  Error);
}

TEST_CASE("copy copies every byte and checks shape and dtype", "[ops]") {
  const Tensor src = random_floats({3, 4, 5});
  Tensor dst = random_floats({3, 4, 5});
  ops::copy(src, dst);
  CHECK(dst.to_float_vector() == src.to_float_vector());
  const Tensor ints = random_ints({2, 7}, -100, 100);
  Tensor int_dst = Tensor::from_ints({2, 7}, std::vector<int32_t>(14, 0));
  ops::copy(ints, int_dst);
  CHECK(int_dst.to_int_vector() == ints.to_int_vector());
  Tensor reshaped = random_floats({4, 3, 5});
  CHECK_THROWS_AS(ops::copy(src, reshaped), Error);
  Tensor int_same_shape = random_ints({3, 4, 5}, 0, 1);
  CHECK_THROWS_AS(ops::copy(src, int_same_shape), Error);
}

TEST_CASE("copy_row_prefixes copies each row's written positions and leaves the rest of dst", "[ops]") {
  // Rank 2: a history table [n, m] moved to a longer capacity, row i up to lengths[i].
  const Tensor table = random_ints({3, 4}, 0, 9);
  Tensor longer = Tensor::from_ints({3, 7}, std::vector<int32_t>(21, -1));
  ops::copy_row_prefixes(table, nullptr, Tensor::from_ints({3}, {4, 0, 2}), longer);
  const auto tv = table.to_int_vector(), lv = longer.to_int_vector();
  const int lengths[] = {4, 0, 2};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 7; ++j) CHECK(lv[i * 7 + j] == (j < lengths[i] ? tv[i * 4 + j] : -1));

  // Rank 3 through an index: dst row i takes src row index[i]; rows past the lengths stay.
  const Tensor cache = random_floats({2, 3, 4});
  const Tensor before = random_floats({3, 5, 4});
  Tensor grown = before.to(Device::CPU);
  const Tensor second_row = Tensor::from_ints({2}, {1, 1});
  ops::copy_row_prefixes(cache, &second_row, Tensor::from_ints({2}, {3, 1}), grown);
  const auto cv = cache.to_float_vector(), gv = grown.to_float_vector(), bv = before.to_float_vector();
  const int copied[] = {3, 1, 0};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      for (int c = 0; c < 4; ++c)
        CHECK(gv[(i * 5 + j) * 4 + c] == (j < copied[i] ? cv[(3 + j) * 4 + c] : bv[(i * 5 + j) * 4 + c]));

  // A shorter destination takes what fits.
  Tensor shorter = random_floats({2, 2, 4});
  ops::copy_row_prefixes(cache, nullptr, Tensor::from_ints({2}, {2, 2}), shorter);
  const auto sv = shorter.to_float_vector();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 8; ++k) CHECK(sv[i * 8 + k] == cv[i * 12 + k]);

  const Tensor two = Tensor::from_ints({2}, {1, 1});
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, nullptr, Tensor::from_ints({2}, {3, 3}), shorter), Error);
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, nullptr, Tensor::from_ints({2}, {-1, 0}), shorter), Error);
  const Tensor past_src = Tensor::from_ints({2}, {0, 2}), too_few = Tensor::from_ints({1}, {0});
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, &past_src, two, shorter), Error);
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, &too_few, two, shorter), Error);
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, nullptr, Tensor::from_ints({3}, {1, 1, 1}), grown), Error);
  Tensor wider = random_floats({2, 5, 5});
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, nullptr, two, wider), Error);
  Tensor int_grown = random_ints({2, 5, 4}, 0, 1);
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, nullptr, two, int_grown), Error);
  Tensor rank2 = random_floats({2, 20});
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, nullptr, two, rank2), Error);
  CHECK_THROWS_AS(ops::copy_row_prefixes(cache, nullptr, Tensor::from_floats({2}, {1, 1}), shorter), Error);
}

TEST_CASE("append_self_attention_step with cache rows writes each slot's pool row, and none for padding", "[ops]") {
  const int64_t slots = 3, width = 4, capacity = 5, pool_rows = 6;
  const Tensor qkv = random_floats({slots, 3 * width}), bias = random_floats({3 * width});
  const Tensor key_cache = random_floats({pool_rows, capacity, width});
  const Tensor positions = Tensor::from_ints({slots}, {2, 0, 4});
  const Tensor cache_rows = Tensor::from_ints({slots}, {5, -1, 1});  // slot 1 is a graph's padding row
  Tensor keys = key_cache.to(Device::CPU), values = random_floats({pool_rows, capacity, width});
  Tensor history = Tensor::from_ints({slots, capacity}, std::vector<int32_t>(slots * capacity, -5));
  const Tensor query = ops::append_self_attention_step(qkv, bias, positions, keys, values, history, &cache_rows);

  const std::vector<Tensor> parts = ops::add_bias_split(qkv, bias, 3);
  CHECK(query.to_float_vector() == parts[0].to_float_vector());
  const std::vector<float> got = keys.to_float_vector(), before = key_cache.to_float_vector();
  const std::vector<float> expected_keys = parts[1].to_float_vector();
  const auto cell = [&](int64_t row, int64_t position) { return (row * capacity + position) * width; };
  for (int64_t c = 0; c < width; ++c) {
    CHECK(got[cell(5, 2) + c] == expected_keys[0 * width + c]);
    CHECK(got[cell(1, 4) + c] == expected_keys[2 * width + c]);
  }
  // Nothing else changed: the padding row wrote nothing, and slot s did not write row s.
  size_t changed = 0;
  for (size_t i = 0; i < got.size(); ++i) changed += got[i] != before[i];
  CHECK(changed == static_cast<size_t>(2 * width));
  const std::vector<int32_t> entries = history.to_int_vector();
  CHECK(entries[0 * capacity + 2] == 5);
  CHECK(entries[2 * capacity + 4] == 1);
  CHECK(std::count(entries.begin(), entries.end(), -5) == static_cast<long>(slots * capacity - 2));

  const Tensor outside = Tensor::from_ints({slots}, {6, 0, 1});
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, positions, keys, values, history, &outside), Error);
  const Tensor short_rows = Tensor::from_ints({2}, {0, 1});
  CHECK_THROWS_AS(ops::append_self_attention_step(qkv, bias, positions, keys, values, history, &short_rows), Error);
}

TEST_CASE("scatter_prefix moves each row into its pool row and leaves the others", "[ops]") {
  const Tensor src = random_floats({3, 2, 4});
  const Tensor pool = random_floats({5, 6, 4});
  Tensor dst = pool.to(Device::CPU);
  const Tensor rows = Tensor::from_ints({3}, {4, 0, 2});
  ops::scatter_prefix(src, rows, dst);
  const std::vector<float> got = dst.to_float_vector(), before = pool.to_float_vector(), in = src.to_float_vector();
  const int32_t targets[] = {4, 0, 2};
  for (int64_t row = 0; row < 5; ++row)
    for (int64_t t = 0; t < 6; ++t)
      for (int64_t c = 0; c < 4; ++c) {
        const size_t at = static_cast<size_t>((row * 6 + t) * 4 + c);
        float want = before[at];
        for (int64_t i = 0; i < 3; ++i)
          if (targets[i] == row && t < 2) want = in[static_cast<size_t>((i * 2 + t) * 4 + c)];
        CHECK(got[at] == want);
      }
  const Tensor outside = Tensor::from_ints({3}, {4, 5, 2});
  CHECK_THROWS_AS(ops::scatter_prefix(src, outside, dst), Error);
  Tensor narrow = random_floats({5, 1, 4});
  CHECK_THROWS_AS(ops::scatter_prefix(src, rows, narrow), Error);
  Tensor wider = random_floats({5, 6, 5});
  CHECK_THROWS_AS(ops::scatter_prefix(src, rows, wider), Error);
  CHECK_THROWS_AS(ops::scatter_prefix(src, Tensor::from_ints({2}, {0, 1}), dst), Error);
}

// The Llama-style ops on the CUDA device against the CPU reference, fp32 and fp16 (the CPU given the same
// fp16-rounded inputs), plus the rotary embedding's fp16 rounding against Hugging Face's order bit for bit.
#include "catch.h"
#include "core/device.h"

#ifdef SEQTRANS_WITH_CUDA

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/batch_invariance.h"
#include "core/dtype.h"
#include "cuda/runtime/context.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/gpu_operands.h"
#include "support/attention_heads.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

// GQA ratios 1, 2 and 4 at head sizes 64 and 128; then head sizes the kernels take with scalar loads (30;
// 20 in fp16) and 256.
const Heads kHeadShapes[] = {{4, 4, 64},  {4, 2, 64}, {8, 2, 64}, {2, 2, 128}, {4, 2, 128},
                             {4, 1, 128}, {4, 2, 20}, {6, 3, 30}, {2, 1, 256}};

// Rounds to fp16 and back, on the host.
float half_round(float x) { return half_to_float(float_to_half(x)); }

}  // namespace

TEST_CASE("cuda rms_norm and add_residual_rms_norm match the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // Widths: scalar loads (33), one vector a thread up to 1024 threads, then 2 (fp16 16384), 4 and 8 (fp32 20000).
  const int64_t shapes[][2] = {{1, 64}, {7, 33}, {33, 4096}, {5, 5000}, {2, 16384}, {3, 20000}, {9, 2048}};
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes) {
      const int64_t rows = shape[0], width = shape[1];
      CAPTURE(dtype_name(dtype), rows, width);
      const Operand x = random_operand({rows, width}, dtype, -3.0f, 3.0f);
      const Operand residual = random_operand({rows, width}, dtype);
      const Operand weight = random_operand({width}, dtype, 0.5f, 1.5f);
      const float epsilon = 1e-5f;
      const Tensor expected = ops::rms_norm(x.cpu, {weight.cpu, epsilon});
      const Tensor got = ops::rms_norm(x.gpu, {weight.gpu, epsilon});
      CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
      const ops::ResidualNorm expected_fused = ops::add_residual_rms_norm(x.cpu, residual.cpu, {weight.cpu, epsilon});
      const ops::ResidualNorm got_fused = ops::add_residual_rms_norm(x.gpu, residual.gpu, {weight.gpu, epsilon});
      CHECK(max_relative_error(values_of(got_fused.sum), expected_fused.sum.to_float_vector()) < tolerance(dtype));
      CHECK(max_relative_error(values_of(got_fused.normalized), expected_fused.normalized.to_float_vector()) <
            tolerance(dtype));
    }
}

TEST_CASE("cuda gated_activation matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t shapes[][2] = {{1, 8}, {7, 11}, {33, 1376}, {64, 11008}, {3, 4}};  // rows, f
  for (DataType dtype : kFloatTypes)
    for (const auto& shape : shapes) {
      CAPTURE(dtype_name(dtype), shape[0], shape[1]);
      const Operand gate_up = random_operand({shape[0], 2 * shape[1]}, dtype, -6.0f, 6.0f);
      const Tensor expected = ops::gated_activation(gate_up.cpu);
      const Tensor got = ops::gated_activation(gate_up.gpu);
      REQUIRE(got.shape() == expected.shape());
      CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
    }
}

// fp32: the CPU's arithmetic exactly (each product and sum rounded on its own). fp16: Hugging Face's
// apply_rotary_pos_emb on fp16 tensors, done here on the host: cos and sin cast to fp16, q * cos and
// rotate_half(q) * sin each rounded to fp16, their sum rounded to fp16.
TEST_CASE("cuda apply_rotary_embedding equals the CPU in fp32 and HF's fp16 rounding, bit for bit", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const int64_t max_positions = 4096;
  for (const Heads& shape : kHeadShapes)
    for (const int64_t tokens : {1, 9, 33}) {
      const int64_t width = shape.width() + 2 * shape.kv_width(), half = shape.head_dim / 2;
      const Tensor table = ops::rotary_table(max_positions, shape.head_dim, 500000.0f, Device::CPU);
      const Tensor table_gpu = ops::rotary_table(max_positions, shape.head_dim, 500000.0f, Device::CUDA);
      CHECK(values_of(table_gpu) == table.to_float_vector());
      std::vector<int32_t> at = random_ints({tokens}, 0, static_cast<int32_t>(max_positions - 1)).to_int_vector();
      at[0] = static_cast<int32_t>(max_positions - 1);
      const Tensor positions = Tensor::from_ints({tokens}, at);
      for (DataType dtype : kFloatTypes) {
        CAPTURE(shape.heads, shape.kv_heads, shape.head_dim, tokens, dtype_name(dtype));
        const Operand qkv = random_operand({tokens, width}, dtype, -4.0f, 4.0f);
        Tensor got = qkv.gpu.to(Device::CUDA);
        ops::apply_rotary_embedding(got, positions.to(Device::CUDA), table_gpu, {shape.heads, shape.kv_heads});
        if (dtype == DataType::F32) {
          Tensor expected = qkv.cpu.to(Device::CPU);
          ops::apply_rotary_embedding(expected, positions, table, {shape.heads, shape.kv_heads});
          CHECK(values_of(got) == expected.to_float_vector());
          continue;
        }
        const std::vector<float> in = qkv.cpu.to_float_vector(), cos_sin = table.to_float_vector();
        std::vector<float> expected = in;
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t head = 0; head < shape.heads + shape.kv_heads; ++head)
            for (int64_t c = 0; c < shape.head_dim; ++c) {
              const int64_t i = c % half, base = t * width + head * shape.head_dim;
              const float rotated = c < half ? -in[base + c + half] : in[base + c - half];
              const float cos = half_round(cos_sin[at[t] * shape.head_dim + i]);
              const float sin = half_round(cos_sin[at[t] * shape.head_dim + half + i]);
              expected[base + c] = half_round(half_round(in[base + c] * cos) + half_round(rotated * sin));
            }
        CHECK(values_of(got) == expected);
      }
    }
}

// Query rows attend through each addressing the model uses, with kv heads: their own batch row and one
// batch row per query row (warp decode at tq 1 and 3, or block decode where loads are scalar: head size 30,
// and 20 in fp16; tiled at tq 37), the block-paged cache (rank-2 key_rows over blocks of 16), and the packed
// causal prefill (key span).
TEST_CASE("cuda attention with kv heads matches the CPU for every key addressing", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  enum class Mode { Plain, PerRow, Paged, Packed };
  for (DataType dtype : kFloatTypes)
    for (const Heads& shape : kHeadShapes)
      for (Mode mode : {Mode::Plain, Mode::PerRow, Mode::Paged, Mode::Packed})
        for (const int64_t query_len : {1, 3, 37}) {
          if ((mode == Mode::Paged || mode == Mode::Packed) && query_len > 1) continue;
          const int mode_index = static_cast<int>(mode);
          CAPTURE(dtype_name(dtype), shape.heads, shape.kv_heads, shape.head_dim, mode_index, query_len);
          const int64_t batch = mode == Mode::Packed ? 41 : 7;  // packed: prompts of 1, 2, ..., 8 tokens, and 5
          const int64_t block = mode == Mode::Paged ? 16 : mode == Mode::Packed ? 1 : 45;
          const int64_t key_batch = mode == Mode::Paged ? 12 : mode == Mode::Packed ? 41 : mode == Mode::PerRow ? 4 : 7;
          const int64_t table_width = 64;  // paged: positions a history row holds
          std::vector<int32_t> lengths, rows;
          if (mode == Mode::Packed) {
            for (int32_t prompt = 1, start = 0; start < batch; start += prompt, ++prompt)
              for (int32_t t = 0; t < prompt && start + t < batch; ++t) {
                rows.push_back(start);
                lengths.push_back(t + 1);
              }
          } else {
            const int32_t longest = static_cast<int32_t>(mode == Mode::Paged ? table_width : block);
            lengths = random_ints({batch}, 1, longest).to_int_vector();
            lengths[0] = longest;
            lengths[1] = 1;
            lengths[2] = 0;
            const int32_t last_row = static_cast<int32_t>(key_batch - 1);
            if (mode == Mode::PerRow) rows = random_ints({batch}, 0, last_row).to_int_vector();
            if (mode == Mode::Paged)
              rows = random_ints({batch, table_width}, 0, last_row).to_int_vector();
          }
          std::vector<bool> read(static_cast<size_t>(key_batch * block), false);
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t j = 0; j < lengths[b]; ++j) {
              const int64_t row = mode == Mode::Plain ? b : mode == Mode::Paged ? rows[b * table_width + j] : rows[b];
              read[mode == Mode::Paged ? row * block + j % block : row * block + j] = true;
            }
          const Operand query = random_operand({batch, query_len, shape.width()}, dtype);
          const Operand keys = upload(poisoned_floats(key_batch, block, shape.kv_width(), read), dtype);
          const Operand values = upload(poisoned_floats(key_batch, block, shape.kv_width(), read), dtype);
          Tensor rows_cpu, rows_gpu;
          if (mode != Mode::Plain) {
            rows_cpu = Tensor::from_ints(mode == Mode::Paged ? Shape{batch, table_width} : Shape{batch}, rows);
            rows_gpu = rows_cpu.to(Device::CUDA);
          }
          ops::AttentionOptions cpu_options = gqa_options(shape, mode == Mode::Plain ? nullptr : &rows_cpu);
          ops::AttentionOptions gpu_options = gqa_options(shape, mode == Mode::Plain ? nullptr : &rows_gpu);
          if (mode == Mode::Packed) cpu_options.key_span = gpu_options.key_span = 8;
          const Tensor lengths_cpu = Tensor::from_ints({batch}, lengths);
          const Tensor expected = ops::attention(query.cpu, keys.cpu, values.cpu, lengths_cpu, cpu_options);
          const Tensor got =
              ops::attention(query.gpu, keys.gpu, values.gpu, lengths_cpu.to(Device::CUDA), gpu_options);
          CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
        }
}

// Rows of their own in tiles that share their keys (AttentionOptions::query_tiles): the packed encoder's
// sentences (rank-1 key_rows, a key span) and a prefill pass's prompt chunks (a history table per token,
// causal lengths). fp16 of head size 64 runs on tensor cores; the CPU ignores the tiles. A row's bits must not
// depend on how the rows are tiled (one row a tile against the runs' tiles).
TEST_CASE("cuda attention by query tiles matches the CPU and does not depend on the tiling", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const Heads shapes[] = {{16, 16, 64}, {8, 2, 64}, {4, 2, 128}};
  for (DataType dtype : kFloatTypes)
    for (const Heads& shape : shapes)
      for (const bool prefill : {false, true}) {
        CAPTURE(dtype_name(dtype), shape.heads, shape.kv_heads, shape.head_dim, prefill);
        // Encoder: sentences of these lengths. Prefill: prompts that wrote `written` tokens before and take
        // `runs` now, their keys in blocks of 16 positions (prompt p owns blocks p * 9 on).
        const std::vector<int32_t> runs = prefill ? std::vector<int32_t>{70, 1, 66, 54, 17}
                                                  : std::vector<int32_t>{1, 63, 64, 65, 150, 7};
        const std::vector<int32_t> written = {0, 0, 64, 10, 3};
        constexpr int64_t kBlock = 16, kBlocksPerPrompt = 9;
        int64_t rows_total = 0, widest = 0;
        for (size_t p = 0; p < runs.size(); ++p) {
          rows_total += runs[p];
          widest = std::max<int64_t>(widest, (prefill ? written[p] : 0) + runs[p]);
        }
        const int64_t key_batch = prefill ? static_cast<int64_t>(runs.size()) * kBlocksPerPrompt : rows_total;
        const int64_t block = prefill ? kBlock : 1;
        std::vector<int32_t> lengths, rows;
        std::vector<bool> read(static_cast<size_t>(key_batch * block), !prefill);
        for (int32_t p = 0, start = 0; p < static_cast<int32_t>(runs.size()); start += runs[p], ++p)
          for (int32_t t = 0; t < runs[p]; ++t) {
            if (!prefill) {
              rows.push_back(start);
              lengths.push_back(runs[p]);
              continue;
            }
            lengths.push_back(written[p] + t + 1);
            for (int64_t j = 0; j < widest; ++j) {
              const int32_t row = static_cast<int32_t>(p * kBlocksPerPrompt + j / kBlock);
              rows.push_back(row);
              if (j < written[p] + runs[p]) read[static_cast<size_t>(row * kBlock + j % kBlock)] = true;
            }
          }
        const Operand query = random_operand({rows_total, 1, shape.width()}, dtype);
        const Operand keys = upload(poisoned_floats(key_batch, block, shape.kv_width(), read), dtype);
        const Operand values = upload(poisoned_floats(key_batch, block, shape.kv_width(), read), dtype);
        const Tensor rows_cpu = Tensor::from_ints(prefill ? Shape{rows_total, widest} : Shape{rows_total}, rows);
        const Tensor rows_gpu = rows_cpu.to(Device::CUDA);
        const Tensor lengths_cpu = Tensor::from_ints({rows_total}, lengths);
        const Tensor lengths_gpu = lengths_cpu.to(Device::CUDA);
        ops::AttentionOptions cpu_options = gqa_options(shape, &rows_cpu), gpu_options = gqa_options(shape, &rows_gpu);
        if (!prefill) cpu_options.key_span = gpu_options.key_span = widest;
        const Tensor tiles = ops::attention_query_tiles(runs, Device::CUDA);
        const Tensor single_rows = ops::attention_query_tiles(std::vector<int32_t>(rows_total, 1), Device::CUDA);
        cpu_options.query_tiles = &single_rows;  // on the wrong device: the CPU must refuse it
        CHECK_THROWS(ops::attention(query.cpu, keys.cpu, values.cpu, lengths_cpu, cpu_options));
        const Tensor host_tiles = ops::attention_query_tiles(runs, Device::CPU);
        cpu_options.query_tiles = &host_tiles;
        const Tensor expected = ops::attention(query.cpu, keys.cpu, values.cpu, lengths_cpu, cpu_options);
        gpu_options.query_tiles = &tiles;
        const std::vector<float> tiled = values_of(ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu, gpu_options));
        CHECK(max_relative_error(tiled, expected.to_float_vector()) < tolerance(dtype));
        gpu_options.query_tiles = &single_rows;
        const std::vector<float> alone = values_of(ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu, gpu_options));
        CHECK(std::memcmp(tiled.data(), alone.data(), tiled.size() * sizeof(float)) == 0);
      }
}

// Decode rows of grouped-query models (4, 8 and 16 query heads a kv head; fp16 head size 64 runs on tensor
// cores, the heads of a kv head together) over paged keys up to 300 long, against the CPU; and in
// batch-invariant mode, where that kernel runs at any batch, each row's bits alone equal its bits in the batch
// (the key split is fixed). Outside it the kernel runs from a block for every two multiprocessors: 40 rows of
// 2 or 4 kv heads take it, of 1 kv head the CUDA-core kernel.
TEST_CASE("cuda grouped-query decode attention matches the CPU and keeps a row's bits at any batch", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  const Heads shapes[] = {{8, 2, 64}, {32, 4, 64}, {16, 1, 64}, {8, 2, 128}};
  constexpr int64_t kRows = 40, kBlock = 16, kTable = 300;
  for (const bool invariant : {false, true}) {
    for (DataType dtype : kFloatTypes)
      for (const Heads& shape : shapes) {
        CAPTURE(invariant, dtype_name(dtype), shape.heads, shape.kv_heads, shape.head_dim);
        const BatchInvariantScope arithmetic(invariant);
        const int64_t key_batch = kRows * (kTable / kBlock + 1);
        std::vector<int32_t> lengths = random_ints({kRows}, 1, kTable).to_int_vector();
        lengths[0] = kTable;
        lengths[1] = 1;
        lengths[2] = 0;
        lengths[3] = 129;  // one key past four warps' first tiles
        // Row r's position j in block (r * 19 + j / 16) of the pool: every row its own blocks.
        std::vector<int32_t> table(static_cast<size_t>(kRows * kTable));
        std::vector<bool> read(static_cast<size_t>(key_batch * kBlock), false);
        for (int64_t r = 0; r < kRows; ++r)
          for (int64_t j = 0; j < kTable; ++j) {
            const int32_t block = static_cast<int32_t>(r * (kTable / kBlock + 1) + j / kBlock);
            table[static_cast<size_t>(r * kTable + j)] = block;
            if (j < lengths[r]) read[static_cast<size_t>(block * kBlock + j % kBlock)] = true;
          }
        const Operand query = random_operand({kRows, 1, shape.width()}, dtype);
        const Operand keys = upload(poisoned_floats(key_batch, kBlock, shape.kv_width(), read), dtype);
        const Operand values = upload(poisoned_floats(key_batch, kBlock, shape.kv_width(), read), dtype);
        const Tensor table_cpu = Tensor::from_ints({kRows, kTable}, table), table_gpu = table_cpu.to(Device::CUDA);
        const Tensor lengths_cpu = Tensor::from_ints({kRows}, lengths), lengths_gpu = lengths_cpu.to(Device::CUDA);
        const Tensor expected =
            ops::attention(query.cpu, keys.cpu, values.cpu, lengths_cpu, gqa_options(shape, &table_cpu));
        const std::vector<float> batch =
            values_of(ops::attention(query.gpu, keys.gpu, values.gpu, lengths_gpu, gqa_options(shape, &table_gpu)));
        CHECK(max_relative_error(batch, expected.to_float_vector()) < tolerance(dtype));
        // The CUDA-core decode kernels split keys by the batch's size outside batch-invariant mode.
        if (!invariant || dtype != DataType::F16 || shape.head_dim != 64) continue;
        for (const int64_t r : {int64_t{0}, int64_t{3}, kRows - 1}) {
          CAPTURE(r);
          const Tensor row_table = table_gpu.slice_rows(r, r + 1);
          const std::vector<float> alone =
              values_of(ops::attention(query.gpu.slice_rows(r, r + 1), keys.gpu, values.gpu,
                                       lengths_gpu.slice_rows(r, r + 1), gqa_options(shape, &row_table)));
          const size_t width = static_cast<size_t>(shape.width());
          CHECK(std::memcmp(alone.data(), batch.data() + static_cast<size_t>(r) * width, width * sizeof(float)) == 0);
        }
      }
  }
}

TEST_CASE("cuda append_self_attention_step with GQA widths, no bias and history rows matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  for (DataType dtype : kFloatTypes)
    for (const Heads& shape : kHeadShapes)
      for (const bool with_bias : {false, true}) {
        CAPTURE(dtype_name(dtype), shape.heads, shape.kv_heads, shape.head_dim, with_bias);
        const int64_t slots = 9, block = 16, blocks = 12, table_width = 40;
        const int64_t width = shape.width() + 2 * shape.kv_width();
        const Operand qkv = random_operand({slots, width}, dtype);
        const Operand bias = random_operand({width}, dtype);
        const Operand key_cache = random_operand({blocks, block, shape.kv_width()}, dtype);
        const Operand value_cache = random_operand({blocks, block, shape.kv_width()}, dtype);
        const Tensor history = random_ints({3, table_width}, -9, -1);
        // Slots 0-4: a prompt's tokens 14-18 (across a block edge) into history row 2; 5-7 one step each of rows
        // 0 and 1, and a padding slot; 8 a position outside the table (skipped on the GPU: not compared).
        const Tensor positions = Tensor::from_ints({slots - 1}, {14, 15, 16, 17, 18, 3, 20, 0});
        const Tensor cache_rows = Tensor::from_ints({slots - 1}, {7, 7, 2, 2, 2, 0, 11, -1});
        const Tensor history_rows = Tensor::from_ints({slots - 1}, {2, 2, 2, 2, 2, 0, 1, 1});
        const Operand rows_qkv{qkv.cpu.slice_rows(0, slots - 1), qkv.gpu.slice_rows(0, slots - 1)};
        ops::SelfAttentionStepOptions cpu_options, gpu_options;
        cpu_options.query_width = gpu_options.query_width = shape.width();
        cpu_options.bias = with_bias ? &bias.cpu : nullptr;
        gpu_options.bias = with_bias ? &bias.gpu : nullptr;
        cpu_options.cache_rows = &cache_rows;
        cpu_options.history_rows = &history_rows;
        const Tensor cache_rows_gpu = cache_rows.to(Device::CUDA), history_rows_gpu = history_rows.to(Device::CUDA);
        gpu_options.cache_rows = &cache_rows_gpu;
        gpu_options.history_rows = &history_rows_gpu;
        Tensor expected_keys = key_cache.cpu.to(Device::CPU), expected_values = value_cache.cpu.to(Device::CPU);
        Tensor expected_history = history.to(Device::CPU);
        const Tensor expected_query = ops::append_self_attention_step(rows_qkv.cpu, positions, expected_keys,
                                                                      expected_values, expected_history, cpu_options);
        Tensor keys = key_cache.gpu.to(Device::CUDA), values = value_cache.gpu.to(Device::CUDA);
        Tensor got_history = history.to(Device::CUDA);
        const Tensor query = ops::append_self_attention_step(rows_qkv.gpu, positions.to(Device::CUDA), keys, values,
                                                             got_history, gpu_options);
        REQUIRE(query.shape() == Shape{slots - 1, shape.width()});
        CHECK(max_relative_error(values_of(query), expected_query.to_float_vector()) < tolerance(dtype));
        CHECK(max_relative_error(values_of(keys), expected_keys.to_float_vector()) < tolerance(dtype));
        CHECK(max_relative_error(values_of(values), expected_values.to_float_vector()) < tolerance(dtype));
        CHECK(ints_of(got_history) == expected_history.to_int_vector());

        // A slot past the table on the GPU writes its query and nothing else.
        const Tensor all_positions = Tensor::from_ints({slots}, {14, 15, 16, 17, 18, 3, 20, 0, 40});
        const Tensor all_cache_rows = Tensor::from_ints({slots}, {7, 7, 2, 2, 2, 0, 11, -1, 5}).to(Device::CUDA);
        const Tensor all_history_rows = Tensor::from_ints({slots}, {2, 2, 2, 2, 2, 0, 1, 1, 0}).to(Device::CUDA);
        gpu_options.cache_rows = &all_cache_rows;
        gpu_options.history_rows = &all_history_rows;
        Tensor more_keys = key_cache.gpu.to(Device::CUDA), more_values = value_cache.gpu.to(Device::CUDA);
        Tensor more_history = history.to(Device::CUDA);
        ops::append_self_attention_step(qkv.gpu, all_positions.to(Device::CUDA), more_keys, more_values, more_history,
                                        gpu_options);
        CHECK(max_relative_error(values_of(more_keys), expected_keys.to_float_vector()) < tolerance(dtype));
        CHECK(ints_of(more_history) == expected_history.to_int_vector());
      }
}

// The rotary pass folded into the append (SelfAttentionStepOptions::rotary) against the two passes it stands
// for, on the GPU: the same bits in the query, the blocks and the history, for every head shape (scalar loads
// where a half head is not whole vectors) and a position outside the table (left unrotated by both).
TEST_CASE("cuda append_self_attention_step with rotary positions equals the rotary pass then the append", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  for (DataType dtype : kFloatTypes)
    for (const Heads& shape : kHeadShapes) {
      CAPTURE(dtype_name(dtype), shape.heads, shape.kv_heads, shape.head_dim);
      const int64_t slots = 6, block = 16, blocks = 8, table_width = 48, table_positions = 40;
      const int64_t width = shape.width() + 2 * shape.kv_width();
      const Tensor table = ops::rotary_table(table_positions, shape.head_dim, 10000.0f, Device::CUDA);
      const Tensor qkv = random_operand({slots, width}, dtype, -4.0f, 4.0f).gpu;
      const Tensor key_cache = random_operand({blocks, block, shape.kv_width()}, dtype).gpu;
      const Tensor history = random_ints({slots, table_width}, -9, -1).to(Device::CUDA);
      const Tensor positions = Tensor::from_ints({slots}, {0, 5, 17, 33, 39, 44}).to(Device::CUDA);
      const Tensor cache_rows = Tensor::from_ints({slots}, {0, 1, 2, 3, 4, 5}).to(Device::CUDA);
      ops::SelfAttentionStepOptions options;
      options.query_width = shape.width();
      options.cache_rows = &cache_rows;
      const auto append = [&](const Tensor& rows, const Tensor* rotary, Tensor& keys, Tensor& values, Tensor& table_rows) {
        ops::SelfAttentionStepOptions with = options;
        with.rotary = rotary;
        with.rotary_shape = {shape.heads, shape.kv_heads};
        return ops::append_self_attention_step(rows, positions, keys, values, table_rows, with);
      };
      Tensor rotated = qkv.to(Device::CUDA);
      ops::apply_rotary_embedding(rotated, positions, table, {shape.heads, shape.kv_heads});
      Tensor two_pass_keys = key_cache.to(Device::CUDA), two_pass_values = key_cache.to(Device::CUDA);
      Tensor two_pass_history = history.to(Device::CUDA);
      const Tensor two_pass = append(rotated, nullptr, two_pass_keys, two_pass_values, two_pass_history);
      Tensor keys = key_cache.to(Device::CUDA), values = key_cache.to(Device::CUDA), got_history = history.to(Device::CUDA);
      const Tensor fused = append(qkv, &table, keys, values, got_history);
      CHECK(values_of(fused) == values_of(two_pass));
      CHECK(values_of(keys) == values_of(two_pass_keys));
      CHECK(values_of(values) == values_of(two_pass_values));
      CHECK(ints_of(got_history) == ints_of(two_pass_history));
    }
}

// Chunked prefill over the block pool (ops.h, AttentionOptions), the same calls on both devices: two passes,
// the first with a chunk of each prompt, the second the rest of the first prompt over keys already pooled.
TEST_CASE("cuda chunked prefill through the block pool matches the CPU", "[gpu]") {
  REQUIRE_GPU_OR_SKIP();
  for (DataType dtype : kFloatTypes)
    for (const Heads& shape : kHeadShapes) {
      CAPTURE(dtype_name(dtype), shape.heads, shape.kv_heads, shape.head_dim);
      const int64_t block = 16, blocks = 10, table_width = 80;
      const int64_t width = shape.width() + 2 * shape.kv_width();
      const Tensor table = ops::rotary_table(table_width, shape.head_dim, 10000.0f, Device::CPU);
      const Tensor table_gpu = table.to(Device::CUDA);
      // Prompt 0: 53 tokens in blocks 9, 0, 4, 6 (chunks of 37 and 16); prompt 1: 11 tokens in block 2.
      const std::vector<std::vector<int32_t>> block_tables = {{9, 0, 4, 6}, {2}};
      struct Chunk {
        int32_t prompt, first, count;
      };
      const std::vector<std::vector<Chunk>> passes = {{{0, 0, 37}, {1, 0, 11}}, {{0, 37, 16}}};
      Operand keys = random_operand({blocks, block, shape.kv_width()}, dtype);
      Operand values = random_operand({blocks, block, shape.kv_width()}, dtype);
      Operand history{Tensor::from_ints({2, table_width}, std::vector<int32_t>(2 * table_width, -1)), Tensor()};
      history.gpu = history.cpu.to(Device::CUDA);
      for (const std::vector<Chunk>& pass : passes) {
        std::vector<int32_t> positions, cache_rows, history_rows, lengths;
        for (const Chunk& chunk : pass)
          for (int32_t t = chunk.first; t < chunk.first + chunk.count; ++t) {
            positions.push_back(t);
            cache_rows.push_back(block_tables[chunk.prompt][t / block]);
            history_rows.push_back(chunk.prompt);
            lengths.push_back(t + 1);
          }
        const int64_t tokens = static_cast<int64_t>(positions.size());
        const Operand qkv = random_operand({tokens, width}, dtype);
        const auto run = [&](Tensor x, Device device, Tensor& key_pool, Tensor& value_pool, Tensor& table_rows,
                             const Tensor& rope) {
          const Tensor at = Tensor::from_ints({tokens}, positions).to(device);
          const Tensor cache_rows_tensor = Tensor::from_ints({tokens}, cache_rows).to(device);
          const Tensor history_rows_tensor = Tensor::from_ints({tokens}, history_rows).to(device);
          ops::apply_rotary_embedding(x, at, rope, {shape.heads, shape.kv_heads});
          ops::SelfAttentionStepOptions step;
          step.query_width = shape.width();
          step.cache_rows = &cache_rows_tensor;
          step.history_rows = &history_rows_tensor;
          const Tensor query = ops::append_self_attention_step(x, at, key_pool, value_pool, table_rows, step);
          const Tensor token_history = ops::gather_rows(table_rows, history_rows_tensor);
          return ops::attention(query.reshape({tokens, 1, shape.width()}), key_pool, value_pool,
                                Tensor::from_ints({tokens}, lengths).to(device), gqa_options(shape, &token_history));
        };
        const Tensor expected = run(qkv.cpu.to(Device::CPU), Device::CPU, keys.cpu, values.cpu, history.cpu, table);
        const Tensor got = run(qkv.gpu.to(Device::CUDA), Device::CUDA, keys.gpu, values.gpu, history.gpu, table_gpu);
        CHECK(max_relative_error(values_of(got), expected.to_float_vector()) < tolerance(dtype));
        CHECK(ints_of(history.gpu) == history.cpu.to_int_vector());
      }
    }
}

#endif

// The per-row work of cpu::attention (lib/cpu/attention.cc) in two builds that give the same bits: the
// portable one, which defines the arithmetic, and an AVX2 one that reorganizes it for speed (several keys'
// dot products reduced together, each head's output kept in registers) without changing any operation or
// its order. Internal to the CPU backend; the test compares the two bit for bit.
#pragma once

#include <cstdint>

namespace seqtrans::cpu {

// Query rows t in [0, query_len) of batch row b attend to key_len keys.
struct AttentionRow {
  const float* query;          // [.., query_len, heads * head_dim]: row (b * query_len + t)
  const float* keys;           // key j starts at keys + key_offsets[j]
  const float* values;         // value j starts at values + key_offsets[j]
  const int64_t* key_offsets;  // [key_len]
  const int64_t* kv_offsets;   // [heads]: where query head h's key/value head starts inside a key row
  float* out;                  // laid out as query
  int64_t b = 0, query_len = 0, key_len = 0, heads = 0, head_dim = 0;
  float scale = 1.0f;
};

// scores: [heads * key_len] scratch.
//
// The arithmetic, per query row and head: score_j = dot(q, k_j) * scale, where dot sums q[c] * k[c] in 16
// lanes (lane l takes c = l, l + 16, ...), then the lanes pairwise (l += l + 8, l += l + 4, l += l + 2,
// l += l + 1), then any channels past the last 16 one by one; w_j = exp(score_j - max) in float, total =
// their sum in double in key order; out[c] = sum over j in key order of float(w_j / total) * v_j[c], from 0.
void attend_row_portable(const AttentionRow& row, float* scores);

// The same bits, for head_dim a multiple of 16 on a CPU with AVX2 (attend_row_avx2_fits).
bool attend_row_avx2_fits(int64_t head_dim);
void attend_row_avx2(const AttentionRow& row, float* scores);

}  // namespace seqtrans::cpu

// Deterministic pseudo-random logits of a (source, prefix) pair. test/search/hf_beam_crosscheck.py
// computes the same values bit for bit (every value is exact in fp32), so Hugging Face's results on
// them can be compared with ours.
#pragma once

#include <cstdint>
#include <vector>

namespace seqtrans {
namespace testing {

// FNV-1a over the low 32 bits of each value, then the splitmix64 finalizer.
inline uint64_t hash_ids(const std::vector<int64_t>& values) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (int64_t value : values) {
    hash ^= static_cast<uint64_t>(value) & 0xffffffffULL;
    hash *= 0x100000001b3ULL;
  }
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ULL;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebULL;
  hash ^= hash >> 31;
  return hash;
}

// Logits in [-spread, spread) with 20 random bits each, plus eos_bias on the EOS id.
inline std::vector<float> hash_logits(const std::vector<int32_t>& source, const std::vector<int32_t>& prefix,
                                      int64_t vocab, double spread, int32_t eos_id, double eos_bias) {
  std::vector<int64_t> key;
  key.push_back(static_cast<int64_t>(source.size()));
  key.insert(key.end(), source.begin(), source.end());
  key.push_back(static_cast<int64_t>(prefix.size()));
  key.insert(key.end(), prefix.begin(), prefix.end());
  key.push_back(0);
  std::vector<float> logits(static_cast<size_t>(vocab));  // [vocab]
  for (int64_t token = 0; token < vocab; ++token) {
    key.back() = token;
    const double unit = static_cast<double>(hash_ids(key) >> 44) / static_cast<double>(1 << 19) - 1.0;
    logits[token] = static_cast<float>(unit * spread + (token == eos_id ? eos_bias : 0.0));
  }
  return logits;
}

}  // namespace testing
}  // namespace seqtrans

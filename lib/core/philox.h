// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011): a counter-based
// generator. Its output is a pure function of (key, counter), so any draw can be computed on its own, on
// the host or in a kernel, in any order: sampling keys a draw by (seed, input line, step, sample) and gets
// the same number whatever the batch, the batching mode or the device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SEQTRANS_HOST_DEVICE __host__ __device__
#else
#define SEQTRANS_HOST_DEVICE
#endif

namespace seqtrans {

struct PhiloxCounter {
  uint32_t word[4];
};

struct PhiloxKey {
  uint32_t word[2];
};

namespace philox_detail {

// The round multipliers and the Weyl key increments of the paper's Philox4x32.
constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kKeyStep0 = 0x9E3779B9u;
constexpr uint32_t kKeyStep1 = 0xBB67AE85u;

SEQTRANS_HOST_DEVICE inline uint32_t high_word(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

SEQTRANS_HOST_DEVICE inline PhiloxCounter mix(const PhiloxCounter& x, const PhiloxKey& key) {
  const uint32_t high0 = high_word(kMultiplier0, x.word[0]), low0 = kMultiplier0 * x.word[0];
  const uint32_t high1 = high_word(kMultiplier1, x.word[2]), low1 = kMultiplier1 * x.word[2];
  return PhiloxCounter{{high1 ^ x.word[1] ^ key.word[0], low1, high0 ^ x.word[3] ^ key.word[1], low0}};
}

}  // namespace philox_detail

// Ten rounds, the key bumped between rounds (the variant with the published known answers).
SEQTRANS_HOST_DEVICE inline PhiloxCounter philox4x32_10(PhiloxCounter counter, PhiloxKey key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key.word[0] += philox_detail::kKeyStep0;
      key.word[1] += philox_detail::kKeyStep1;
    }
    counter = philox_detail::mix(counter, key);
  }
  return counter;
}

// 64 random bits for one sampling draw: the first two output words of Philox at counter (line, step,
// sample) under key = seed. Each coordinate has its own counter words, so no two draws of a run share a
// counter (lines below 2^64, steps and samples below 2^32).
SEQTRANS_HOST_DEVICE inline uint64_t sampling_bits(uint64_t seed, uint64_t line, uint32_t step, uint32_t sample) {
  const PhiloxCounter counter{{static_cast<uint32_t>(line), static_cast<uint32_t>(line >> 32), step, sample}};
  const PhiloxKey key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  const PhiloxCounter out = philox4x32_10(counter, key);
  return (static_cast<uint64_t>(out.word[1]) << 32) | out.word[0];
}

}  // namespace seqtrans

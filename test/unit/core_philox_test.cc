// Philox4x32-10: the published known answers, one round worked out by hand, and the properties sampling
// relies on (every coordinate of a draw's key matters, neighbouring keys give unrelated, uniform bits).
#include "core/philox.h"

#include <bitset>
#include <set>
#include <vector>

#include "catch.h"

namespace seqtrans {
namespace {

std::vector<uint32_t> words(const PhiloxCounter& counter) {
  return {counter.word[0], counter.word[1], counter.word[2], counter.word[3]};
}

int differing_bits(uint64_t a, uint64_t b) { return static_cast<int>(std::bitset<64>(a ^ b).count()); }

}  // namespace

TEST_CASE("philox4x32-10 gives the published known answers", "[unit][philox]") {
  // The known-answer vectors of Salmon et al.'s Random123 distribution (kat_vectors): zeros, all ones, and
  // the digits of pi.
  CHECK(words(philox4x32_10({{0, 0, 0, 0}}, {{0, 0}})) ==
        std::vector<uint32_t>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(words(philox4x32_10({{~0u, ~0u, ~0u, ~0u}}, {{~0u, ~0u}})) ==
        std::vector<uint32_t>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(words(philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, {{0xa4093822u, 0x299f31d0u}})) ==
        std::vector<uint32_t>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("one philox round, worked out by hand", "[unit][philox]") {
  // Counter (1, 0, 0, 0), key 0: the first product is M0 * 1 (high word 0, low word M0), the second is 0,
  // so the round gives (0 ^ 0 ^ 0, 0, 0 ^ 0 ^ 0, M0).
  CHECK(words(philox_detail::mix({{1, 0, 0, 0}}, {{0, 0}})) == std::vector<uint32_t>{0, 0, 0, 0xD2511F53u});
  // Counter (0, 5, 2, 7), key (3, 9): the words 1 and 3 and the key are xored into the other products'
  // high words: M1 * 2 = 0x19B3D1AAE (high 1, low 0x9B3D1AAE).
  CHECK(words(philox_detail::mix({{0, 5, 2, 7}}, {{3, 9}})) ==
        std::vector<uint32_t>{1u ^ 5u ^ 3u, 0x9B3D1AAEu, 0u ^ 7u ^ 9u, 0u});
}

TEST_CASE("every coordinate of a sampling draw's key changes its bits", "[unit][philox]") {
  const uint64_t base = sampling_bits(42, 7, 3, 1);
  CHECK(sampling_bits(42, 7, 3, 1) == base);  // a pure function
  const std::vector<uint64_t> neighbours = {
      sampling_bits(43, 7, 3, 1),              sampling_bits(42 + (uint64_t{1} << 32), 7, 3, 1),
      sampling_bits(42, 8, 3, 1),              sampling_bits(42, 7 + (uint64_t{1} << 32), 3, 1),
      sampling_bits(42, 7, 4, 1),              sampling_bits(42, 7, 3, 0),
  };
  for (uint64_t other : neighbours) {
    // A changed key flips about half of the 64 bits (here: far from 0 and from 64).
    CHECK(differing_bits(base, other) >= 12);
    CHECK(differing_bits(base, other) <= 52);
  }
}

TEST_CASE("neighbouring draw keys give distinct, uniform, unrelated bits", "[unit][philox]") {
  // 64 lines x 64 steps x 4 samples: every draw distinct, the top 4 bits uniform (chi-square with 15
  // degrees of freedom under 37.7, p = 0.001), and a one-step shift flips 32 bits on average.
  std::set<uint64_t> seen;
  std::vector<double> counts(16, 0.0);
  double flipped = 0.0;
  int pairs = 0;
  for (uint64_t line = 0; line < 64; ++line)
    for (uint32_t step = 0; step < 64; ++step)
      for (uint32_t sample = 0; sample < 4; ++sample) {
        const uint64_t bits = sampling_bits(2024, line, step, sample);
        seen.insert(bits);
        counts[bits >> 60] += 1.0;
        if (step > 0) {
          flipped += differing_bits(bits, sampling_bits(2024, line, step - 1, sample));
          ++pairs;
        }
      }
  const double draws = 64.0 * 64.0 * 4.0;
  CHECK(seen.size() == static_cast<size_t>(draws));
  double chi_square = 0.0;
  for (double count : counts) chi_square += (count - draws / 16) * (count - draws / 16) / (draws / 16);
  CHECK(chi_square < 37.7);
  CHECK(flipped / pairs == Approx(32.0).margin(0.5));
}

}  // namespace seqtrans

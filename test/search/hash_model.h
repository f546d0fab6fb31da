// The scripted model most search tests share: hash logits over 12 ids (0 = EOS with a bias, so that
// sentences stop after different numbers of steps; 11 = pad = start, suppressed), sources of varied length,
// and the check that two runs returned the same hypotheses.
#pragma once

#include <cstdint>
#include <vector>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "search/result.h"

namespace seqtrans {
namespace testing {

constexpr int64_t kHashVocab = 12;
constexpr int32_t kHashEos = 0;
constexpr int32_t kHashPad = 11;

inline FakeStepModel hash_step_model() {
  return FakeStepModel(kHashVocab, kHashEos, kHashPad, {kHashPad},
                       [](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
                         return hash_logits(source, prefix, kHashVocab, 2.0, kHashEos, 0.8);
                       });
}

// Sentences of 2 to 9 ids (EOS included) whose searches end after different numbers of steps.
inline std::vector<std::vector<int32_t>> varied_sources(size_t count) {
  std::vector<std::vector<int32_t>> all;
  for (size_t i = 0; i < count; ++i) {
    std::vector<int32_t> source;
    for (size_t t = 0; t < 1 + i % 8; ++t) source.push_back(1 + static_cast<int32_t>((i * 7 + t * 3) % 9));
    source.push_back(kHashEos);
    all.push_back(source);
  }
  return all;
}

// Every hypothesis of every result: the same tokens, score and finished flag.
inline void check_same_results(const std::vector<SearchResult>& actual, const std::vector<SearchResult>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    CAPTURE(i);
    REQUIRE(actual[i].hypotheses.size() == expected[i].hypotheses.size());
    for (size_t h = 0; h < actual[i].hypotheses.size(); ++h) {
      CHECK(actual[i].hypotheses[h].tokens == expected[i].hypotheses[h].tokens);
      CHECK(actual[i].hypotheses[h].score == expected[i].hypotheses[h].score);
      CHECK(actual[i].hypotheses[h].finished == expected[i].hypotheses[h].finished);
    }
  }
}

}  // namespace testing
}  // namespace seqtrans

// Search results against expected hypotheses (the Hugging Face cross-checks): the same tokens and finish,
// scores to fp32 rounding.
#pragma once

#include <vector>

#include "catch.h"
#include "search/result.h"

namespace seqtrans {
namespace testing {

// `expected` per sentence, best first; Expected has tokens, score and finished.
template <typename Expected>
void check_hypotheses(const std::vector<SearchResult>& results, const std::vector<std::vector<Expected>>& expected) {
  REQUIRE(results.size() == expected.size());
  for (size_t sentence = 0; sentence < results.size(); ++sentence) {
    const auto& hypotheses = results[sentence].hypotheses;
    INFO("sentence " << sentence);
    REQUIRE(hypotheses.size() == expected[sentence].size());
    for (size_t rank = 0; rank < hypotheses.size(); ++rank) {
      INFO("rank " << rank);
      CHECK(hypotheses[rank].tokens == expected[sentence][rank].tokens);
      CHECK(hypotheses[rank].finished == expected[sentence][rank].finished);
      CHECK(hypotheses[rank].score == Approx(expected[sentence][rank].score).epsilon(1e-5).margin(1e-6));
    }
  }
}

}  // namespace testing
}  // namespace seqtrans

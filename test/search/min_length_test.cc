// min_length keeps EOS out until enough tokens were generated (the synthetic benchmark forces lengths
// with it); the model's length cap bounds every output.
#include "catch.h"
#include "fake_step_model.h"
#include "search/search.h"

using namespace seqtrans;
using seqtrans::testing::FakeStepModel;

namespace {

// EOS (id 0) is always the most likely token; token 2 is second.
std::vector<float> eos_first(const std::vector<int32_t>& /*source*/, const std::vector<int32_t>& /*prefix*/) {
  return {5.0f, 0.0f, 3.0f, 1.0f};
}

}  // namespace

TEST_CASE("min_length suppresses EOS until the length is reached, in greedy and beam search", "[search]") {
  for (int beam : {1, 3}) {
    FakeStepModel model(4, /*eos_id=*/0, /*start_id=*/1, {}, eos_first);
    SearchOptions options;
    options.beam_size = beam;
    options.max_length_a = 10;
    options.min_length = 4;
    const std::vector<SearchResult> results = search(model, {{3, 0}, {2, 3, 0}}, options);
    REQUIRE(results.size() == 2);
    for (const SearchResult& result : results) {
      INFO("beam " << beam);
      const Hypothesis& best = result.hypotheses.at(0);
      CHECK(best.tokens.size() == 4);  // four tokens, then the first allowed EOS
      CHECK(best.finished);
    }
    options.min_length = 0;
    CHECK(search(model, {{3, 0}}, options).at(0).hypotheses.at(0).tokens.empty());
  }
}

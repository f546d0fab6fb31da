// Option validation, dispatch and length limits.
#include "catch.h"
#include "fake_step_model.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {

TEST_CASE("invalid options fail with one-line errors", "[search][options]") {
  SearchOptions options;
  options.beam_size = 0;
  CHECK_THROWS_WITH(validate_options(options), "beam_size must be >= 1, got 0");
  options = SearchOptions();
  options.num_hypotheses = 5;
  CHECK_THROWS_WITH(validate_options(options), "num_hypotheses must be in [1, beam_size=4], got 5");
  options.num_hypotheses = 0;
  CHECK_THROWS_WITH(validate_options(options), "num_hypotheses must be in [1, beam_size=4], got 0");
  options = SearchOptions();
  options.temperature = 0.0f;
  CHECK_THROWS_WITH(validate_options(options), "temperature must be > 0, got 0");
  options = SearchOptions();
  options.sampling_topp = 0.0f;
  CHECK_THROWS_WITH(validate_options(options), "sampling_topp must be in (0, 1], got 0");
  options.sampling_topp = 1.5f;
  CHECK_THROWS_WITH(validate_options(options), "sampling_topp must be in (0, 1], got 1.5");
  options = SearchOptions();
  options.sampling_topk = -1;
  CHECK_THROWS_WITH(validate_options(options), "sampling_topk must be >= 0, got -1");
  options = SearchOptions();
  options.max_length_a = -1;
  CHECK_THROWS_WITH(validate_options(options), "max_length_a must be >= 0, got -1");
  CHECK_NOTHROW(validate_options(SearchOptions()));
}

TEST_CASE("search refuses invalid options before encoding", "[search][options]") {
  FakeStepModel model(4, 0, 3, {}, [](const std::vector<int32_t>&, const std::vector<int32_t>&) {
    return std::vector<float>(4, 0.0f);
  });
  SearchOptions options;
  options.num_hypotheses = 9;
  CHECK_THROWS_AS(search(model, {{1, 0}}, options), Error);
  CHECK(model.encode_calls == 0);
}

TEST_CASE("search_kind picks the algorithm", "[search][options]") {
  SearchOptions options;
  CHECK(search_kind(options) == SearchKind::Beam);
  options.beam_size = 1;
  CHECK(search_kind(options) == SearchKind::Greedy);
  options.temperature = 0.5f;  // temperature alone does not change the argmax
  CHECK(search_kind(options) == SearchKind::Greedy);
  options.sampling_topk = 0;
  CHECK(search_kind(options) == SearchKind::Sampling);
  options.sampling_topk = 1;
  options.sampling_topp = 0.9f;
  CHECK(search_kind(options) == SearchKind::Sampling);
  options.sampling_topp = 1.0f;
  options.sampling_minp = 0.1f;
  CHECK(search_kind(options) == SearchKind::Sampling);
}

TEST_CASE("sampling options: min-p in [0, 1], any number of samples, no beam", "[search][options]") {
  SearchOptions options;
  options.beam_size = 1;
  options.sampling_minp = 1.5f;
  CHECK_THROWS_WITH(validate_options(options), "sampling_minp must be in [0, 1], got 1.5");
  options.sampling_minp = 0.05f;
  options.num_hypotheses = 16;  // samples, not beams
  CHECK_NOTHROW(validate_options(options));
  CHECK(slots_per_sentence(options) == 16);
  options.beam_size = 2;
  CHECK_THROWS_WITH(validate_options(options),
                    "sampling (sampling_topk=1, sampling_topp=1, sampling_minp=0.05) needs beam_size 1, got beam_size 2");
}

TEST_CASE("max_generated_length is a + b * source length, at least 1", "[search][options]") {
  SearchOptions options;
  options.max_length_a = 5;
  options.max_length_b = 0.0f;
  CHECK(max_generated_length(options, 100) == 5);
  options.max_length_a = 0;
  CHECK(max_generated_length(options, 100) == 1);
  options.max_length_b = 0.7f;  // 0.7f is just below 0.7: 10 ids still give 7
  CHECK(max_generated_length(options, 10) == 7);
  options.max_length_a = 2;
  options.max_length_b = 1.5f;
  CHECK(max_generated_length(options, 3) == 6);
}

}  // namespace testing
}  // namespace seqtrans

// Naive batching (SearchOptions::shrink_batch = false, the benchmark's --naive-batching ablation) must
// return exactly what the shrinking batch returns while computing more slots: done sentences stay in the
// batch until the last one finishes.
#include <map>
#include <set>
#include <string>

#include "catch.h"
#include "hash_model.h"
#include "models/encoder_decoder_model.h"
#include "models/tensor_specs.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

constexpr int32_t kEos = kHashEos;

FakeStepModel hash_model() { return hash_step_model(); }

std::vector<std::vector<int32_t>> hash_sources() {
  std::vector<std::vector<int32_t>> sources;
  for (int32_t i = 0; i < 9; ++i) sources.push_back({1 + i % 7, 2 + (i * 3) % 8, kEos});
  return sources;
}

// The test is only meaningful when sentences stop at different steps.
size_t distinct_lengths(const std::vector<SearchResult>& results) {
  std::set<size_t> lengths;
  for (const SearchResult& result : results) lengths.insert(result.hypotheses.front().tokens.size());
  return lengths.size();
}

// Runs `options` with and without the shrinking batch on fresh fake models and compares.
void check_naive_matches_shrinking(SearchOptions options) {
  const auto sources = hash_sources();
  FakeStepModel shrinking_model = hash_model();
  options.shrink_batch = true;
  const auto shrinking = search(shrinking_model, sources, options);
  FakeStepModel naive_model = hash_model();
  options.shrink_batch = false;
  const auto naive = search(naive_model, sources, options);

  check_same_results(naive, shrinking);
  CHECK(distinct_lengths(shrinking) > 1);
  // Same number of steps, more slots computed: the naive batch never shrinks.
  CHECK(naive_model.steps.size() == shrinking_model.steps.size());
  CHECK(naive_model.slot_steps() > shrinking_model.slot_steps());
  const size_t constant = naive_model.steps.back().size();
  for (size_t step = 1; step < naive_model.steps.size(); ++step) CHECK(naive_model.steps[step].size() == constant);
}

}  // namespace

TEST_CASE("naive batching: greedy results equal the shrinking batch's", "[search][naive_batching]") {
  SearchOptions options;
  options.beam_size = 1;
  options.max_length_a = 9;
  check_naive_matches_shrinking(options);

  FakeStepModel model = hash_model();
  options.shrink_batch = false;
  search(model, hash_sources(), options);
  for (const auto& step : model.steps) CHECK(step.size() == hash_sources().size());
}

TEST_CASE("naive batching: beam search results equal the shrinking batch's", "[search][naive_batching]") {
  SearchOptions options;
  options.beam_size = 3;
  options.num_hypotheses = 2;
  options.max_length_a = 9;
  check_naive_matches_shrinking(options);

  SECTION("with min_length and forced EOS") {
    options.min_length = 2;
    options.force_eos_at_max_length = true;
    check_naive_matches_shrinking(options);
  }
  SECTION("constant batch of batch x beam slots after the first step") {
    FakeStepModel model = hash_model();
    options.shrink_batch = false;
    search(model, hash_sources(), options);
    REQUIRE(model.steps.size() > 2);
    CHECK(model.steps[0].size() == hash_sources().size());
    for (size_t step = 1; step < model.steps.size(); ++step)
      CHECK(model.steps[step].size() == hash_sources().size() * 3);
  }
}

TEST_CASE("naive batching: sampling results equal the shrinking batch's", "[search][naive_batching]") {
  SearchOptions options;
  options.beam_size = 1;
  options.sampling_topk = 5;
  options.seed = 7;
  options.max_length_a = 9;
  check_naive_matches_shrinking(options);
}

TEST_CASE("naive batching: a random Transformer gives the same translations", "[search][naive_batching]") {
  ModelConfig config = transformer_base_config();
  config.d_model = 16;
  config.encoder = {2, 2, 32, false, false, false};
  config.decoder = {2, 2, 32, false, false, false};
  config.embedding_scale = 4.0f;
  config.source_vocab_size = config.target_vocab_size = 24;
  config.pad_id = config.decoder_start_id = 23;
  config.suppressed_ids = {23};
  config.max_positions = 64;
  const ModelFile random = make_random_model(config, {3, 0.5f});
  // A random model rarely picks EOS: raise its output bias so that sentences end at different steps.
  std::map<std::string, Tensor> tensors = random.tensors();
  std::vector<float> bias = tensors.at("decoder/output/bias").to_float_vector();
  bias[0] += 8.0f;
  tensors["decoder/output/bias"] = Tensor::from_floats({24}, bias);
  const ModelFile file = ModelFile::from_parts("random model", config, TokenizerConfig{}, tensors);
  EncoderDecoderModel model(file, ModelOptions{});

  std::vector<std::vector<int32_t>> sources;
  for (int32_t i = 0; i < 6; ++i) sources.push_back({2 + i, 3 + (5 * i) % 17, 4 + i % 3, 0});
  for (const int beam : {1, 3}) {
    SearchOptions options;
    options.beam_size = beam;
    options.max_length_a = 12;
    options.shrink_batch = true;
    const auto shrinking = search(model, sources, options);
    options.shrink_batch = false;
    const auto naive = search(model, sources, options);
    REQUIRE(naive.size() == shrinking.size());
    CHECK(distinct_lengths(shrinking) > 1);
    for (size_t i = 0; i < naive.size(); ++i) {
      CHECK(naive[i].hypotheses.front().tokens == shrinking[i].hypotheses.front().tokens);
      CHECK(naive[i].hypotheses.front().score == Approx(shrinking[i].hypotheses.front().score).epsilon(1e-5));
    }
  }
}

}  // namespace testing
}  // namespace seqtrans

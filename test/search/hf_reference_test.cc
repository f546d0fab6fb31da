// Search against the numpy port of Hugging Face transformers 4.x generation (hf_generation_reference.py
// wrote hf_reference_cases.h): HF's repetition processors on rows; greedy search with them and diverse
// (group) beam search, with and without them, on the hash-logits fake model.
#include <string>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "hf_reference_cases.h"
#include "ops/ops.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

FakeStepModel reference_model(const HfReferenceCase& reference) {
  return FakeStepModel(kReferenceVocab, kReferenceEos, /*start_id=*/kReferencePad, /*suppressed=*/{kReferencePad},
                       [reference](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
                         return hash_logits(source, prefix, kReferenceVocab, reference.spread, kReferenceEos,
                                            reference.eos_bias);
                       });
}

SearchOptions reference_options(const HfReferenceCase& reference) {
  SearchOptions options;
  options.beam_size = reference.beam_size;
  options.beam_groups = reference.beam_groups;
  options.diversity_penalty = reference.diversity_penalty;
  options.num_hypotheses = reference.num_hypotheses;
  options.length_penalty = reference.length_penalty;
  options.beam_stopping = reference.stopping;
  options.max_length_a = reference.max_length_a;
  options.max_length_b = reference.max_length_b;
  options.force_eos_at_max_length = reference.force_eos;
  options.repetition_penalty = reference.repetition_penalty;
  options.no_repeat_ngram_size = reference.no_repeat_ngram;
  return options;
}

void check_results(const HfReferenceCase& reference, const std::vector<SearchResult>& results) {
  REQUIRE(results.size() == reference.expected.size());
  for (size_t sentence = 0; sentence < results.size(); ++sentence) {
    const auto& expected = reference.expected[sentence];
    const auto& hypotheses = results[sentence].hypotheses;
    INFO("sentence " << sentence);
    REQUIRE(hypotheses.size() == expected.size());
    for (size_t rank = 0; rank < hypotheses.size(); ++rank) {
      INFO("rank " << rank);
      CHECK(hypotheses[rank].tokens == expected[rank].tokens);
      CHECK(hypotheses[rank].finished == expected[rank].finished);
      CHECK(hypotheses[rank].score == Approx(expected[rank].score).epsilon(1e-5).margin(1e-6));
    }
  }
}

}  // namespace

TEST_CASE("penalize_repetitions matches HF's repetition processors", "[search][hf][repetition]") {
  for (const HfProcessorCase& reference : hf_processor_cases()) {
    CAPTURE(reference.history, reference.penalty, reference.no_repeat_ngram);
    Tensor logits = Tensor::from_floats({1, kReferenceVocab}, reference.scores);
    const Tensor history = Tensor::from_ints({1, static_cast<int64_t>(reference.history.size())}, reference.history);
    const Tensor lengths = Tensor::from_ints({1}, {static_cast<int32_t>(reference.history.size())});
    ops::RepetitionOptions options;
    options.penalty = reference.penalty;
    options.no_repeat_ngram = reference.no_repeat_ngram;
    ops::penalize_repetitions(logits, history, lengths, options);
    CHECK(logits.to_float_vector() == reference.expected);
  }
}

TEST_CASE("greedy search with repetition controls matches HF's greedy generation", "[search][hf][repetition]") {
  const auto& cases = hf_reference_cases();
  size_t checked = 0;
  for (size_t index = 0; index < cases.size(); ++index) {
    const HfReferenceCase& reference = cases[index];
    if (reference.beam_size != 1) continue;
    INFO("case " << index << " (repetition penalty " << reference.repetition_penalty << ", no-repeat n-gram "
                 << reference.no_repeat_ngram << ")");
    FakeStepModel model = reference_model(reference);
    check_results(reference, search(model, reference.sources, reference_options(reference)));
    ++checked;
  }
  CHECK(checked >= 12);
}

TEST_CASE("diverse beam search matches HF 4.x group beam search", "[search][hf][diverse]") {
  const auto& cases = hf_reference_cases();
  size_t checked = 0;
  for (size_t index = 0; index < cases.size(); ++index) {
    const HfReferenceCase& reference = cases[index];
    if (reference.beam_size == 1) continue;
    INFO("case " << index << " (beam " << reference.beam_size << ", groups " << reference.beam_groups
                 << ", diversity " << reference.diversity_penalty << ", repetition penalty "
                 << reference.repetition_penalty << ", no-repeat n-gram " << reference.no_repeat_ngram << ")");
    FakeStepModel model = reference_model(reference);
    check_results(reference, search(model, reference.sources, reference_options(reference)));
    // One sentence at a time: the same.
    for (size_t sentence = 0; sentence < reference.sources.size(); ++sentence) {
      HfReferenceCase single = reference;
      single.sources = {reference.sources[sentence]};
      single.expected = {reference.expected[sentence]};
      FakeStepModel single_model = reference_model(single);
      check_results(single, search(single_model, single.sources, reference_options(single)));
    }
    ++checked;
  }
  CHECK(checked >= 40);
}

}  // namespace testing
}  // namespace seqtrans

// Search against the numpy port of Hugging Face transformers 4.x generation (hf_generation_reference.py
// wrote hf_reference_cases.h): HF's repetition processors on rows; greedy search with them and diverse
// (group) beam search, with and without them, with and without target prefixes (HF's decoder_input_ids),
// on the hash-logits fake model.
#include <string>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "hf_reference_cases.h"
#include "hypothesis_checks.h"
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

std::vector<SearchResult> search_reference(FakeStepModel& model, const HfReferenceCase& reference) {
  std::vector<uint64_t> streams(reference.sources.size());
  for (size_t i = 0; i < streams.size(); ++i) streams[i] = i;
  return search_with_streams(model, reference.sources, reference_options(reference), streams, reference.prefixes);
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
    check_hypotheses(search_reference(model, reference), reference.expected);
    ++checked;
  }
  CHECK(checked >= 20);
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
    check_hypotheses(search_reference(model, reference), reference.expected);
    // One sentence at a time: the same.
    for (size_t sentence = 0; sentence < reference.sources.size(); ++sentence) {
      HfReferenceCase single = reference;
      single.sources = {reference.sources[sentence]};
      single.prefixes = {reference.prefixes[sentence]};
      single.expected = {reference.expected[sentence]};
      FakeStepModel single_model = reference_model(single);
      check_hypotheses(search_reference(single_model, single), single.expected);
    }
    ++checked;
  }
  CHECK(checked >= 40);
}

}  // namespace testing
}  // namespace seqtrans

// Search against expected results computed by Hugging Face transformers generate() itself
// (hf_beam_crosscheck.py wrote hf_crosscheck_cases.h) on the same hash-based fake model.
#include <string>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "hf_crosscheck_cases.h"
#include "hypothesis_checks.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

FakeStepModel hf_model(const HfCase& hf_case) {
  return FakeStepModel(kHfVocab, kHfEos, /*start_id=*/kHfPad, /*suppressed=*/{kHfPad},
                       [hf_case](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
                         return hash_logits(source, prefix, kHfVocab, hf_case.spread, kHfEos, hf_case.eos_bias);
                       });
}

SearchOptions hf_options(const HfCase& hf_case) {
  SearchOptions options;
  options.beam_size = hf_case.beam_size;
  options.num_hypotheses = hf_case.num_hypotheses;
  options.length_penalty = hf_case.length_penalty;
  options.beam_stopping = hf_case.stopping;
  options.max_length_a = hf_case.max_length_a;
  options.max_length_b = hf_case.max_length_b;
  options.force_eos_at_max_length = hf_case.force_eos;
  return options;
}

}  // namespace

TEST_CASE("search matches Hugging Face generate() on a hash-logits model", "[search][hf]") {
  const auto& cases = hf_cases();
  for (size_t index = 0; index < cases.size(); ++index) {
    const HfCase& hf_case = cases[index];
    INFO("case " << index << " (beam_size " << hf_case.beam_size << ")");
    FakeStepModel model = hf_model(hf_case);
    check_hypotheses(search(model, hf_case.sources, hf_options(hf_case)), hf_case.expected);
  }
}

TEST_CASE("Hugging Face cases give the same results one sentence at a time", "[search][hf]") {
  const auto& cases = hf_cases();
  for (size_t index = 0; index < cases.size(); ++index) {
    const HfCase& hf_case = cases[index];
    INFO("case " << index);
    for (size_t sentence = 0; sentence < hf_case.sources.size(); ++sentence) {
      HfCase single = hf_case;
      single.sources = {hf_case.sources[sentence]};
      single.expected = {hf_case.expected[sentence]};
      FakeStepModel model = hf_model(single);
      check_hypotheses(search(model, single.sources, hf_options(single)), single.expected);
    }
  }
}

}  // namespace testing
}  // namespace seqtrans

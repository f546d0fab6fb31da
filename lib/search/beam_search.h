// Beam search with Hugging Face's rules (see beam_search.cc), one sentence at a time.
#pragma once

#include <memory>

#include "search/options.h"
#include "search/sentence_search.h"

namespace seqtrans {

// A sentence's beam search within `limits`.
std::unique_ptr<SentenceSearch> make_beam_sentence(const StepModel& model, const SearchOptions& options,
                                                   const SentenceLimits& limits);

}  // namespace seqtrans

#include "search/search.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "search/search_common.h"
#include "search/search_session.h"

namespace seqtrans {

namespace {

bool samples(const SearchOptions& options) {
  return options.sampling_topk != 1 || options.sampling_topp < 1.0f || options.sampling_minp > 0.0f;
}

}  // namespace

void validate_options(const SearchOptions& options) {
  SEQTRANS_CHECK(options.beam_size >= 1, "beam_size must be >= 1, got {}", options.beam_size);
  SEQTRANS_CHECK(std::isfinite(options.length_penalty), "length_penalty must be finite, got {}",
                 options.length_penalty);
  SEQTRANS_CHECK(options.max_length_a >= 0, "max_length_a must be >= 0, got {}", options.max_length_a);
  SEQTRANS_CHECK(std::isfinite(options.max_length_b) && options.max_length_b >= 0.0f,
                 "max_length_b must be >= 0, got {}", options.max_length_b);
  SEQTRANS_CHECK(options.min_length >= 0, "min_length must be >= 0, got {}", options.min_length);
  SEQTRANS_CHECK(options.temperature > 0.0f && std::isfinite(options.temperature), "temperature must be > 0, got {}",
                 options.temperature);
  SEQTRANS_CHECK(options.sampling_topp > 0.0f && options.sampling_topp <= 1.0f,
                 "sampling_topp must be in (0, 1], got {}", options.sampling_topp);
  SEQTRANS_CHECK(options.sampling_topk >= 0, "sampling_topk must be >= 0, got {}", options.sampling_topk);
  SEQTRANS_CHECK(options.sampling_minp >= 0.0f && options.sampling_minp <= 1.0f,
                 "sampling_minp must be in [0, 1], got {}", options.sampling_minp);
  SEQTRANS_CHECK(options.beam_groups >= 1 && options.beam_size % options.beam_groups == 0,
                 "beam_groups {} must divide beam_size {}", options.beam_groups, options.beam_size);
  SEQTRANS_CHECK(std::isfinite(options.diversity_penalty), "diversity_penalty must be finite, got {}",
                 options.diversity_penalty);
  SEQTRANS_CHECK(options.diversity_penalty == 0.0f || options.beam_groups > 1,
                 "diversity_penalty {} needs beam_groups > 1", options.diversity_penalty);
  SEQTRANS_CHECK(options.repetition_penalty > 0.0f && std::isfinite(options.repetition_penalty),
                 "repetition_penalty must be > 0, got {}", options.repetition_penalty);
  SEQTRANS_CHECK(options.no_repeat_ngram_size >= 0, "no_repeat_ngram_size must be >= 0, got {}",
                 options.no_repeat_ngram_size);
  SEQTRANS_CHECK(!samples(options) || options.beam_size == 1,
                 "sampling (sampling_topk={}, sampling_topp={}, sampling_minp={}) needs beam_size 1, got beam_size {}",
                 options.sampling_topk, options.sampling_topp, options.sampling_minp, options.beam_size);
  // Samples are independent: any number of them; beam search returns at most its beams.
  SEQTRANS_CHECK(options.num_hypotheses >= 1 && (samples(options) || options.num_hypotheses <= options.beam_size),
                 "num_hypotheses must be in [1, beam_size={}], got {}", options.beam_size, options.num_hypotheses);
}

SearchKind search_kind(const SearchOptions& options) {
  if (options.beam_size > 1) return SearchKind::Beam;
  return samples(options) ? SearchKind::Sampling : SearchKind::Greedy;
}

int slots_per_sentence(const SearchOptions& options) {
  return search_kind(options) == SearchKind::Sampling ? options.num_hypotheses : options.beam_size;
}

int max_generated_length(const SearchOptions& options, size_t source_length) {
  const double length = static_cast<double>(options.max_length_a) +
                        static_cast<double>(options.max_length_b) * static_cast<double>(source_length);
  const double floored = std::floor(length + 1e-4);
  // Huge factors saturate instead of overflowing int.
  if (floored >= 1e9) return 1000000000;
  return std::max(1, static_cast<int>(floored));
}

std::vector<SearchResult> search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                 const SearchOptions& options) {
  std::vector<uint64_t> streams(sources.size());
  for (size_t i = 0; i < streams.size(); ++i) streams[i] = i;
  return search_with_streams(model, sources, options, streams);
}

std::vector<SearchResult> search_with_streams(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                              const SearchOptions& options, const std::vector<uint64_t>& streams,
                                              const std::vector<std::vector<int32_t>>& prefixes) {
  SEQTRANS_CHECK(prefixes.empty() || prefixes.size() == sources.size(), "search: {} prefixes for {} sources",
                 prefixes.size(), sources.size());
  std::vector<ForcedStart> starts(sources.size());
  for (size_t i = 0; i < prefixes.size(); ++i) starts[i].ids = prefixes[i];  // all of them a prompt
  return search_with_starts(model, sources, options, streams, starts);
}

std::vector<SearchResult> search_with_starts(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                             const SearchOptions& options, const std::vector<uint64_t>& streams,
                                             const std::vector<ForcedStart>& starts) {
  validate_options(options);
  SEQTRANS_CHECK(streams.size() == sources.size(), "search: {} streams for {} sources", streams.size(), sources.size());
  SEQTRANS_CHECK(starts.size() == sources.size(), "search: {} forced starts for {} sources", starts.size(),
                 sources.size());
  if (sources.empty()) return {};
  SearchSession session(model, options);
  // One batch: its bounds are known, so the pools are sized once.
  DecoderReservation reservation;
  reservation.sentences = static_cast<int64_t>(sources.size());
  reservation.slots = reservation.sentences * slots_per_sentence(options);
  for (const auto& source : sources) {
    reservation.source_length = std::max<int64_t>(reservation.source_length, static_cast<int64_t>(source.size()));
    reservation.source_tokens += static_cast<int64_t>(source.size());
    reservation.target_length =
        std::max<int64_t>(reservation.target_length, max_generated_length(model, options, source.size()));
  }
  session.reserve(reservation);
  std::vector<SessionSentence> sentences;
  sentences.reserve(sources.size());
  for (size_t i = 0; i < sources.size(); ++i)
    sentences.push_back(SessionSentence{i, sources[i], streams[i], starts[i]});
  session.add(sentences);
  std::vector<SearchResult> results(sources.size());
  std::vector<FinishedSentence> finished;
  while (session.active_sentences() > 0) {
    // A share of any admission still under way (chunked prefill), then a step of the sentences decoding.
    session.continue_admission();
    if (session.decoding_sentences() == 0) continue;
    finished.clear();
    session.step(finished);
    for (FinishedSentence& sentence : finished) results[sentence.id] = std::move(sentence.result);
  }
  return results;
}

}  // namespace seqtrans

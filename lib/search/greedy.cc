#include "search/greedy.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "search/search.h"
#include "search/search_common.h"

namespace seqtrans {

int32_t argmax_id(ScoreRow row) {
  int32_t best_id = -1;
  float best_value = -std::numeric_limits<float>::infinity();
  for (int64_t id = 0; id < row.vocab; ++id) {
    // Strictly greater keeps the lowest id among equal scores; -inf and NaN never win.
    if (row.values[id] > best_value) {
      best_value = row.values[id];
      best_id = static_cast<int32_t>(id);
    }
  }
  return best_id;
}

std::vector<SearchResult> one_path_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                          const SearchOptions& options, const StepChooser& choose) {
  check_step_model(model);
  const int64_t vocab = model.target_vocab_size();
  const int32_t eos_id = model.eos_id();
  const std::vector<int> max_lengths = max_generated_lengths(model, sources, options);

  std::vector<SearchResult> results(sources.size());
  std::vector<Hypothesis> paths(sources.size());
  // Slot i of the decoder state decodes sentence active[i].
  std::vector<size_t> active(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) active[i] = i;
  std::vector<int32_t> input_ids(sources.size(), model.decoder_start_id());  // [slots]
  // Sentences whose result is final. With the shrinking batch they have left `active`; with naive
  // batching (options.shrink_batch false) their slots stay, are fed EOS, and their outputs are ignored.
  std::vector<char> done(sources.size(), 0);
  size_t remaining = sources.size();

  std::unique_ptr<DecoderState> state = model.encode(sources);
  std::vector<RowPosition> positions;
  std::vector<PathChoice> choices;
  for (int step = 0; remaining > 0; ++step) {
    const int64_t slots = static_cast<int64_t>(active.size());
    // Every unfinished path gains one token per step, so each has generated `step` tokens.
    positions.clear();
    for (size_t sentence : active) positions.push_back(RowPosition{step, max_lengths[sentence]});
    choose(*state, input_ids, active, positions, choices);

    std::vector<int32_t> kept_slots;
    std::vector<size_t> kept_sentences;
    std::vector<int32_t> next_input_ids;
    for (int64_t slot = 0; slot < slots; ++slot) {
      const size_t sentence = active[slot];
      if (!done[sentence]) {
        Hypothesis& path = paths[sentence];
        const PathChoice& choice = choices[slot];
        SEQTRANS_CHECK(choice.token >= 0 && choice.token < vocab && std::isfinite(choice.log_prob),
                       "sentence {}: no token has a finite score at step {}", sentence, step);
        path.score += choice.log_prob;
        if (choice.token == eos_id) {
          path.finished = true;
        } else {
          path.tokens.push_back(choice.token);
          path.finished = false;  // unless it goes on: cut by the maximum length
        }
        if (path.finished || static_cast<int>(path.tokens.size()) >= max_lengths[sentence]) {
          results[sentence].hypotheses.push_back(std::move(path));
          done[sentence] = 1;
          --remaining;
          // Finished sentences leave the batch at once so that no later step computes them.
          if (options.shrink_batch) continue;
        }
      }
      kept_slots.push_back(static_cast<int32_t>(slot));
      kept_sentences.push_back(sentence);
      next_input_ids.push_back(done[sentence] ? eos_id : paths[sentence].tokens.back());
    }

    if (remaining == 0) break;
    if (!is_identity_selection(kept_slots, slots)) model.select(*state, kept_slots);
    active = std::move(kept_sentences);
    input_ids = std::move(next_input_ids);
  }
  return results;
}

StepChooser logits_chooser(StepModel& model, const SearchOptions& options, const TokenPicker& pick) {
  // Shared so that the chooser stays copyable (std::function) while the chains are built once.
  const auto mask_chain = std::make_shared<LogitsProcessorChain>(make_mask_chain(model, options));
  const auto log_prob_chain = std::make_shared<LogitsProcessorChain>(make_log_prob_chain(model, options));
  return [&model, pick, mask_chain, log_prob_chain](DecoderState& state, const std::vector<int32_t>& input_ids,
                                                    const std::vector<size_t>& sentences,
                                                    const std::vector<RowPosition>& positions,
                                                    std::vector<PathChoice>& choices) {
    const int64_t slots = static_cast<int64_t>(input_ids.size());
    const Tensor logits = host_logits(model.step(state, input_ids), slots, model.target_vocab_size());
    std::vector<float> masked_scratch, log_prob_scratch;  // [vocab]
    choices.assign(static_cast<size_t>(slots), PathChoice{});
    for (int64_t slot = 0; slot < slots; ++slot) {
      const int32_t token = pick(sentences[slot], processed_row(logits, slot, *mask_chain, positions[slot], masked_scratch),
                                 positions[slot]);
      if (token < 0) continue;
      const ScoreRow log_probs = processed_row(logits, slot, *log_prob_chain, positions[slot], log_prob_scratch);
      choices[slot] = PathChoice{token, log_probs.values[token]};
    }
  };
}

std::vector<SearchResult> greedy_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                        const SearchOptions& options) {
  validate_options(options);
  SEQTRANS_CHECK(options.num_hypotheses == 1, "greedy search returns 1 hypothesis, got num_hypotheses {}",
                 options.num_hypotheses);
  const std::vector<int32_t> suppressed = suppressed_without_eos(model);
  const int32_t eos_id = model.eos_id();
  StepCandidates candidates;
  const StepChooser choose = [&](DecoderState& state, const std::vector<int32_t>& input_ids,
                                 const std::vector<size_t>& /*sentences*/, const std::vector<RowPosition>& positions,
                                 std::vector<PathChoice>& choices) {
    // Every path of one batch has generated the same number of tokens, so one request serves all slots.
    CandidateRequest request{1, suppressed};
    if (!positions.empty() && positions.front().generated < options.min_length) request.suppressed_ids.push_back(eos_id);
    model.step_candidates(state, input_ids, request, candidates);
    choices.resize(input_ids.size());
    for (size_t slot = 0; slot < input_ids.size(); ++slot) {
      const bool forced = options.force_eos_at_max_length &&
                          positions[slot].generated == positions[slot].max_generated - 1;
      choices[slot] = forced ? PathChoice{eos_id, 0.0f} : PathChoice{candidates.ids[slot], candidates.log_probs[slot]};
    }
  };
  return one_path_search(model, sources, options, choose);
}

}  // namespace seqtrans

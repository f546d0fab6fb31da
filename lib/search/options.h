// Decoding settings: options passed to search, never stored in the model file.
#pragma once

#include <cstdint>

namespace seqtrans {

enum class SearchKind { Greedy, Beam, Sampling };

// When beam search stops for a sentence (Hugging Face's `early_stopping`).
enum class BeamStopping {
  // Stop once the best running hypothesis can no longer beat the worst of the finished ones (HF False).
  Heuristic,
  // Stop as soon as beam_size hypotheses have finished (HF True).
  FirstComplete,
  // Run until no running hypothesis could ever improve the n-best, given the maximum length (HF "never").
  Never,
};

struct SearchOptions {
  // 1 = greedy (or sampling, see below); > 1 = beam search.
  int beam_size = 4;
  // Hypotheses returned per sentence: at most beam_size in beam search; with sampling, the number of
  // independent samples drawn per sentence (any number).
  int num_hypotheses = 1;
  // Score of a finished hypothesis = sum of log-probs / (generated length ^ length_penalty).
  // Generated length counts the EOS token (as Hugging Face does).
  float length_penalty = 1.0f;
  BeamStopping beam_stopping = BeamStopping::Heuristic;
  // Diverse beam search (Vijayakumar et al., 2018) with HF 4.x group beam search semantics: the beam splits
  // into beam_groups groups of beam_size / beam_groups beams, stepped one after the other; a token's score
  // in a group drops by diversity_penalty for each beam of an earlier group that took it at this step
  // (Hamming diversity). 1 = plain beam search.
  int beam_groups = 1;
  float diversity_penalty = 0.0f;

  // Maximum generated tokens (EOS included) = max_length_a + max_length_b * source length
  // (source length counts the source EOS), capped by the model's positions.
  int max_length_a = 256;
  float max_length_b = 0.0f;
  // EOS is not allowed before this many tokens were generated (HF min_new_tokens); the synthetic
  // benchmark uses it with max_length to force an exact output length.
  int min_length = 0;
  // Force EOS as the last token when the maximum length is reached (HF forced_eos_token_id): outputs at the
  // limit keep max - 1 tokens, and the forced EOS adds log-prob 0. The translator sets it from the model
  // file unless the caller chose (generation_defaults.h).
  bool force_eos_at_max_length = false;
  // true: a sentence leaves the decoder batch as soon as it is done, so later steps compute only the
  // sentences still searching. false: the naive batching that the benchmark's --naive-batching ablation
  // measures: done sentences keep their slots (beam_size each in beam search) and are stepped, their
  // outputs ignored, until every sentence of the batch is done. Results are the same either way.
  bool shrink_batch = true;

  // Hugging Face's repetition controls, in any search: the logits (log-probs in beam search) of ids already
  // among the decoder inputs are multiplied (< 0) or divided (>= 0) by repetition_penalty, and ids that
  // would repeat an n-gram of no_repeat_ngram_size ids get -inf. 1 and 0 = off.
  float repetition_penalty = 1.0f;
  int no_repeat_ngram_size = 0;

  // Sampling (with beam_size 1): used when sampling_topk != 1 (0 = whole vocabulary), sampling_topp < 1 or
  // sampling_minp > 0; Hugging Face's warpers in HF's order: temperature, top-k, top-p, min-p.
  int sampling_topk = 1;
  float sampling_topp = 1.0f;
  float sampling_minp = 0.0f;
  float temperature = 1.0f;
  // With the input line number, the step and the sample index, the key of every draw (core/philox.h).
  uint64_t seed = 0;
};

}  // namespace seqtrans

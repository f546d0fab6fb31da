#!/usr/bin/env python3
"""Writes test/search/hf_reference_cases.h: what Hugging Face transformers 4.x generation returns for
greedy search and diverse (group) beam search with repetition controls and target prefixes (given to HF as
decoder_input_ids = [decoder start] + prefix), computed by a numpy port of it.

Group beam search left the core library after the 4.x series, so seqtrans follows the last 4.x code
(transformers 4.4x-4.55), ported here step by step from:
  - generation/utils.py: GenerationMixin._sample (greedy, do_sample=False) and _group_beam_search;
  - generation/beam_search.py: BeamSearchScorer.process and finalize with num_beam_groups, BeamHypotheses;
  - generation/logits_process.py: HammingDiversityLogitsProcessor, RepetitionPenaltyLogitsProcessor,
    NoRepeatNGramLogitsProcessor, NoBadWordsLogitsProcessor (Marian's pad) and
    ForcedEOSTokenLogitsProcessor, in _get_logits_processor's order.
numpy float32 stands in for torch's fp32 CPU tensors; Python floats (doubles) stay doubles, as in HF.
The fake model is test/search/hash_logits.h's (hash_logits.py). Needs numpy only:

    python test/search/hf_generation_reference.py    # regenerate hf_reference_cases.h

Conventions of seqtrans that HF leaves open, mirrored here so that results compare exactly:
  - torch.topk's order among equal scores is unspecified: ties go to the lower flat index (beam * V + id);
  - greedy scores (HF reports none) are sums of log_softmax(processed logits)[token], the pad masked after
    the normalization, a forced EOS adding 0.
Cases where HF's -1e9 placeholder beams would reach the candidates are left out (seqtrans considers only
real beams; see beam_search.cc).
"""

import math
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpp_literals import cpp_float, cpp_list, stopping_name  # noqa: E402
from hash_logits import hash_logits  # noqa: E402

VOCAB = 10
EOS = 0
PAD = 9  # Marian: pad is also the decoder start id, and a bad word
F32 = np.float32
NEG_INF = F32(-np.inf)


class PlaceholderReached(Exception):
    """HF's -1e9 placeholder beams entered the candidates: seqtrans differs there by design."""


def logits_row(case, source, prefix):
    return np.array(hash_logits(source, prefix, VOCAB, case["spread"], EOS, case["eos_bias"]), dtype=F32)


def log_softmax(row):
    """fp32 log_softmax; the exp-sum in double (as seqtrans' CPU ops)."""
    top = row.max()
    if top == NEG_INF:
        return row.copy()
    shifted = (row - top).astype(F32)
    return (shifted - F32(math.log(np.exp(shifted.astype(np.float64)).sum()))).astype(F32)


# ---- logits processors (per hypothesis: its decoder input ids and its score row) ----


def hamming_diversity(scores, previous_tokens, penalty):
    """HammingDiversityLogitsProcessor: minus penalty x how often earlier groups chose the token at this step."""
    frequency = np.bincount(np.array(previous_tokens, dtype=np.int64), minlength=VOCAB).astype(F32)
    return (scores - F32(penalty) * frequency).astype(F32)


def repetition_penalty(ids, scores, penalty):
    """RepetitionPenaltyLogitsProcessor: gather the scores of the input ids, scale them, scatter them back."""
    out = scores.copy()
    for token in ids:
        value = scores[token]
        out[token] = value * F32(penalty) if value < 0 else value / F32(penalty)
    return out


def no_repeat_ngram(ids, scores, size):
    """NoRepeatNGramLogitsProcessor: _get_ngrams over the input ids, then the n-grams continuing the last n - 1."""
    cur_len = len(ids)
    if cur_len + 1 < size:
        return scores
    generated = {}
    for ngram in zip(*[ids[i:] for i in range(size)]):
        generated.setdefault(tuple(ngram[:-1]), []).append(ngram[-1])
    out = scores.copy()
    for token in generated.get(tuple(ids[cur_len + 1 - size : cur_len]), []):
        out[token] = NEG_INF
    return out


def process(case, ids, scores, max_length):
    """The processors after diversity, in HF's order: repetition penalty, no-repeat n-gram, bad words (pad),
    forced EOS at max_length - 1 (max_length counts the decoder start id, as HF's)."""
    if case["repetition"] != 1.0:
        scores = repetition_penalty(ids, scores, case["repetition"])
    if case["ngram"] > 0:
        scores = no_repeat_ngram(ids, scores, case["ngram"])
    scores = scores.copy()
    scores[PAD] = NEG_INF
    if case["force_eos"] and len(ids) == max_length - 1:
        scores[:] = NEG_INF
        scores[EOS] = 0
    return scores


# ---- greedy search (GenerationMixin._sample, do_sample=False) ----


def greedy(case, source, prefix, max_new):
    ids = [PAD] + prefix
    total = F32(0)
    max_length = max_new + len(ids)
    while True:
        raw = logits_row(case, source, ids)
        z = raw
        if case["repetition"] != 1.0:
            z = repetition_penalty(ids, z, case["repetition"])
        if case["ngram"] > 0:
            z = no_repeat_ngram(ids, z, case["ngram"])
        # seqtrans' score normalizes the processed logits, then masks (HF's argmax is the same).
        scores = log_softmax(z)
        scores[PAD] = NEG_INF
        forced = case["force_eos"] and len(ids) == max_length - 1
        if forced:
            scores[:] = NEG_INF
            scores[EOS] = 0
        token = int(np.argmax(scores))
        total = F32(total + scores[token])
        if token == EOS:
            return [(ids[1:], float(total), True)]
        ids.append(token)
        if len(ids) >= max_length:
            return [(ids[1:], float(total), False)]


# ---- group beam search (GenerationMixin._group_beam_search, BeamSearchScorer, BeamHypotheses) ----


class BeamHypotheses:
    def __init__(self, num_beams, length_penalty, early_stopping, max_length):
        self.num_beams = num_beams
        self.length_penalty = length_penalty
        self.early_stopping = early_stopping
        self.max_length = max_length
        self.beams = []  # (score, ids without the start id, finished)
        self.worst_score = 1e9

    def add(self, ids, sum_logprobs, generated_len, finished):
        score = sum_logprobs / (generated_len**self.length_penalty)
        if len(self.beams) < self.num_beams or score > self.worst_score:
            self.beams.append((score, ids, finished))
            if len(self.beams) > self.num_beams:
                ranked = sorted([(s, index) for index, (s, _, _) in enumerate(self.beams)])
                del self.beams[ranked[0][1]]
                self.worst_score = ranked[1][0]
            else:
                self.worst_score = min(score, self.worst_score)

    def is_done(self, best_sum_logprobs, cur_len, decoder_prompt_len):
        if len(self.beams) < self.num_beams:
            return False
        if self.early_stopping is True:
            return True
        if self.early_stopping is False or self.length_penalty <= 0.0:
            highest = best_sum_logprobs / (cur_len - decoder_prompt_len) ** self.length_penalty
        else:
            highest = best_sum_logprobs / (self.max_length - decoder_prompt_len) ** self.length_penalty
        return self.worst_score >= highest


def top_candidates(rows, count):
    """torch.topk over the flattened [group beams x vocab] scores, ties to the lower flat index."""
    flat = np.concatenate(rows)
    order = sorted(range(len(flat)), key=lambda i: (-float(flat[i]), i))[:count]
    return [(float(flat[i]), i % VOCAB, i // VOCAB) for i in order]


def group_beam_search(case, source, prefix, max_new):
    beams, groups = case["beams"], case["groups"]
    group_size = beams // groups
    prompt = 1 + len(prefix)  # HF's decoder_prompt_len: the start id and the prefix
    max_length = max_new + prompt  # HF's, with the prompt
    input_ids = [[PAD] + prefix for _ in range(beams)]
    beam_scores = np.full(beams, -1e9, dtype=F32)
    beam_scores[::group_size] = 0
    hypotheses = [BeamHypotheses(group_size, case["lp"], case["stopping"], max_length) for _ in range(groups)]
    done = [False] * groups
    while True:
        cur_len = len(input_ids[0])
        current_tokens = [0] * beams
        next_ids = [list(ids) for ids in input_ids]
        for group in range(groups):
            members = range(group * group_size, (group + 1) * group_size)
            rows = []
            for beam in members:
                scores = log_softmax(logits_row(case, source, input_ids[beam]))
                if group > 0 and case["diversity"] != 0.0:
                    scores = hamming_diversity(scores, current_tokens[: group * group_size], case["diversity"])
                scores = process(case, input_ids[beam], scores, max_length)
                rows.append((scores + beam_scores[beam]).astype(F32))
            candidates = top_candidates(rows, 2 * group_size)
            if done[group]:
                # HF pads a done group: its beams continue beam 0 of the group with the pad id, scored 0.
                for beam in members:
                    next_ids[beam] = input_ids[members[0]] + [PAD]
                    beam_scores[beam] = 0
                    current_tokens[beam] = PAD
                continue
            chosen = []
            for rank, (score, token, index) in enumerate(candidates):
                # Placeholders, or -inf candidates HF would still take: seqtrans takes real candidates only.
                if score < -1e8:
                    raise PlaceholderReached()
                parent = input_ids[members[index]]
                if token == EOS:
                    if rank >= group_size:
                        continue
                    hypotheses[group].add(parent[1:], score, cur_len + 1 - prompt, True)
                else:
                    chosen.append((score, token, parent))
                if len(chosen) == group_size:
                    break
            if len(chosen) < group_size:
                raise PlaceholderReached()
            for beam, (score, token, parent) in zip(members, chosen):
                next_ids[beam] = parent + [token]
                beam_scores[beam] = score
                current_tokens[beam] = token
            done[group] = done[group] or hypotheses[group].is_done(
                max(score for score, _, _ in candidates), cur_len + 1, prompt
            )
        input_ids = next_ids
        if all(done) or len(input_ids[0]) >= max_length:
            break
    for group in range(groups):
        if done[group]:
            continue
        for beam in range(group * group_size, (group + 1) * group_size):
            ids = input_ids[beam]
            hypotheses[group].add(ids[1:], float(beam_scores[beam]), len(ids) - prompt, False)
    ranked = sorted([beam for group in hypotheses for beam in group.beams], key=lambda beam: beam[0])
    return [(ids, score, finished) for score, ids, finished in reversed(ranked[-case["n"] :])]


# ---- repetition processors alone, on rows of logits ----


def processor_cases(rng):
    cases = []
    for index in range(24):
        length = rng.randint(0, 12)
        history = [rng.randint(0, VOCAB - 1) for _ in range(length)]
        if index % 3 == 0 and length >= 4:
            history[-2:] = history[1:3]  # an n-gram that repeats
        scores = np.array([rng.uniform(-4.0, 4.0) for _ in range(VOCAB)], dtype=F32)
        if index % 4 == 0:
            scores[rng.randint(0, VOCAB - 1)] = 0.0
        penalty = [1.0, 1.3, 0.7, 2.5][index % 4]
        ngram = [0, 1, 2, 3, 4][index % 5]
        expected = scores
        if penalty != 1.0:
            expected = repetition_penalty(history, expected, penalty)
        if ngram > 0:
            expected = no_repeat_ngram(history, expected, ngram)
        cases.append(dict(scores=scores, history=history, penalty=penalty, ngram=ngram, expected=expected))
    return cases


# ---- cases ----


def max_new_tokens(case, source):
    return max(1, math.floor(case["a"] + case["b"] * len(source) + 1e-4))


def random_prefixes(rng, case):
    """Every third case: a target prefix of 1 to 3 word ids for some sentences (none for the others)."""
    if rng.random() >= 1 / 3:
        return [[] for _ in case["sources"]]
    return [[rng.randint(1, 8) for _ in range(rng.randint(1, 3))] if rng.random() < 0.7 else [] for _ in case["sources"]]


def make_search_cases(rng):
    cases = []
    stoppings = [False, True, "never"]
    penalties = [1.0, 0.0, 2.0, 0.5]
    for index in range(100):
        groups = [2, 2, 3, 4][index % 4]
        group_size = [1, 2, 2][index % 3] if groups < 4 else 1
        case = dict(
            beams=groups * group_size,
            groups=groups,
            diversity=[0.0, 0.5, 1.0, 3.0][index % 4],
            n=rng.randint(1, groups * group_size),
            lp=penalties[index % len(penalties)],
            stopping=stoppings[(index // 4) % 3],
            a=rng.randint(1, 7),
            b=0.0,
            force_eos=rng.random() < 0.3,
            repetition=[1.0, 1.0, 1.5, 0.8][(index // 2) % 4],
            ngram=[0, 0, 2, 3][(index // 3) % 4],
            spread=rng.choice([1.0, 2.0, 4.0]),
            eos_bias=rng.choice([-1.0, 0.0, 1.0, 2.0, 3.0]),
            sources=[[rng.randint(1, 8) for _ in range(rng.randint(1, 5))] + [EOS] for _ in range(rng.randint(1, 3))],
        )
        if index % 5 == 4:  # per-sentence maximum lengths
            case["a"] = rng.randint(0, 2)
            case["b"] = rng.choice([0.5, 1.5])
        case["prefixes"] = random_prefixes(rng, case)
        cases.append(case)
    for index in range(24):
        case = dict(
            beams=1,
            groups=1,
            diversity=0.0,
            n=1,
            lp=1.0,
            stopping=False,
            a=rng.randint(2, 9),
            b=0.0,
            force_eos=index % 4 == 0,
            repetition=[1.0, 1.3, 2.0, 0.7][index % 4],
            ngram=[0, 1, 2, 3][(index // 4) % 4],
            spread=rng.choice([1.0, 2.0]),
            eos_bias=rng.choice([-2.0, -1.0, 0.0]),
            sources=[[rng.randint(1, 8) for _ in range(rng.randint(1, 6))] + [EOS] for _ in range(rng.randint(1, 3))],
        )
        case["prefixes"] = random_prefixes(rng, case)
        cases.append(case)
    return cases


def expected_results(case):
    search = greedy if case["beams"] == 1 else group_beam_search
    return [
        search(case, source, prefix, max_new_tokens(case, source))
        for source, prefix in zip(case["sources"], case["prefixes"])
    ]


HEADER = """// Generated by test/search/hf_generation_reference.py (a numpy port of transformers 4.x generation) on
// hash_logits.h's fake model; do not edit by hand. Re-run the script to regenerate.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "search/options.h"

namespace seqtrans {
namespace testing {

// HF's repetition processors on one row of logits.
struct HfProcessorCase {
  std::vector<float> scores;     // [vocab]
  std::vector<int32_t> history;  // decoder input ids
  float penalty;
  int no_repeat_ngram;
  std::vector<float> expected;   // [vocab]
};

struct HfReferenceHypothesis {
  std::vector<int32_t> tokens;
  float score;
  bool finished;
};

// Greedy search (beam_size 1) or group beam search, each sentence run alone.
struct HfReferenceCase {
  int beam_size;
  int beam_groups;
  float diversity_penalty;
  int num_hypotheses;
  float length_penalty;
  BeamStopping stopping;
  int max_length_a;
  float max_length_b;
  bool force_eos;
  float repetition_penalty;
  int no_repeat_ngram;
  double spread;
  double eos_bias;
  std::vector<std::vector<int32_t>> sources;
  std::vector<std::vector<int32_t>> prefixes;  // per sentence, empty: none
  std::vector<std::vector<HfReferenceHypothesis>> expected;  // per sentence, best first
};
"""


def main():
    rng = random.Random(20250301)
    lines = HEADER.splitlines()
    lines += [
        "",
        f"constexpr int64_t kReferenceVocab = {VOCAB};",
        f"constexpr int32_t kReferenceEos = {EOS};",
        f"constexpr int32_t kReferencePad = {PAD};",
        "",
        "inline const std::vector<HfProcessorCase>& hf_processor_cases() {",
        "  constexpr float kInf = std::numeric_limits<float>::infinity();",
        "  static const std::vector<HfProcessorCase> cases = {",
    ]
    for case in processor_cases(rng):
        lines.append(
            f"      {{{cpp_list(case['scores'], cpp_float)}, {cpp_list(case['history'])}, {cpp_float(case['penalty'])}, "
            f"{case['ngram']}, {cpp_list(case['expected'], cpp_float)}}},"
        )
    lines += ["  };", "  return cases;", "}", "", "inline const std::vector<HfReferenceCase>& hf_reference_cases() {"]
    lines += ["  static const std::vector<HfReferenceCase> cases = {"]
    skipped = 0
    for case in make_search_cases(rng):
        try:
            results = expected_results(case)
        except PlaceholderReached:
            skipped += 1
            continue
        lines.append(
            f"      {{{case['beams']}, {case['groups']}, {cpp_float(case['diversity'])}, {case['n']}, "
            f"{cpp_float(case['lp'])}, {stopping_name(case['stopping'])}, {case['a']}, {cpp_float(case['b'])}, "
            f"{str(case['force_eos']).lower()}, {cpp_float(case['repetition'])}, {case['ngram']}, "
            f"{case['spread']!r}, {case['eos_bias']!r},"
        )
        lines.append("       " + cpp_list(case["sources"], cpp_list) + ",")
        lines.append("       " + cpp_list(case["prefixes"], cpp_list) + ",")
        lines.append("       {")
        for hypotheses in results:
            items = ", ".join(
                f"{{{cpp_list(tokens)}, {cpp_float(F32(score))}, {str(finished).lower()}}}"
                for tokens, score, finished in hypotheses
            )
            lines.append(f"           {{{items}}},")
        lines.append("       }},")
    lines += ["  };", "  return cases;", "}", "", "}  // namespace testing", "}  // namespace seqtrans", ""]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_reference_cases.h")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {path}; skipped {skipped} cases where HF's placeholder beams reach the candidates")


if __name__ == "__main__":
    main()

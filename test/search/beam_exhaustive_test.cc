// Beam search of a tiny random model against exhaustive search over every hypothesis: vocabulary of 5
// (EOS = 0, start = 4, nothing suppressed), at most 4 generated tokens, logits a hash of the prefix.
#include <algorithm>
#include <cmath>
#include <vector>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

constexpr int64_t kVocab = 5;
constexpr int32_t kEos = 0;
constexpr int32_t kStart = 4;
constexpr int kMaxLength = 4;

std::vector<float> tiny_logits(const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
  return hash_logits(source, prefix, kVocab, 2.0, kEos, 0.5);
}

struct Path {
  std::vector<int32_t> tokens;  // without EOS
  double log_prob = 0.0;
  int length = 0;  // generated tokens, EOS included
  bool finished = false;
};

double log_softmax_at(const std::vector<float>& logits, int32_t id) {
  double max_value = logits[0];
  for (float value : logits) max_value = std::max(max_value, static_cast<double>(value));
  double sum = 0.0;
  for (float value : logits) sum += std::exp(value - max_value);
  return logits[id] - max_value - std::log(sum);
}

// Every hypothesis a search could return: EOS-terminated ones of length 1..max and the unfinished ones
// cut at the maximum length.
void enumerate(const std::vector<int32_t>& source, Path path, std::vector<Path>& out) {
  std::vector<int32_t> prefix = {kStart};
  prefix.insert(prefix.end(), path.tokens.begin(), path.tokens.end());
  const std::vector<float> logits = tiny_logits(source, prefix);
  for (int32_t token = 0; token < kVocab; ++token) {
    Path next = path;
    next.log_prob += log_softmax_at(logits, token);
    next.length += 1;
    if (token == kEos) {
      next.finished = true;
      out.push_back(next);
      continue;
    }
    next.tokens.push_back(token);
    if (next.length == kMaxLength) {
      out.push_back(next);
    } else {
      enumerate(source, next, out);
    }
  }
}

double normalized(const Path& path, float length_penalty) {
  return path.log_prob / std::pow(static_cast<double>(path.length), static_cast<double>(length_penalty));
}

std::vector<Path> exhaustive_ranking(const std::vector<int32_t>& source, float length_penalty) {
  std::vector<Path> paths;
  enumerate(source, Path{}, paths);
  std::stable_sort(paths.begin(), paths.end(), [length_penalty](const Path& a, const Path& b) {
    return normalized(a, length_penalty) > normalized(b, length_penalty);
  });
  return paths;
}

SearchOptions tiny_options(int beam_size, int num_hypotheses, float length_penalty, BeamStopping stopping) {
  SearchOptions options;
  options.beam_size = beam_size;
  options.num_hypotheses = num_hypotheses;
  options.length_penalty = length_penalty;
  options.beam_stopping = stopping;
  options.max_length_a = kMaxLength;
  options.max_length_b = 0.0f;
  return options;
}

const std::vector<std::vector<int32_t>> kSources = {{1, 0},          {2, 3, 0}, {3, 3, 1, 0},
                                                    {1, 2, 3, 2, 0}, {2, 0},    {1, 1, 0}};

}  // namespace

TEST_CASE("beam search wide enough to keep every path equals exhaustive search", "[search][beam][exhaustive]") {
  // 4^3 = 64 running prefixes at most and 341 complete paths: a beam of 400 never prunes and never fills
  // its finished set early, so it must return the exhaustive ranking.
  for (float length_penalty : {1.0f, 0.0f, 0.6f, 2.0f, -0.5f}) {
    for (BeamStopping stopping : {BeamStopping::Heuristic, BeamStopping::FirstComplete, BeamStopping::Never}) {
      FakeStepModel model(kVocab, kEos, kStart, {}, tiny_logits);
      const auto results = search(model, kSources, tiny_options(400, 5, length_penalty, stopping));
      for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
        INFO("length_penalty " << length_penalty << ", sentence " << sentence);
        const std::vector<Path> ranking = exhaustive_ranking(kSources[sentence], length_penalty);
        REQUIRE(ranking.size() == 341);
        const auto& hypotheses = results[sentence].hypotheses;
        REQUIRE(hypotheses.size() == 5);
        for (size_t rank = 0; rank < hypotheses.size(); ++rank) {
          CHECK(hypotheses[rank].tokens == ranking[rank].tokens);
          CHECK(hypotheses[rank].finished == ranking[rank].finished);
          CHECK(hypotheses[rank].score == Approx(normalized(ranking[rank], length_penalty)).epsilon(1e-5));
        }
      }
    }
  }
}

TEST_CASE("narrow beams never beat exhaustive search and report true scores", "[search][beam][exhaustive]") {
  for (float length_penalty : {1.0f, 0.0f, 2.0f}) {
    for (BeamStopping stopping : {BeamStopping::Heuristic, BeamStopping::FirstComplete, BeamStopping::Never}) {
      for (int beam_size = 1; beam_size <= 6; ++beam_size) {
        FakeStepModel model(kVocab, kEos, kStart, {}, tiny_logits);
        const auto results = search(model, kSources, tiny_options(beam_size, beam_size, length_penalty, stopping));
        for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
          INFO("beam " << beam_size << ", length_penalty " << length_penalty << ", sentence " << sentence);
          const std::vector<Path> ranking = exhaustive_ranking(kSources[sentence], length_penalty);
          const double best = normalized(ranking.front(), length_penalty);
          REQUIRE_FALSE(results[sentence].hypotheses.empty());
          for (const Hypothesis& hypothesis : results[sentence].hypotheses) {
            CHECK(hypothesis.score <= best + 1e-5);
            // Greedy scores are plain sums, so compare the beam ones only against their own path.
            if (beam_size == 1) continue;
            const auto path = std::find_if(ranking.begin(), ranking.end(), [&](const Path& candidate) {
              return candidate.tokens == hypothesis.tokens && candidate.finished == hypothesis.finished;
            });
            REQUIRE(path != ranking.end());
            CHECK(hypothesis.score == Approx(normalized(*path, length_penalty)).epsilon(1e-5));
          }
        }
      }
    }
  }
}

}  // namespace testing
}  // namespace seqtrans

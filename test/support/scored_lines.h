// The e2e tests' comparison of two runs' output: the same texts, and scores equal to the last printed
// digit (a BLAS rounds a row's product differently for different row counts, so batch sizes may move a
// score by an ulp; --batch-invariant removes that, and batch_invariance_test.cc compares bytes).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch.h"
#include "support/process.h"

namespace seqtrans::testing {

// Output lines with their scores ("score ||| text" or "index ||| text ||| score") set apart.
struct ScoredLines {
  std::vector<std::string> texts;
  std::vector<double> scores;
};

inline ScoredLines parse_scored_lines(const std::string& output) {
  ScoredLines parsed;
  for (const std::string& line : split_lines(output)) {
    std::string text = line;
    const size_t first = line.find(" ||| "), last = line.rfind(" ||| ");
    if (first != std::string::npos && first == last) {  // score ||| text
      parsed.scores.push_back(std::stod(line.substr(0, first)));
      text = line.substr(first + 5);
    } else if (first != std::string::npos) {  // index ||| text ||| score
      parsed.scores.push_back(std::stod(line.substr(last + 5)));
      text = line.substr(0, last);
    }
    parsed.texts.push_back(text);
  }
  return parsed;
}

inline void check_same_lines(const std::string& output, const std::string& reference) {
  const ScoredLines got = parse_scored_lines(output), want = parse_scored_lines(reference);
  CHECK(got.texts == want.texts);
  REQUIRE(got.scores.size() == want.scores.size());
  double worst = 0.0;
  for (size_t i = 0; i < got.scores.size(); ++i) worst = std::max(worst, std::abs(got.scores[i] - want.scores[i]));
  CHECK(worst <= 2e-4);  // the last printed digit
}

}  // namespace seqtrans::testing

// What search returns for one source sentence.
#pragma once

#include <cstdint>
#include <vector>

namespace seqtrans {

struct Hypothesis {
  std::vector<int32_t> tokens;  // generated ids, without the decoder start id and without EOS
  float score = 0.0f;           // length-normalized (beam) or summed (greedy, sampling) log-probability
  bool finished = true;         // false when cut by the maximum length without EOS
};

struct SearchResult {
  std::vector<Hypothesis> hypotheses;  // best first, at most SearchOptions::num_hypotheses
};

}  // namespace seqtrans

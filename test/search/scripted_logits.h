// Next-token distributions written per decoder prefix, for search scenarios whose expected beams are
// worked out by hand (and confirmed by hf_beam_crosscheck.py --scripted).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace seqtrans {
namespace testing {

// Vocabulary of the scripted scenarios: EOS, six words, and a pad id that is also the decoder start id
// and is suppressed (Marian's layout).
constexpr int64_t kScriptVocab = 8;
constexpr int32_t kScriptEos = 0;
constexpr int32_t kScriptPad = 7;

// Maps generated prefixes (start id excluded) to probabilities; logits are log(p), so log_softmax gives
// log(p) back. Ids not listed share the remaining mass evenly (the pad id included, so masking it after
// log_softmax leaves the listed log-probs unchanged).
class ScriptedTable {
 public:
  explicit ScriptedTable(std::map<int32_t, double> default_row) : default_row_(std::move(default_row)) {}

  ScriptedTable& on(const std::vector<int32_t>& generated, std::map<int32_t, double> probabilities) {
    rows_[generated] = std::move(probabilities);
    return *this;
  }

  // `prefix` is the decoder input so far, starting with the start id.
  std::vector<float> logits(const std::vector<int32_t>& prefix) const {
    const std::vector<int32_t> generated(prefix.begin() + 1, prefix.end());
    const auto found = rows_.find(generated);
    const std::map<int32_t, double>& row = found == rows_.end() ? default_row_ : found->second;
    double listed = 0.0;
    for (const auto& entry : row) listed += entry.second;
    SEQTRANS_CHECK(listed <= 1.0 + 1e-12 && row.size() < static_cast<size_t>(kScriptVocab), "bad scripted row");
    const double rest = (1.0 - listed) / static_cast<double>(kScriptVocab - static_cast<int64_t>(row.size()));
    std::vector<float> values(kScriptVocab);  // [vocab]
    for (int32_t id = 0; id < kScriptVocab; ++id) {
      const auto probability = row.find(id);
      values[id] = static_cast<float>(std::log(probability == row.end() ? rest : probability->second));
    }
    return values;
  }

 private:
  std::map<int32_t, double> default_row_;
  std::map<std::vector<int32_t>, std::map<int32_t, double>> rows_;
};

}  // namespace testing
}  // namespace seqtrans

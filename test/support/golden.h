// Golden outputs recorded from Hugging Face generate() by scripts/make_golden.py.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "search/options.h"

namespace seqtrans::testing {

struct GoldenCase {
  std::string source_text;
  std::vector<int32_t> source_ids;  // EOS included
  std::vector<int32_t> output_ids;  // EOS and decoder start excluded
  bool finished = true;
  float score = 0.0f;
};

struct GoldenFile {
  std::map<std::string, std::string> settings;  // from the "# key=value ..." first line
  std::vector<GoldenCase> cases;
};

// The search settings a golden's `# key=value` line records (num_beams, max_new_tokens, forced_eos_token_id,
// repetition controls, length penalty and early stopping for beams), one hypothesis per line.
SearchOptions golden_search_options(const GoldenFile& golden);

// Reads a golden .tsv; throws seqtrans::Error on a malformed line.
GoldenFile read_golden(const std::string& path);

// The first `count` source lines of the Marian golden inputs (newstest, Multi30k, Tatoeba and odd lines, 1 to
// 229 source ids, one blank), one per line, for tests that run the CLI on them.
std::string golden_source_lines(size_t count);

// test/data/<name> (a golden checkpoint in the hub's layout: marian_tiny, nllb_tiny, llama_tiny_gqa2, ...)
// converted with scripts/convert_hf.py (fp32), once per name and test binary. The converted files are not kept
// in the repository: the checkpoints are the source, and the device machines take a tree of at most 64 MiB.
const std::string& converted_golden_model(const std::string& name);

// converted_golden_model("marian_tiny").
const std::string& converted_tiny_model();

// Runs `command` through the shell; returns its exit status (tests use it for the converter and the CLI).
int run_command(const std::string& command);

}  // namespace seqtrans::testing

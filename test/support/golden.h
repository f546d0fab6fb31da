// Golden outputs recorded from Hugging Face generate() by scripts/make_golden.py.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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

// Reads a golden .tsv; throws seqtrans::Error on a malformed line.
GoldenFile read_golden(const std::string& path);

// test/data/<name> (a golden checkpoint: marian_tiny, marian_separate) converted with
// scripts/convert_marian.py (fp32), once per name and test binary.
const std::string& converted_golden_model(const std::string& name);

// converted_golden_model("marian_tiny").
const std::string& converted_tiny_model();

// Runs `command` through the shell; returns its exit status (tests use it for the converter and the CLI).
int run_command(const std::string& command);

}  // namespace seqtrans::testing

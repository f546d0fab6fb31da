// `seqtrans generate`: prompts in (one per line, or JSON objects), one completion per line out, in order,
// with a decoder-only model.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common_options.h"

namespace seqtrans::app {

struct GenerateOptions {
  CommonOptions common;
  std::vector<std::string> inputs;  // empty: stdin
  std::string output;               // empty: stdout
  bool jsonl = false;               // {"prompt": ...} in, {"text": ..., "tokens": N} out
  std::vector<std::string> stops;   // a completion ends before the first of these
};

CLI::App* add_generate_command(CLI::App& app, GenerateOptions& options);
int run_generate(GenerateOptions& options);

}  // namespace seqtrans::app

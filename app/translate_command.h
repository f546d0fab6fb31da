// `seqtrans translate`: stdin or files in, one translation per input line out, in input order.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common_options.h"

namespace seqtrans::app {

struct TranslateOptions {
  CommonOptions common;
  std::vector<std::string> inputs;  // empty: stdin
  std::string output;               // empty: stdout (or --output-dir)
  std::string output_dir;
  bool with_scores = false;
  std::string target_prefix;  // file of per-line target prefixes; empty: none
};

CLI::App* add_translate_command(CLI::App& app, TranslateOptions& options);
int run_translate(TranslateOptions& options);

}  // namespace seqtrans::app

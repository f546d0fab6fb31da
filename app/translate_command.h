// `seqtrans translate`: stdin or files in, one translation per input line out, in input order.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common_options.h"
#include "translator_group.h"

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

// `seqtrans translate -i input -o output [--with-scores]` once the translator is loaded: the output file
// is refused, written and replaced as -o says; warnings (truncated lines) go to `warn`. The Python
// package's translate_file.
void translate_file(TranslatorGroup& translator, const std::string& input, const std::string& output,
                    bool with_scores, const WarningSink& warn);

}  // namespace seqtrans::app

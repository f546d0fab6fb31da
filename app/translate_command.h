// `seqtrans translate`: stdin or files in, one translation per input line out, in input order.
#pragma once

#include <functional>
#include <ostream>
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
  std::string prompt_template;  // decoder-only models: a file with a {source} slot; empty: lines as prompts
  std::vector<std::string> stops;  // --prompt-template: the completion ends at the first (default: a line end)
};

// How input lines become the engine's lines (read; null: as they are) and translations output lines.
struct LineFormat {
  std::function<std::string(const std::string& line, size_t index)> read;
  std::function<void(std::ostream& out, size_t index, const Translation& translation)> write;
};
// translate's output: one line per input line ("score ||| text" with scores; n-best "index ||| text ||| score").
LineFormat translation_format(bool with_scores);

// Refuses outputs that -o / --output-dir cannot write before any work starts.
void check_outputs(const std::vector<std::string>& inputs, const std::string& output, const std::string& output_dir);
// Loads the engine and runs every line of `inputs` (stdin when empty) through it into `output` (stdout when
// empty) or `output_dir`, in `format`, with the progress bar and summary; the exit status.
int run_lines(CommonOptions& common, const std::vector<std::string>& inputs, const std::string& output,
              const std::string& output_dir, const LineFormat& format);

CLI::App* add_translate_command(CLI::App& app, TranslateOptions& options);
int run_translate(TranslateOptions& options);

// `seqtrans translate -i input -o output [--with-scores]` once the translator is loaded: the output file
// is refused, written and replaced as -o says; warnings (truncated lines) go to `warn`. The Python
// package's translate_file.
void translate_file(TranslatorGroup& translator, const std::string& input, const std::string& output,
                    bool with_scores, const WarningSink& warn);

}  // namespace seqtrans::app

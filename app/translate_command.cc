#include "translate_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "output_file.h"
#include "progress.h"

namespace seqtrans::app {
namespace {

// Output lines must stay one per input line whatever the model produces.
std::string single_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

void write_translation(std::ostream& out, const TranslateOptions& options, size_t line_index,
                       const Translation& translation) {
  if (translation.texts.size() > 1) {  // n-best: "index ||| text ||| score", one line per hypothesis
    for (size_t k = 0; k < translation.texts.size(); ++k)
      out << line_index << " ||| " << single_line(translation.texts[k]) << " ||| "
          << fmt::format("{:.4f}", translation.scores[k]) << '\n';
  } else if (options.with_scores) {
    out << fmt::format("{:.4f}", translation.scores[0]) << " ||| " << single_line(translation.texts[0]) << '\n';
  } else {
    out << single_line(translation.texts[0]) << '\n';
  }
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Translates everything `reader` yields into `out`, window by window.
void translate_stream(Translator& translator, LineReader& reader, std::ostream& out, const TranslateOptions& options,
                      ProgressBar& progress) {
  const auto warn = [&](const std::string& message) { log(options.common, LogLevel::Warning, message); };
  for (std::vector<Line> window = reader.read_window(); !window.empty(); window = reader.read_window()) {
    const std::vector<Translation> translations = translator.translate(window, warn);
    for (size_t i = 0; i < window.size(); ++i) write_translation(out, options, window[i].index, translations[i]);
    out.flush();  // an interactive user sees each window as soon as it is done
    SEQTRANS_CHECK(out.good(), "error writing output (disk full or closed pipe?)");
    progress.advance(window.size());
  }
}

void check_output_directory(const std::string& directory) {
  struct stat info {};
  SEQTRANS_CHECK(::stat(directory.c_str(), &info) == 0 && S_ISDIR(info.st_mode), "--output-dir '{}' is not a directory",
                 directory);
  SEQTRANS_CHECK(::access(directory.c_str(), W_OK) == 0, "--output-dir '{}' is not writable", directory);
}

}  // namespace

CLI::App* add_translate_command(CLI::App& app, TranslateOptions& options) {
  CLI::App* command = app.add_subcommand("translate", "Translate lines of text (stdin or files)");
  command->footer(
      "Examples:\n"
      "  echo \"A man is riding a bike.\" | seqtrans translate\n"
      "  seqtrans translate -i news.en -o news.de --beam-size 5\n"
      "  seqtrans translate -i a.en b.en --output-dir out/          (writes out/a.en, out/b.en)\n"
      "  seqtrans translate --n-best 3 < input.txt                  (lines: index ||| text ||| score)\n"
      "  seqtrans translate -m opus-mt-en-de.seqtrans --device cpu --threads 8\n"
      "\nOutput: one line per input line, in input order; blank input lines give blank output lines.\n"
      "--with-scores prefixes each line with its score: \"score ||| text\".");
  command->add_option("-i,--input", options.inputs, "Input files (default: stdin)")->check(CLI::ExistingFile);
  command->add_option("-o,--output", options.output, "Output file (default: stdout); written atomically");
  command->add_option("--output-dir", options.output_dir, "Write each input file's translation to DIR/<file name>");
  command->add_flag("--with-scores", options.with_scores, "Prefix each output line with the translation's score");
  add_common_options(*command, options.common);
  return command;
}

int run_translate(TranslateOptions& options) {
  CommonOptions& common = options.common;
  SEQTRANS_CHECK(options.output.empty() || options.output_dir.empty(), "use either --output or --output-dir, not both");
  SEQTRANS_CHECK(options.output.empty() || options.inputs.size() <= 1,
                 "--output takes one input file; use --output-dir for {} inputs", options.inputs.size());
  SEQTRANS_CHECK(options.output_dir.empty() || !options.inputs.empty(), "--output-dir needs input files (-i)");
  if (!options.output_dir.empty()) check_output_directory(options.output_dir);
  resolve_common_options(common);

  const auto start = std::chrono::steady_clock::now();
  Translator translator(common.translator);
  note_device_choice(common);
  log(common, LogLevel::Info,
      fmt::format("model {} on {}", common.translator.model_path, device_name(common.translator.device)));
  log(common, LogLevel::Info, "search: " + translator.search_settings_summary());
  const size_t read_ahead = common.translator.batching.read_ahead;
  const bool show_progress = !common.quiet && ::isatty(STDERR_FILENO) && !options.inputs.empty();

  if (options.inputs.empty()) {
    LineReader reader(STDIN_FILENO, read_ahead);
    ProgressBar progress(false, 0, "");
    if (options.output.empty()) {
      translate_stream(translator, reader, std::cout, options, progress);
    } else {
      AtomicOutputFile out(options.output);
      translate_stream(translator, reader, out.stream(), options, progress);
      out.commit();
    }
  } else {
    for (const std::string& input : options.inputs) {
      LineReader reader = LineReader::open(input, read_ahead);
      ProgressBar progress(show_progress, show_progress ? count_lines(input) : 0, base_name(input));
      if (options.output.empty() && options.output_dir.empty()) {
        translate_stream(translator, reader, std::cout, options, progress);
      } else {
        const std::string path =
            options.output_dir.empty() ? options.output : options.output_dir + "/" + base_name(input);
        AtomicOutputFile out(path);
        translate_stream(translator, reader, out.stream(), options, progress);
        out.commit();
      }
      progress.finish();
    }
  }

  const TranslationStats& stats = translator.stats();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!common.quiet)
    std::cerr << fmt::format("seqtrans: {} sentences, {} source tokens, {} target tokens in {:.2f} s ({:.1f} target tokens/s)\n",
                             stats.sentences, stats.source_tokens, stats.target_tokens, seconds,
                             seconds > 0 ? stats.target_tokens / seconds : 0.0);
  return 0;
}

}  // namespace seqtrans::app

#include "translate_command.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "output_file.h"
#include "prompt_text.h"
#include "progress.h"
#include "translator_group.h"

namespace seqtrans::app {
namespace {

// Output lines must stay one per input line whatever the model produces.
std::string single_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

void write_translation(std::ostream& out, bool with_scores, size_t line_index, const Translation& translation) {
  if (translation.texts.size() > 1) {  // n-best: "index ||| text ||| score", one line per hypothesis
    for (size_t k = 0; k < translation.texts.size(); ++k)
      out << line_index << " ||| " << single_line(translation.texts[k]) << " ||| "
          << fmt::format("{:.4f}", translation.scores[k]) << '\n';
  } else if (with_scores) {
    out << fmt::format("{:.4f}", translation.scores[0]) << " ||| " << single_line(translation.texts[0]) << '\n';
  } else {
    out << single_line(translation.texts[0]) << '\n';
  }
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Translates everything `reader` yields into `out`, each line written (in input order) as soon as it and
// the lines before it are translated.
void translate_stream(TranslatorGroup& translator, LineReader& reader, std::ostream& out, const LineFormat& format,
                      const WarningSink& warn, ProgressBar& progress) {
  translator.translate_stream([&] {
                                std::vector<Line> window = reader.read_window();
                                if (format.read)
                                  for (Line& line : window) line.text = format.read(line.text, line.index);
                                return window;
                              },
                              [&](const Line& line, Translation& translation) {
                                format.write(out, line.index, translation);
                                out.flush();  // an interactive user sees each line as soon as it is done
                                SEQTRANS_CHECK(out.good(), "error writing output (disk full or closed pipe?)");
                                progress.advance(1);
                              },
                              warn);
}

// The lines of a text file, without their line ends (LF or CRLF).
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  SEQTRANS_CHECK(file.good(), "cannot read '{}'", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string output_dir_path(const std::string& directory, const std::string& input) {
  return directory + "/" + base_name(input);
}

// Two inputs with one base name would overwrite each other's translation in --output-dir.
void check_distinct_base_names(const std::vector<std::string>& inputs, const std::string& directory) {
  std::map<std::string, const std::string*> first_input_by_name;
  for (const std::string& input : inputs) {
    const auto [seen, inserted] = first_input_by_name.emplace(base_name(input), &input);
    SEQTRANS_CHECK(inserted, "inputs '{}' and '{}' would both be written to '{}'; nothing was written",
                   *seen->second, input, output_dir_path(directory, input));
  }
}

// mkdir -p: a missing --output-dir and its parents are created.
void create_output_directory(const std::string& directory) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  SEQTRANS_CHECK(!error, "cannot create --output-dir '{}': {}", directory, error.message());
  SEQTRANS_CHECK(std::filesystem::is_directory(directory), "--output-dir '{}' is not a directory", directory);
  SEQTRANS_CHECK(::access(directory.c_str(), W_OK) == 0, "--output-dir '{}' is not writable", directory);
}

// Every output is planned before the model loads: a refused output (a directory, a hard-linked file,
// clashing names) stops the run before anything is written.
}  // namespace

void check_outputs(const std::vector<std::string>& inputs, const std::string& output, const std::string& output_dir) {
  if (!output.empty()) plan_output(output);
  if (output_dir.empty()) return;
  check_distinct_base_names(inputs, output_dir);
  create_output_directory(output_dir);
  for (const std::string& input : inputs) plan_output(output_dir_path(output_dir, input));
}

namespace {

// Translates one stream into the output file at `path`, which appears (or changes) only when complete.
void translate_to_file(TranslatorGroup& translator, LineReader& reader, const std::string& path,
                       const LineFormat& format, const WarningSink& warn, ProgressBar& progress) {
  const std::unique_ptr<OutputTarget> out = open_output(path);
  translate_stream(translator, reader, out->stream(), format, warn, progress);
  out->commit();
}

}  // namespace

void translate_file(TranslatorGroup& translator, const std::string& input, const std::string& output,
                    bool with_scores, const WarningSink& warn) {
  plan_output(output);
  LineReader reader = LineReader::open(input, translator.options().batching.read_ahead);
  ProgressBar progress(false, 0, "");
  translate_to_file(translator, reader, output, translation_format(with_scores), warn, progress);
}

LineFormat translation_format(bool with_scores) {
  LineFormat format;
  format.write = [with_scores](std::ostream& out, size_t index, const Translation& translation) {
    write_translation(out, with_scores, index, translation);
  };
  return format;
}

CLI::App* add_translate_command(CLI::App& app, TranslateOptions& options) {
  CLI::App* command = app.add_subcommand("translate", "Translate lines of text (stdin or files)");
  command->footer(
      "Examples:\n"
      "  echo \"A man is riding a bike.\" | seqtrans translate\n"
      "  seqtrans translate -i news.en -o news.de --beam-size 5\n"
      "  seqtrans translate -i a.en b.en --output-dir out/          (writes out/a.en, out/b.en)\n"
      "  seqtrans translate --n-best 3 < input.txt                  (lines: index ||| text ||| score)\n"
      "  seqtrans translate -m opus-mt-en-de.seqtrans --device cpu --threads 8\n"
      "  seqtrans translate -i big.en -o big.de --device cuda:all    (one engine per GPU)\n"
      "\nOutput: one line per input line, in input order; blank input lines give blank output lines.\n"
      "--with-scores prefixes each line with its score: \"score ||| text\".");
  command->add_option("-i,--input", options.inputs, "Input files (default: stdin)")->check(CLI::ExistingFile);
  command->add_option("-o,--output", options.output,
                      "Output file (default: stdout). A regular file is replaced atomically when complete, keeping "
                      "its mode and owner (a symlink's target is replaced, the link stays); a file with several "
                      "hard links is refused. Devices, FIFOs and /dev/stdout are written in place");
  command->add_option("--output-dir", options.output_dir,
                      "Write each input file's translation to DIR/<file name>, by the rules of -o; DIR is created "
                      "if missing; inputs with the same file name are refused");
  command->add_flag("--with-scores", options.with_scores, "Prefix each output line with the translation's score");
  command->add_option("--target-prefix", options.target_prefix,
                      "File of target prefixes, one per input line (an empty line: none): each translation "
                      "starts with its line's prefix, which is printed as part of it; the prefix adds 0 to the "
                      "score and does not count in --max-length (CTranslate2's target_prefix, HF's "
                      "decoder_input_ids)")
      ->check(CLI::ExistingFile);
  command->add_option("--prompt-template", options.prompt_template,
                      "Decoder-only models: translate each line as the completion of this file's text, whose "
                      "{source} slot takes the line (e.g. \"English: {source}\\nGerman:\"); the translation ends at "
                      "EOS or the first --stop string")
      ->check(CLI::ExistingFile);
  command->add_option("--stop", options.stops,
                      "With --prompt-template: the translation ends before the first occurrence of STRING "
                      "(repeatable; default: a line end)");
  add_common_options(*command, options.common);
  return command;
}

int run_translate(TranslateOptions& options) {
  CommonOptions& common = options.common;
  SEQTRANS_CHECK(options.output.empty() || options.output_dir.empty(), "use either --output or --output-dir, not both");
  SEQTRANS_CHECK(options.output.empty() || options.inputs.size() <= 1,
                 "--output takes one input file; use --output-dir for {} inputs", options.inputs.size());
  SEQTRANS_CHECK(options.output_dir.empty() || !options.inputs.empty(), "--output-dir needs input files (-i)");
  check_outputs(options.inputs, options.output, options.output_dir);
  resolve_common_options(common);
  if (!options.target_prefix.empty()) {
    SEQTRANS_CHECK(options.inputs.size() <= 1, "--target-prefix pairs its lines with one input's lines, got {} inputs",
                   options.inputs.size());
    common.translator.target_prefixes = read_lines(options.target_prefix);
  }
  LineFormat format = translation_format(options.with_scores);
  if (!options.prompt_template.empty()) {
    // Without -m, the bundled decoder-only demo: its template is models/llama-demo-en-de.prompt.txt.
    if (common.model_option->count() == 0) common.translator.model_path = default_model_path(ModelKind::DecoderOnly);
    // A decoder-only model translates a line as the completion of the template around it, up to EOS or the
    // first stop string (a line end unless --stop says otherwise).
    const PromptTemplate prompt = PromptTemplate::read(options.prompt_template);
    format.read = [prompt](const std::string& line, size_t) { return prompt.apply(line); };
    const std::vector<std::string> stops = options.stops.empty() ? std::vector<std::string>{"\n"} : options.stops;
    format.write = [stops, with_scores = options.with_scores](std::ostream& out, size_t index, Translation translation) {
      for (std::string& text : translation.texts) text = cut_at_stop(text, stops);
      write_translation(out, with_scores, index, translation);
    };
  }
  return run_lines(common, options.inputs, options.output, options.output_dir, format);
}

int run_lines(CommonOptions& common, const std::vector<std::string>& inputs, const std::string& output,
              const std::string& output_dir, const LineFormat& format) {
  const auto start = std::chrono::steady_clock::now();
  TranslatorGroup translator(common.translator, common.devices.indices);
  note_setup_choices(common);
  for (const std::string& note : translator.notes()) log(common, LogLevel::Warning, note);
  log(common, LogLevel::Info, fmt::format("model {} on {}", common.translator.model_path, describe(common.devices)));
  log(common, LogLevel::Info, "search: " + translator.search_settings_summary());
  const size_t read_ahead = common.translator.batching.read_ahead;
  const auto warn = [&](const std::string& message) { log(common, LogLevel::Warning, message); };
  const bool show_progress = !common.quiet && ::isatty(STDERR_FILENO) && !inputs.empty();

  if (inputs.empty()) {
    LineReader reader(STDIN_FILENO, read_ahead);
    ProgressBar progress(false, 0, "");
    if (output.empty()) {
      translate_stream(translator, reader, std::cout, format, warn, progress);
    } else {
      translate_to_file(translator, reader, output, format, warn, progress);
    }
  } else {
    for (const std::string& input : inputs) {
      LineReader reader = LineReader::open(input, read_ahead);
      ProgressBar progress(show_progress, show_progress ? count_lines(input) : 0, base_name(input));
      if (output.empty() && output_dir.empty()) {
        translate_stream(translator, reader, std::cout, format, warn, progress);
      } else {
        const std::string path = output_dir.empty() ? output : output_dir_path(output_dir, input);
        translate_to_file(translator, reader, path, format, warn, progress);
      }
      progress.finish();
    }
  }

  const TranslationStats stats = translator.stats();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!common.quiet)
    std::cerr << fmt::format("seqtrans: {} sentences, {} source tokens, {} target tokens in {:.2f} s ({:.1f} target tokens/s)\n",
                             stats.sentences, stats.source_tokens, stats.target_tokens, seconds,
                             seconds > 0 ? stats.target_tokens / seconds : 0.0);
  return 0;
}

}  // namespace seqtrans::app

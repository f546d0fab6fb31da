#include "generate_command.h"

#include "format/model_file.h"
#include "prompt_text.h"
#include "translate_command.h"

namespace seqtrans::app {

CLI::App* add_generate_command(CLI::App& app, GenerateOptions& options) {
  CLI::App* command = app.add_subcommand("generate", "Complete prompts with a decoder-only model (Llama family)");
  command->footer(
      "Examples:\n"
      "  echo 'English: A dog runs.\\nGerman:' | seqtrans generate -m tiny-llama.seqtrans --max-new-tokens 32\n"
      "  seqtrans generate -m model.seqtrans --jsonl -i prompts.jsonl -o completions.jsonl --stop '\\n'\n"
      "  seqtrans generate -m model.seqtrans --sampling-topp 0.9 --temperature 0.7 --seed 1 < prompts.txt\n"
      "\nInput: one prompt per line, where \\n stands for a line end and \\\\ for a backslash; output: one\n"
      "completion per line, in input order, with the same escapes. --jsonl reads {\"prompt\": ...} objects and\n"
      "writes {\"text\": ..., \"tokens\": N} (tokens generated, EOS excluded). A blank line gives a blank line.");
  command->add_option("-i,--input", options.inputs, "Input files (default: stdin)")->check(CLI::ExistingFile);
  command->add_option("-o,--output", options.output,
                      "Output file (default: stdout), replaced atomically when complete as translate's -o");
  command->add_flag("--jsonl", options.jsonl, "JSON lines: {\"prompt\": ...} in, {\"text\": ..., \"tokens\": N} out");
  command->add_option("--max-new-tokens", options.common.max_new_tokens,
                      "Tokens to generate at most, EOS included (Hugging Face's max_new_tokens; the same as "
                      "--max-length N 0)")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--stop", options.stops,
                      "A completion ends before the first occurrence of STRING (repeatable; the text is cut there; "
                      "\\n stands for a line end)");
  add_common_options(*command, options.common, ModelKind::DecoderOnly);
  return command;
}

int run_generate(GenerateOptions& options) {
  CommonOptions& common = options.common;
  SEQTRANS_CHECK(options.output.empty() || options.inputs.size() <= 1,
                 "--output takes one input file, got {}", options.inputs.size());
  check_outputs(options.inputs, options.output, "");
  resolve_common_options(common);
  SEQTRANS_CHECK(ModelFile::open(common.translator.model_path).config().kind == ModelKind::DecoderOnly,
                 "'{}' is an encoder-decoder translation model: use `seqtrans translate` (generate needs a "
                 "decoder-only model, converted with scripts/convert_hf.py)", common.translator.model_path);
  std::vector<std::string> stops;
  for (const std::string& stop : options.stops) stops.push_back(unescape_line(stop));

  LineFormat format;
  const bool jsonl = options.jsonl;
  format.read = [jsonl](const std::string& line, size_t index) {
    if (line.empty()) return line;
    return jsonl ? json_prompt(line, index + 1) : unescape_line(line);
  };
  format.write = [jsonl, stops](std::ostream& out, size_t index, const Translation& completion) {
    std::vector<std::string> texts;
    for (const std::string& text : completion.texts) texts.push_back(cut_at_stop(text, stops));
    if (jsonl) {
      out << json_completions(texts, completion.tokens) << '\n';
    } else if (texts.size() > 1) {  // n-best, as translate writes it: "index ||| text ||| score"
      for (size_t k = 0; k < texts.size(); ++k)
        out << index << " ||| " << escape_line(texts[k]) << " ||| " << fmt::format("{:.4f}", completion.scores[k])
            << '\n';
    } else {
      out << escape_line(texts[0]) << '\n';
    }
  };
  return run_lines(common, options.inputs, options.output, "", format);
}

}  // namespace seqtrans::app

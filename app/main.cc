// seqtrans command line: wires subcommands; each lives in its own file.
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>

#include "bench_command.h"
#include "core/error.h"
#include "generate_command.h"
#include "translate_command.h"

int main(int argc, char** argv) {
  // A closed pipe (e.g. `| head`) must end us with a write error we report, not a silent SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app("seqtrans: fast neural machine translation and text generation with Transformer models", "seqtrans");
  app.set_version_flag("--version", std::string("seqtrans ") + SEQTRANS_VERSION);
  app.require_subcommand(1);
  // Usage errors are one line, like every other error.
  app.failure_message([](const CLI::App*, const CLI::Error& error) {
    return std::string("seqtrans: error: ") + error.what() + " (see --help)\n";
  });
  seqtrans::app::TranslateOptions translate;
  CLI::App* translate_command = seqtrans::app::add_translate_command(app, translate);
  seqtrans::app::GenerateOptions generate;
  CLI::App* generate_command = seqtrans::app::add_generate_command(app, generate);
  seqtrans::app::BenchOptions bench;
  CLI::App* bench_command = seqtrans::app::add_bench_command(app, bench);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  try {
    if (translate_command->parsed()) return seqtrans::app::run_translate(translate);
    if (generate_command->parsed()) return seqtrans::app::run_generate(generate);
    if (bench_command->parsed()) return seqtrans::app::run_bench(bench);
  } catch (const std::exception& error) {
    // printable(): whatever text a message quotes (a path, a library's status), it stays one line.
    std::cerr << "seqtrans: error: " << seqtrans::printable(error.what()) << '\n';
    return 1;
  }
  return 0;
}

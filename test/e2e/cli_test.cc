// The real binary end to end: line counts, exit codes and one-line errors for every kind of input.
// Uses the tiny random Marian model (its output is gibberish, but every property below still holds).
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iterator>
#include <thread>

#include <fmt/format.h>

#include "catch.h"
#include "support/golden.h"
#include "support/model_builder.h"
#include "core/device.h"
#include "support/process.h"

using namespace seqtrans::testing;

namespace {

// `seqtrans translate -m model --device cpu` with `flags`.
ProcessResult translate_with(const std::string& model, const std::vector<std::string>& flags,
                             const std::string& input) {
  std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m", model, "--device", "cpu"};
  arguments.insert(arguments.end(), flags.begin(), flags.end());
  return run_process(arguments, input);
}

ProcessResult translate(std::vector<std::string> flags, const std::string& input) {
  flags.insert(flags.begin(), "--quiet");
  return translate_with(converted_tiny_model(), flags, input);
}

void require_one_line_error(const ProcessResult& result) {
  CHECK(result.exit_code != 0);
  CHECK(result.exit_code != -2);
  CHECK(count_lines(result.err) == 1);
  CHECK(result.err.rfind("seqtrans", 0) == 0);
}

std::string write_file(const std::string& stem, const std::string& content) {
  const std::string path = temp_path(stem);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// A tiny model file with vocabularies whose serialized header holds `text` (a string it stores) with its
// first byte replaced by 0xFF, which is never valid UTF-8. The length is unchanged, so everything but
// that string field still parses.
std::string model_with_invalid_utf8(const std::string& text) {
  ModelImage image = make_tiny_model({});
  for (uint32_t id = 0; id < image.header.config().source_vocab_size(); ++id) {
    image.header.mutable_tokenizer()->add_source_vocab("source_piece_" + std::to_string(id));
    image.header.mutable_tokenizer()->add_target_vocab("target_piece_" + std::to_string(id));
  }
  const std::string path = temp_path("invalid_utf8.seqtrans");
  write_model_file(path, image);
  std::ifstream in(path, std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(in), {});
  const size_t at = bytes.find(text);
  REQUIRE(at != std::string::npos);
  bytes[at] = '\xff';
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return path;
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// Twelve real sentences of mixed lengths from the test data.
std::string sample_input() {
  return "A man is riding a bike.\n"
         "Two dogs are playing in the snow.\n"
         "The quick brown fox jumps over the lazy dog while the farmer watches from the porch of his house.\n"
         "Hello.\n"
         "Gutach: Increased safety for pedestrians\n"
         "A group of people standing in front of an igloo.\n"
         "Yes.\n"
         "Several men in hard hats are operating a giant pulley system.\n"
         "A little girl climbing into a wooden playhouse.\n"
         "Two young, White males are outside near many bushes.\n"
         "It is not clear whether the plan will work, but the council says it is worth trying.\n"
         "Thank you!\n";
}

}  // namespace

TEST_CASE("translate writes one line per input line and exits 0", "[e2e][cli]") {
  const ProcessResult result = translate({}, sample_input());
  CHECK(result.exit_code == 0);
  CHECK(count_lines(result.out) == 12);
  CHECK(result.err.empty());
}

TEST_CASE("blank lines stay blank and in place", "[e2e][cli]") {
  const ProcessResult result = translate({}, "Hello.\n\n   \t \nA dog.\n\n");
  REQUIRE(result.exit_code == 0);
  const auto lines = split_lines(result.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[1].empty());
  CHECK(lines[2].empty());
  CHECK(lines[4].empty());
  CHECK(!lines[0].empty());
}

TEST_CASE("hostile bytes keep the line count: invalid UTF-8, NUL, CRLF, control characters, huge lines", "[e2e][cli]") {
  std::string input;
  input += "valid line\n";
  input += std::string("bad \xff\xfe utf8 \xc3\x28 here\n");
  input += std::string("nul\0inside", 10) + "\n";
  input += "crlf line\r\n";
  input += "control \x01\x02\x1b[31m chars\x7f\n";
  input += std::string(100000, 'a') + "\n";
  input += "last line without newline";
  const ProcessResult result = translate({"--max-input-length", "64"}, input);
  CHECK(result.exit_code == 0);
  CHECK(count_lines(result.out) == 7);
}

TEST_CASE("long lines are truncated with a warning naming the line", "[e2e][cli]") {
  std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--device",
                                        "cpu", "--max-input-length", "8"};
  const ProcessResult result =
      run_process(arguments, "short\nthis line has many more than eight tokens in it for sure, really\n");
  CHECK(result.exit_code == 0);
  CHECK(count_lines(result.out) == 2);
  CHECK(result.err.find("line 2:") != std::string::npos);
  CHECK(result.err.find("truncated") != std::string::npos);
}

TEST_CASE("a read-ahead tokenized on several threads keeps warnings and lines in input order", "[e2e][cli]") {
  // 1,200 lines (several tokenizer threads where the machine has the cores): every 100th is long.
  std::string input;
  for (int i = 1; i <= 1200; ++i)
    input += i % 100 == 0 ? "this line has many more than eight tokens in it for sure, really\n" : "short\n";
  std::vector<std::string> arguments = {seqtrans_binary(), "translate", "-m", converted_tiny_model(), "--device",
                                        "cpu", "--max-input-length", "8", "--beam-size", "1"};
  const ProcessResult result = run_process(arguments, input);
  REQUIRE(result.exit_code == 0);
  const auto lines = split_lines(result.out);
  REQUIRE(lines.size() == 1200);
  for (size_t i = 0; i < lines.size(); ++i) CHECK(lines[i] == lines[(i + 1) % 100 == 0 ? 99 : 0]);
  size_t from = 0;
  for (int i = 100; i <= 1200; i += 100) {  // one warning per long line, in line order
    const size_t at = result.err.find(fmt::format("line {}:", i), from);
    REQUIRE(at != std::string::npos);
    from = at + 1;
  }
}

TEST_CASE("results do not depend on which sentences share a batch", "[e2e][cli]") {
  for (const char* beam : {"1", "4"}) {
    const ProcessResult alone = translate({"--beam-size", beam, "--max-batch-size", "1"}, sample_input());
    const ProcessResult together = translate({"--beam-size", beam, "--max-batch-size", "64"}, sample_input());
    const ProcessResult budget = translate({"--beam-size", beam, "--max-batch-tokens", "40"}, sample_input());
    REQUIRE(alone.exit_code == 0);
    CHECK(alone.out == together.out);
    CHECK(alone.out == budget.out);
  }
}

TEST_CASE("n-best and score output formats", "[e2e][cli]") {
  const ProcessResult nbest = translate({"--beam-size", "4", "--n-best", "3"}, "Hello.\nA dog runs.\n");
  REQUIRE(nbest.exit_code == 0);
  const auto lines = split_lines(nbest.out);
  REQUIRE(lines.size() == 6);
  CHECK(lines[0].rfind("0 ||| ", 0) == 0);
  CHECK(lines[3].rfind("1 ||| ", 0) == 0);
  const ProcessResult scored = translate({"--with-scores"}, "Hello.\n");
  REQUIRE(scored.exit_code == 0);
  CHECK(scored.out.find(" ||| ") != std::string::npos);
  CHECK(std::stof(scored.out) <= 0.0f);
  require_one_line_error(translate({"--beam-size", "2", "--n-best", "3"}, "Hello.\n"));
}

namespace {

// The golden checkpoint whose generation config forces EOS (forced_eos_token_id 0, num_beams 4,
// max_length 256), run without --quiet so that the summary line counts the target tokens.
ProcessResult translate_forced_eos_model(const std::vector<std::string>& flags, const std::string& input) {
  return translate_with(converted_golden_model("marian_separate"), flags, input);
}

// The summary line's "N target tokens" (best hypotheses, EOS excluded).
size_t target_tokens(const ProcessResult& result) {
  const size_t end = result.err.find(" target tokens in ");
  REQUIRE(end != std::string::npos);
  const size_t begin = result.err.rfind(", ", end);
  return std::stoul(result.err.substr(begin + 2, end - begin - 2));
}

}  // namespace

TEST_CASE("a model with a forced EOS and --max-length 5 0 prints at most 4 tokens per line", "[e2e][cli]") {
  const size_t lines = count_lines(sample_input());
  for (const char* beam : {"1", "4"}) {
    INFO("beam " << beam);
    const ProcessResult forced = translate_forced_eos_model({"--max-length", "5", "0", "--beam-size", beam}, sample_input());
    REQUIRE(forced.exit_code == 0);
    CHECK(count_lines(forced.out) == lines);
    CHECK(target_tokens(forced) <= 4 * lines);
    // Without the forced EOS most of these lines run to 5 tokens.
    const ProcessResult unforced = translate_forced_eos_model(
        {"--max-length", "5", "0", "--beam-size", beam, "--force-eos", "off"}, sample_input());
    REQUIRE(unforced.exit_code == 0);
    CHECK(target_tokens(unforced) > 4 * lines * 3 / 4);
  }
  // Greedy: the forced run is the unforced run cut one token earlier (HF's tokens before the forced EOS).
  const ProcessResult forced = translate_forced_eos_model({"--max-length", "5", "0", "--beam-size", "1", "-q"}, sample_input());
  const ProcessResult cut = translate_forced_eos_model(
      {"--max-length", "4", "0", "--beam-size", "1", "--force-eos", "off", "-q"}, sample_input());
  CHECK(forced.out == cut.out);
}

TEST_CASE("the model file's generation defaults apply unless options are given, and info says which",
          "[e2e][cli]") {
  const ProcessResult defaults = translate_forced_eos_model({"--log-level", "info"}, "Hello.\n");
  REQUIRE(defaults.exit_code == 0);
  CHECK(defaults.err.find("beam size 4 (model file: num_beams 4)") != std::string::npos);
  CHECK(defaults.err.find("max length 255 + 0 x source tokens (model file: max_length 256)") != std::string::npos);
  CHECK(defaults.err.find("forced EOS at the limit on (model file: forced_eos_token_id 0)") != std::string::npos);
  const ProcessResult given = translate_forced_eos_model(
      {"--log-level", "info", "--beam-size", "2", "--max-length", "30", "--force-eos", "off"}, "Hello.\n");
  REQUIRE(given.exit_code == 0);
  CHECK(given.err.find("beam size 2 (command line)") != std::string::npos);
  CHECK(given.err.find("max length 30 + 0 x source tokens (command line)") != std::string::npos);
  CHECK(given.err.find("forced EOS at the limit off (command line)") != std::string::npos);
  // The tiny model records only max_length; its beam size is the built-in one.
  const ProcessResult tiny = translate_with(converted_tiny_model(), {"--log-level", "info"}, "Hello.\n");
  CHECK(tiny.err.find("beam size 4 (built-in default)") != std::string::npos);
  CHECK(tiny.err.find("forced EOS at the limit off (built-in default)") != std::string::npos);
}

TEST_CASE("sampling is reproducible from a seed", "[e2e][cli]") {
  const std::vector<std::string> flags = {"--beam-size", "1", "--sampling-topk", "10", "--temperature", "1.5", "--seed", "7"};
  const ProcessResult first = translate(flags, sample_input());
  const ProcessResult second = translate(flags, sample_input());
  REQUIRE(first.exit_code == 0);
  CHECK(first.out == second.out);
  CHECK(count_lines(first.out) == 12);
}

TEST_CASE("files in, files out, atomically", "[e2e][cli]") {
  const std::string a = write_file("a.en", "Hello.\nA dog.\n"), b = write_file("b.en", "Yes.\n");
  const std::string directory = temp_path("outdir");
  ::mkdir(directory.c_str(), 0755);
  const ProcessResult result = translate({"-i", a, b, "--output-dir", directory}, "");
  REQUIRE(result.exit_code == 0);
  const auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(count_lines(read(directory + "/" + a.substr(a.rfind('/') + 1))) == 2);
  CHECK(count_lines(read(directory + "/" + b.substr(b.rfind('/') + 1))) == 1);
  const std::string single = temp_path("single.de");
  REQUIRE(translate({"-i", a, "-o", single}, "").exit_code == 0);
  CHECK(count_lines(read(single)) == 2);
}

TEST_CASE("an interrupted run leaves no file under the final name", "[e2e][cli]") {
  std::string big;
  for (int i = 0; i < 400; ++i) big += sample_input();
  const std::string input = write_file("big.en", big), output = temp_path("big.de");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string binary = seqtrans_binary(), model = converted_tiny_model();
    ::execl(binary.c_str(), binary.c_str(), "translate", "-m", model.c_str(), "--device", "cpu", "--quiet", "-i",
            input.c_str(), "-o", output.c_str(), "--beam-size", "4", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Interrupt once the run has opened its temporary output (so the test cannot pass by interrupting a
  // process that had not started writing), or give up after 30 s.
  const std::string partial = partial_output_path(output, pid);
  int status = 0;
  const bool exited = wait_for_path_or_exit(partial, pid, 30, status);
  REQUIRE(!exited);
  REQUIRE(exists(partial));
  ::kill(pid, SIGINT);
  ::waitpid(pid, &status, 0);
  CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
  CHECK(!exists(output));
  CHECK(!exists(partial));
}

TEST_CASE("bad input gives one line on stderr and a non-zero exit", "[e2e][cli]") {
  SECTION("missing input file") { require_one_line_error(translate({"-i", "/nonexistent/input.txt"}, "")); }
  SECTION("unwritable output") { require_one_line_error(translate({"-o", "/nonexistent/dir/out.txt"}, "Hello.\n")); }
  SECTION("missing model") {
    require_one_line_error(run_process({seqtrans_binary(), "translate", "-m", "/nonexistent.seqtrans"}, "Hello.\n"));
  }
  SECTION("a file that is not a model") {
    const std::string junk = write_file("junk.seqtrans", "this is not a model");
    const ProcessResult result = run_process({seqtrans_binary(), "translate", "-m", junk, "--device", "cpu"}, "Hi\n");
    require_one_line_error(result);
    CHECK(result.err.find(junk) != std::string::npos);
  }
  SECTION("a header whose string field holds invalid UTF-8") {
    // libprotobuf logs such a field on its own; only seqtrans's line may reach stderr.
    for (const char* text : {"random test model", "source_piece_5", "target_piece_7", "decoder/output/bias"}) {
      INFO(text);
      const std::string model = model_with_invalid_utf8(text);
      const ProcessResult result = translate_with(model, {"--quiet"}, "Hello.\n");
      require_one_line_error(result);
      CHECK(result.err.find(model) != std::string::npos);
      CHECK(result.err.find("libprotobuf") == std::string::npos);
    }
  }
  SECTION("invalid option values") {
    require_one_line_error(translate({"--beam-size", "0"}, "Hello.\n"));
    require_one_line_error(translate({"--device", "tpu"}, "Hello.\n"));
    require_one_line_error(translate({"--temperature", "0"}, "Hello.\n"));
    require_one_line_error(translate({"--max-length", "0"}, "Hello.\n"));
  }
  SECTION("no GPU requested on a machine without one") {
    if (seqtrans::cuda_device_count() == 0) require_one_line_error(translate({"--device", "cuda"}, "Hello.\n"));
  }
}

TEST_CASE("help and version", "[e2e][cli]") {
  const ProcessResult help = run_process({seqtrans_binary(), "translate", "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--beam-size") != std::string::npos);
  CHECK(help.out.find("the model file's num_beams, else 4") != std::string::npos);
  CHECK(help.out.find("--force-eos") != std::string::npos);
  CHECK(help.out.find("Examples") != std::string::npos);
  const ProcessResult version = run_process({seqtrans_binary(), "--version"});
  CHECK(version.exit_code == 0);
  CHECK(version.out.rfind("seqtrans ", 0) == 0);
  require_one_line_error(run_process({seqtrans_binary(), "translate", "--no-such-flag"}));
}

TEST_CASE("an interactive user gets each line's translation before typing the next", "[e2e][cli]") {
  int to_child[2], from_child[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(from_child) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
    const std::string binary = seqtrans_binary(), model = converted_tiny_model();
    ::execl(binary.c_str(), binary.c_str(), "translate", "-m", model.c_str(), "--device", "cpu", "--quiet",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  // Two lines, one at a time; stdin stays open throughout, so only a prompt reply can arrive.
  for (int line = 1; line <= 2; ++line) {
    const std::string input = "A dog runs.\n";
    REQUIRE(::write(to_child[1], input.data(), input.size()) == static_cast<ssize_t>(input.size()));
    std::string received;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (received.find('\n') == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd readable{from_child[0], POLLIN, 0};
      if (::poll(&readable, 1, 200) > 0) {
        char buffer[4096];
        const ssize_t n = ::read(from_child[0], buffer, sizeof(buffer));
        if (n <= 0) break;
        received.append(buffer, static_cast<size_t>(n));
      }
    }
    INFO("line " << line);
    CHECK(count_lines(received) == 1);
  }
  ::close(to_child[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  ::close(from_child[0]);
}

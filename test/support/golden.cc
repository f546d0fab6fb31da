#include "support/golden.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "support/model_builder.h"

namespace seqtrans::testing {
namespace {

std::vector<std::string> split(const std::string& line, char separator) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, separator)) fields.push_back(field);
  if (!line.empty() && line.back() == separator) fields.emplace_back();
  return fields;
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  int32_t id;
  while (in >> id) ids.push_back(id);
  return ids;
}

}  // namespace

GoldenFile read_golden(const std::string& path) {
  std::ifstream in(path);
  SEQTRANS_CHECK(in.is_open(), "cannot open golden file {}", path);
  GoldenFile golden;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream settings(line.substr(1));
      std::string item;
      while (settings >> item)
        if (const size_t equals = item.find('='); equals != std::string::npos)
          golden.settings[item.substr(0, equals)] = item.substr(equals + 1);
      continue;
    }
    const std::vector<std::string> fields = split(line, '\t');
    SEQTRANS_CHECK(fields.size() == 5, "{}:{}: expected 5 tab-separated fields, got {}", path, number, fields.size());
    GoldenCase golden_case;
    golden_case.source_text = fields[0];
    golden_case.source_ids = parse_ids(fields[1]);
    golden_case.output_ids = parse_ids(fields[2]);
    golden_case.finished = fields[3] == "1";
    golden_case.score = std::stof(fields[4]);
    golden.cases.push_back(std::move(golden_case));
  }
  return golden;
}

const std::string& converted_golden_model(const std::string& name) {
  static std::map<std::string, std::string> paths;
  const auto found = paths.find(name);
  if (found != paths.end()) return found->second;
  const std::string out = temp_path(name + ".seqtrans");
  const std::string command = std::string("python3 ") + SEQTRANS_SOURCE_DIR + "/scripts/convert_hf.py " +
                              SEQTRANS_TEST_DATA + "/" + name + " " + out + " --dtype fp32 > /dev/null";
  if (run_command(command) != 0) throw Error("converter failed: " + command);
  return paths.emplace(name, out).first->second;
}

std::string golden_source_lines(size_t count) {
  const GoldenFile golden = read_golden(std::string(SEQTRANS_TEST_DATA) + "/golden/marian_tiny_greedy.tsv");
  std::string lines;
  for (size_t i = 0; i < std::min(count, golden.cases.size()); ++i) lines += golden.cases[i].source_text + "\n";
  return lines;
}

const std::string& converted_tiny_model() { return converted_golden_model("marian_tiny"); }

int run_command(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

SearchOptions golden_search_options(const GoldenFile& golden) {
  SearchOptions options;
  const auto setting = [&](const std::string& key) {
    const auto found = golden.settings.find(key);
    if (found == golden.settings.end()) throw Error("golden settings lack " + key);
    return found->second;
  };
  options.beam_size = std::stoi(setting("num_beams"));
  options.num_hypotheses = 1;
  // HF max_new_tokens = N is --max-length N 0; forced_eos_token_id (EOS) forces the token at position N.
  options.max_length_a = std::stoi(setting("max_new_tokens"));
  options.max_length_b = 0.0f;
  options.force_eos_at_max_length = setting("forced_eos_token_id") != "None";
  options.repetition_penalty = std::stof(setting("repetition_penalty"));
  options.no_repeat_ngram_size = std::stoi(setting("no_repeat_ngram_size"));
  if (options.beam_size > 1) {
    options.length_penalty = std::stof(setting("length_penalty"));
    const std::string stopping = setting("early_stopping");
    options.beam_stopping = stopping == "True"    ? BeamStopping::FirstComplete
                            : stopping == "never" ? BeamStopping::Never
                                                  : BeamStopping::Heuristic;
  }
  return options;
}

}  // namespace seqtrans::testing

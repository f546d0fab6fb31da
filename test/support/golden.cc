#include "support/golden.h"

#include <sys/wait.h>

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
  const std::string command = std::string("python3 ") + SEQTRANS_SOURCE_DIR + "/scripts/convert_marian.py " +
                              SEQTRANS_TEST_DATA + "/" + name + " " + out + " --dtype fp32 > /dev/null";
  if (run_command(command) != 0) throw Error("converter failed: " + command);
  return paths.emplace(name, out).first->second;
}

const std::string& converted_tiny_model() { return converted_golden_model("marian_tiny"); }

int run_command(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace seqtrans::testing

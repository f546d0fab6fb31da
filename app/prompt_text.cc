#include "prompt_text.h"

#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "generate.pb.h"

namespace seqtrans::app {

std::string unescape_line(std::string_view line) {
  std::string text;
  text.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && (line[i + 1] == 'n' || line[i + 1] == '\\')) {
      text += line[i + 1] == 'n' ? '\n' : '\\';
      ++i;
    } else {
      text += line[i];
    }
  }
  return text;
}

std::string escape_line(std::string_view text) {
  std::string line;
  line.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') line += "\\\\";
    else if (c == '\n') line += "\\n";
    else if (c == '\r') line += ' ';  // a bare CR would break the line in a terminal
    else line += c;
  }
  return line;
}

std::string json_prompt(std::string_view line, size_t line_number) {
  proto::GenerateRequest request;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(std::string(line), &request, options);
  SEQTRANS_CHECK(status.ok(), "input line {}: not a JSON object with a \"prompt\" string ({})", line_number,
                 std::string(status.message()));
  return request.prompt();
}

namespace {

// `text` as a JSON string, quotes included.
std::string json_string(std::string_view text) {
  std::string json = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"') json += "\\\"";
    else if (c == '\\') json += "\\\\";
    else if (c == '\n') json += "\\n";
    else if (c == '\t') json += "\\t";
    else if (c == '\r') json += "\\r";
    else if (byte < 0x20) json += fmt::format("\\u{:04x}", byte);
    else json += c;  // UTF-8 passes through
  }
  return json + '"';
}

std::string json_completion(std::string_view text, size_t tokens) {
  return fmt::format("{{\"text\": {}, \"tokens\": {}}}", json_string(text), tokens);
}

}  // namespace

std::string json_completions(const std::vector<std::string>& texts, const std::vector<size_t>& tokens) {
  std::string json = json_completion(texts.at(0), tokens.at(0));
  if (texts.size() == 1) return json;
  json.pop_back();  // the closing brace: the list goes in
  json += ", \"n_best\": [";
  for (size_t k = 0; k < texts.size(); ++k) json += (k > 0 ? ", " : "") + json_completion(texts[k], tokens[k]);
  return json + "]}";
}

std::string cut_at_stop(std::string text, const std::vector<std::string>& stops) {
  size_t end = text.size();
  for (const std::string& stop : stops)
    if (!stop.empty()) end = std::min(end, text.find(stop));
  text.resize(end);
  return text;
}

PromptTemplate PromptTemplate::read(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  SEQTRANS_CHECK(file.good(), "cannot read the prompt template '{}'", path);
  std::stringstream contents;
  contents << file.rdbuf();
  std::string text = contents.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  const std::string slot = "{source}";
  const size_t at = text.find(slot);
  SEQTRANS_CHECK(at != std::string::npos, "the prompt template '{}' has no {} slot", path, slot);
  SEQTRANS_CHECK(text.find(slot, at + 1) == std::string::npos, "the prompt template '{}' has more than one {} slot",
                 path, slot);
  PromptTemplate result;
  result.before_ = text.substr(0, at);
  result.after_ = text.substr(at + slot.size());
  return result;
}

std::string PromptTemplate::apply(std::string_view source) const { return before_ + std::string(source) + after_; }

}  // namespace seqtrans::app

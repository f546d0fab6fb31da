// How `seqtrans generate` and `translate --prompt-template` turn input lines into prompts and completions
// into output lines.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace seqtrans::app {

// A line's escapes: "\n" stands for a newline and "\\" for a backslash; any other backslash stays as it is.
std::string unescape_line(std::string_view line);
// The inverse: a completion as one output line.
std::string escape_line(std::string_view text);

// The "prompt" of a JSON object line ({"prompt": "..."}); one-line error naming the line otherwise.
std::string json_prompt(std::string_view line, size_t line_number);
// {"text": ..., "tokens": N} with JSON's string escapes: the best of `texts` (and their token counts); with
// several (n-best), "n_best": [{"text": ..., "tokens": N}, ...] holds them all, best first.
std::string json_completions(const std::vector<std::string>& texts, const std::vector<size_t>& tokens);

// `text` up to the first occurrence of any of `stops` (the whole text when none occurs).
std::string cut_at_stop(std::string text, const std::vector<std::string>& stops);

// A prompt template read from a file: its text with one "{source}" slot (a final line end is dropped).
class PromptTemplate {
 public:
  static PromptTemplate read(const std::string& path);
  std::string apply(std::string_view source) const;

 private:
  std::string before_, after_;
};

}  // namespace seqtrans::app

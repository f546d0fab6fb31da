// PromptTokenizer against Hugging Face's LlamaTokenizer: the ids and texts scripts/make_llama_goldens.py wrote
// to test/data/golden/llama_tokenizer.tsv (prompts with non-ASCII text, emoji, leading, trailing and repeated
// spaces, an empty line, special-token text; id sequences with byte runs valid and not), for each of HF's
// prefix schemes, with the tokenizer of test/data/llama_tiny_mha as converted.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "format/model_file.h"
#include "support/golden.h"
#include "text/prompt_tokenizer.h"
#include "translator.h"

namespace seqtrans {
namespace {

struct TokenizerCase {
  std::string kind;    // "encode" or "decode"
  std::string scheme;  // "first", "always" or "never"
  std::string input;
  std::string expected;
};

// The file's backslash escapes: \\ \t \n \r \0.
std::string unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    const char next = text[++i];
    out += next == 't' ? '\t' : next == 'n' ? '\n' : next == 'r' ? '\r' : next == '0' ? '\0' : next;
  }
  return out;
}

std::vector<TokenizerCase> read_cases() {
  std::ifstream in(std::string(SEQTRANS_TEST_DATA) + "/golden/llama_tokenizer.tsv");
  REQUIRE(in.good());
  std::vector<TokenizerCase> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::istringstream stream(line);
    for (std::string field; std::getline(stream, field, '\t');) fields.push_back(field);
    if (line.back() == '\t') fields.emplace_back();
    REQUIRE(fields.size() == 4);
    cases.push_back({fields[0], fields[1], unescape(fields[2]), unescape(fields[3])});
  }
  return cases;
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::istringstream stream(text);
  std::vector<int32_t> ids;
  for (int32_t id; stream >> id;) ids.push_back(id);
  return ids;
}

std::string join(const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += (text.empty() ? "" : " ") + std::to_string(id);
  return text;
}

TokenizerSpec llama_spec(PromptSpacePrefix prefix) {
  TokenizerSpec spec = tokenizer_spec(ModelFile::open(testing::converted_golden_model("llama_tiny_mha")));
  REQUIRE(spec.prompt.has_value());
  spec.prompt->space_prefix = prefix;
  return spec;
}

PromptSpacePrefix scheme_prefix(const std::string& scheme) {
  if (scheme == "always") return PromptSpacePrefix::Always;
  if (scheme == "never") return PromptSpacePrefix::Never;
  return PromptSpacePrefix::First;
}

}  // namespace

TEST_CASE("PromptTokenizer encodes prompts and decodes ids as Hugging Face's LlamaTokenizer", "[tokenizer][llama]") {
  const std::vector<TokenizerCase> cases = read_cases();
  size_t encoded = 0, decoded = 0;
  for (const std::string scheme : {"first", "always", "never"}) {
    const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(llama_spec(scheme_prefix(scheme)));
    REQUIRE(dynamic_cast<const PromptTokenizer*>(tokenizer.get()) != nullptr);
    for (const TokenizerCase& test : cases) {
      if (test.scheme != scheme) continue;
      INFO(test.kind << " " << scheme << ": '" << test.input << "'");
      if (test.kind == "encode") {
        CHECK(join(tokenizer->encode_source(test.input, "")) == test.expected);
        ++encoded;
      } else {
        CHECK(tokenizer->decode_target(parse_ids(test.input)) == test.expected);
        ++decoded;
      }
    }
  }
  CHECK(encoded >= 90);
  CHECK(decoded >= 90);
}

TEST_CASE("PromptTokenizer frames prompts: BOS first, no EOS, no languages, truncation on the right",
          "[tokenizer][llama]") {
  TokenizerSpec spec = llama_spec(PromptSpacePrefix::First);
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(spec);
  const std::vector<int32_t> ids = tokenizer->encode_source("English: A man.\nGerman:", "");
  REQUIRE(ids.size() > 3);
  CHECK(ids.front() == spec.special_ids.bos);
  CHECK(ids.back() != spec.special_ids.eos);
  CHECK(tokenizer->encode_source("", "") == std::vector<int32_t>{spec.special_ids.bos});
  CHECK(tokenizer->target_start("").empty());
  CHECK(tokenizer->encode_target_prefix("  ").empty());
  // A continuation is framed as a text of its own, without BOS.
  const std::vector<int32_t> prefix = tokenizer->encode_target_prefix("Ein Mann");
  CHECK(tokenizer->encode_source("Ein Mann", "") == [&] {
    std::vector<int32_t> framed{spec.special_ids.bos};
    framed.insert(framed.end(), prefix.begin(), prefix.end());
    return framed;
  }());
  std::vector<int32_t> truncated = ids;
  CHECK(tokenizer->truncate_source(truncated, 3));
  CHECK(truncated == std::vector<int32_t>(ids.begin(), ids.begin() + 3));
  CHECK_FALSE(tokenizer->truncate_source(truncated, 3));
  CHECK_THROWS_AS(tokenizer->encode_source("Hello", "en"), Error);
  CHECK_THROWS_AS(tokenizer->check_languages({"en", "de"}), Error);
  CHECK_NOTHROW(tokenizer->check_languages({}));
  CHECK_THROWS_AS(tokenizer->decode_target({100000}), Error);

  spec.prompt->add_bos = false;
  CHECK(make_tokenizer(spec)->encode_source("", "").empty());
}

}  // namespace seqtrans

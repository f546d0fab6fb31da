// Hidden test: compares Tokenizer with Hugging Face MarianTokenizer output written by
// text_hf_crosscheck.py (see its docstring). Runs only when asked for: "[.hf_crosscheck]" with
// SEQTRANS_HF_CROSSCHECK_DIR naming the bundle directory.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "catch.h"
#include "text/sentencepiece_tokenizer.h"

namespace seqtrans {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  REQUIRE(file.good());
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  REQUIRE(file.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  return lines;
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::istringstream stream(text);
  return std::vector<int32_t>(std::istream_iterator<int32_t>(stream), std::istream_iterator<int32_t>());
}

std::string join(const std::vector<int32_t>& ids) {
  std::string text;
  for (int32_t id : ids) text += (text.empty() ? "" : " ") + std::to_string(id);
  return text;
}

}  // namespace

TEST_CASE("Tokenizer matches Hugging Face MarianTokenizer", "[.hf_crosscheck]") {
  const char* bundle = std::getenv("SEQTRANS_HF_CROSSCHECK_DIR");
  if (bundle == nullptr) {
    WARN("SEQTRANS_HF_CROSSCHECK_DIR is not set: nothing to compare");
    return;
  }
  const std::string dir = bundle;
  TokenizerSpec spec;
  spec.source_spm = read_file(dir + "/source.spm");
  spec.target_spm = read_file(dir + "/target.spm");
  spec.source_vocab = read_lines(dir + "/source_vocab.txt");
  spec.target_vocab = read_lines(dir + "/target_vocab.txt");
  const std::vector<int32_t> special = parse_ids(read_lines(dir + "/special_ids.txt").at(0));
  REQUIRE(special.size() == 3);
  spec.special_ids = {special[0], special[1], special[2]};
  const SentencePieceTokenizer tokenizer(spec);

  const std::vector<std::string> inputs = read_lines(dir + "/encode_input.txt");
  const std::vector<std::string> expected_ids = read_lines(dir + "/encode_ids.txt");
  REQUIRE(inputs.size() == expected_ids.size());
  size_t encode_matches = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string ids = join(tokenizer.encode_source(inputs[k]));
    INFO("line " << k << ": " << inputs[k]);
    CHECK(ids == expected_ids[k]);
    encode_matches += ids == expected_ids[k];
  }

  const std::vector<std::string> decode_ids = read_lines(dir + "/decode_ids.txt");
  const std::vector<std::string> expected_texts = read_lines(dir + "/decode_text.txt");
  REQUIRE(decode_ids.size() == expected_texts.size());
  size_t decode_matches = 0;
  for (size_t k = 0; k < decode_ids.size(); ++k) {
    const std::string text = tokenizer.decode_target(parse_ids(decode_ids[k]));
    INFO("ids " << k << ": " << decode_ids[k]);
    CHECK(text == expected_texts[k]);
    decode_matches += text == expected_texts[k];
  }
  WARN("encode: " << encode_matches << "/" << inputs.size() << " lines match; decode: " << decode_matches
                  << "/" << decode_ids.size() << " match");
}

}  // namespace seqtrans

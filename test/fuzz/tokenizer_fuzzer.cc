// libFuzzer target: any bytes as a source line for the bundled model's tokenizer (real SentencePiece
// models and vocabularies), and the same bytes read as target ids to decode. Encoding never throws and
// always ends in EOS with ids inside the vocabulary; decoding accepts ids inside the target vocabulary
// and refuses the others with one line.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "format/model_file.h"
#include "text/sentencepiece_tokenizer.h"
#include "translator.h"

namespace {

using seqtrans::fuzz::require;

const seqtrans::SentencePieceTokenizer& bundled_tokenizer() {
  static const seqtrans::SentencePieceTokenizer tokenizer(seqtrans::tokenizer_spec(seqtrans::ModelFile::open(SEQTRANS_FUZZ_MODEL)));
  return tokenizer;
}

void check_encoding(const seqtrans::SentencePieceTokenizer& tokenizer, std::string_view line) {
  std::vector<int32_t> ids = tokenizer.encode_source(line);
  require(!ids.empty() && ids.back() == tokenizer.special_ids().eos, "an encoding does not end in EOS");
  const auto vocabulary = static_cast<int32_t>(tokenizer.source_vocabulary().size());
  for (int32_t id : ids) require(id >= 0 && id < vocabulary, "an encoded id is outside the source vocabulary");
  // The translator caps long lines; a cap shorter than the line keeps its start and ends in EOS.
  const size_t cap = 1 + line.size() % 7;
  const std::vector<int32_t> original = ids;
  if (tokenizer.truncate_source(ids, cap)) {
    require(ids.size() == cap && ids.back() == tokenizer.special_ids().eos, "a truncated line is not cap ids + EOS");
    require(std::equal(ids.begin(), ids.end() - 1, original.begin()), "truncation changed the kept ids");
  }
}

// Pairs of bytes as ids from a few below 0 to a few past the target vocabulary.
std::vector<int32_t> ids_from_bytes(std::string_view bytes, int32_t vocabulary) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    const int32_t raw = (static_cast<uint8_t>(bytes[i]) << 8) | static_cast<uint8_t>(bytes[i + 1]);
    ids.push_back(raw % (vocabulary + 8) - 4);
  }
  return ids;
}

void check_decoding(const seqtrans::SentencePieceTokenizer& tokenizer, std::string_view bytes) {
  const auto vocabulary = static_cast<int32_t>(tokenizer.target_vocabulary().size());
  const std::vector<int32_t> ids = ids_from_bytes(bytes, vocabulary);
  bool in_range = true;
  for (int32_t id : ids) in_range = in_range && id >= 0 && id < vocabulary;
  try {
    tokenizer.decode_target(ids);
    require(in_range, "an id outside the target vocabulary was decoded");
  } catch (const seqtrans::Error& error) {
    require(!in_range, "ids inside the target vocabulary were refused");
    seqtrans::fuzz::require_one_line(error.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const seqtrans::SentencePieceTokenizer& tokenizer = bundled_tokenizer();
  check_encoding(tokenizer, bytes);
  check_decoding(tokenizer, bytes);
  return 0;
}

// Tests for Tokenizer on tiny SentencePiece models trained here, in memory, from made-up sentences.
#include "text/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "catch.h"
#include "core/error.h"

namespace seqtrans {
namespace {

// Feeds training sentences to SentencePiece's trainer from memory: no files, no temp dir.
class SentenceList : public sentencepiece::SentenceIterator {
 public:
  explicit SentenceList(const std::vector<std::string>& sentences) : sentences_(sentences) {}
  bool done() const override { return next_ >= sentences_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return sentences_[next_]; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  const std::vector<std::string>& sentences_;
  size_t next_ = 0;
};

// Sentences made up from a fixed word list with a fixed generator, so the models need no data files
// and come out the same on every run.
std::vector<std::string> make_sentences(const std::vector<std::string>& words, size_t count) {
  std::minstd_rand generator(12345);
  std::vector<std::string> sentences;
  for (size_t s = 0; s < count; ++s) {
    const size_t length = 3 + generator() % 10;
    std::string sentence;
    for (size_t w = 0; w < length; ++w) {
      if (w > 0) sentence += ' ';
      sentence += words[generator() % words.size()];
    }
    sentence[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(sentence[0])));
    sentences.push_back(sentence + ".");
  }
  return sentences;
}

const std::vector<std::string>& english_sentences() {
  static const std::vector<std::string> sentences = make_sentences(
      {"a", "man", "woman", "dog", "runs", "in", "the", "park", "with", "red", "ball", "two", "children",
       "play", "on", "grass", "street", "blue", "shirt", "is", "sitting", "bench", "young", "girl", "boy",
       "water", "jumps", "over", "black", "white", "small", "large", "people", "are", "walking", "near",
       "building", "while", "holding", "camera", "wearing", "hat", "looks", "at", "sign"},
      400);
  return sentences;
}

const std::vector<std::string>& german_sentences() {
  static const std::vector<std::string> sentences = make_sentences(
      {"ein", "mann", "frau", "hund", "läuft", "im", "park", "mit", "rotem", "ball", "zwei", "kinder",
       "spielen", "auf", "dem", "gras", "straße", "blauen", "hemd", "sitzt", "bank", "junges", "mädchen",
       "junge", "wasser", "springt", "über", "schwarzer", "weißer", "kleiner", "großer", "leute", "gehen",
       "neben", "gebäude", "während", "hält", "kamera", "trägt", "hut", "schaut", "schild"},
      400);
  return sentences;
}

// Ids are SentencePiece's defaults plus a pad: unk 0, bos 1, eos 2, pad 3. Full character coverage so
// that every character of the corpus is a piece.
std::string train_model(const std::vector<std::string>& sentences, const std::string& model_type) {
  SentenceList list(sentences);
  std::string serialized;
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--model_type=" + model_type +
          " --vocab_size=120 --hard_vocab_limit=false --character_coverage=1.0 --pad_id=3"
          " --num_threads=1 --minloglevel=2",
      &list, &serialized);
  REQUIRE(status.ok());
  return serialized;
}

const std::string& english_model() {
  static const std::string model = train_model(english_sentences(), "unigram");
  return model;
}

const std::string& german_model() {
  static const std::string model = train_model(german_sentences(), "bpe");
  return model;
}

constexpr SpecialIds native_ids{/*eos=*/2, /*unk=*/0, /*pad=*/3};

// Both sides use the same model with SentencePiece's own ids: decode(encode(x)) should give x back.
TokenizerSpec same_model_spec(const std::string& model) {
  TokenizerSpec spec;
  spec.source_spm = model;
  spec.target_spm = model;
  spec.special_ids = native_ids;
  return spec;
}

std::unique_ptr<sentencepiece::SentencePieceProcessor> load(const std::string& model) {
  auto spm = std::make_unique<sentencepiece::SentencePieceProcessor>();
  REQUIRE(spm->LoadFromSerializedProto(model).ok());
  return spm;
}

// An OPUS-MT style vocab.json as a list: "</s>" 0, "<unk>" 1, the pieces of both models in a shuffled
// order with every tenth one left out (so that some pieces are unknown to the model), extra entries,
// then "<pad>" last.
std::vector<std::string> opus_vocab(const std::vector<std::string>& extra_pieces) {
  std::vector<std::string> pieces;
  for (const std::string* model : {&english_model(), &german_model()}) {
    const auto spm = load(*model);
    for (int id = 0; id < spm->GetPieceSize(); ++id) {
      if (spm->IsControl(id) || spm->IsUnknown(id)) continue;
      const std::string& piece = spm->IdToPiece(id);
      if (std::find(pieces.begin(), pieces.end(), piece) == pieces.end()) pieces.push_back(piece);
    }
  }
  std::shuffle(pieces.begin(), pieces.end(), std::minstd_rand(7));
  std::vector<std::string> vocab = {"</s>", "<unk>"};
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (k % 10 != 3) vocab.push_back(pieces[k]);
  }
  vocab.insert(vocab.end(), extra_pieces.begin(), extra_pieces.end());
  vocab.push_back("<pad>");
  return vocab;
}

TokenizerSpec opus_spec(const std::vector<std::string>& vocab) {
  TokenizerSpec spec;
  spec.source_spm = english_model();
  spec.target_spm = german_model();
  spec.source_vocab = vocab;
  spec.target_vocab = vocab;
  spec.special_ids = {/*eos=*/0, /*unk=*/1, /*pad=*/static_cast<int32_t>(vocab.size()) - 1};
  return spec;
}

std::vector<int32_t> with_eos(std::vector<int32_t> ids, int32_t eos) {
  ids.push_back(eos);
  return ids;
}

}  // namespace

TEST_CASE("Tokenizer encodes like SentencePiece and appends EOS", "[text][tokenizer]") {
  const SentencePieceTokenizer tokenizer(same_model_spec(english_model()));
  const auto spm = load(english_model());
  for (size_t k = 0; k < 50; ++k) {
    const std::string& line = english_sentences()[k];
    const std::vector<int> expected = spm->EncodeAsIds(line);
    CHECK(tokenizer.encode_source(line) == with_eos({expected.begin(), expected.end()}, native_ids.eos));
  }
}

TEST_CASE("Tokenizer decode(encode(line)) gives the line back", "[text][tokenizer]") {
  for (const auto* sentences : {&english_sentences(), &german_sentences()}) {
    const SentencePieceTokenizer tokenizer(same_model_spec(sentences == &english_sentences() ? english_model() : german_model()));
    for (size_t k = 0; k < 50; ++k) {
      const std::string& line = (*sentences)[k];
      CHECK(tokenizer.decode_target(tokenizer.encode_source(line)) == line);
    }
  }
}

TEST_CASE("Tokenizer maps pieces through an explicit vocabulary", "[text][tokenizer]") {
  const std::vector<std::string> vocab = opus_vocab({});
  const SentencePieceTokenizer tokenizer(opus_spec(vocab));
  const auto spm = load(english_model());
  size_t unknown_pieces = 0;
  for (size_t k = 0; k < 100; ++k) {
    const std::string& line = english_sentences()[k];
    const std::vector<int32_t> ids = tokenizer.encode_source(line);
    const std::vector<std::string> pieces = spm->EncodeAsPieces(line);
    REQUIRE(ids.size() == pieces.size() + 1);
    for (size_t p = 0; p < pieces.size(); ++p) {
      const auto in_vocab = std::find(vocab.begin(), vocab.end(), pieces[p]);
      const int32_t expected = in_vocab == vocab.end() ? 1 : static_cast<int32_t>(in_vocab - vocab.begin());
      CHECK(ids[p] == expected);
      unknown_pieces += expected == 1;
    }
    CHECK(ids.back() == 0);
  }
  CHECK(unknown_pieces > 0);  // the left-out pieces were exercised
}

TEST_CASE("Tokenizer decodes model ids through the target vocabulary", "[text][tokenizer]") {
  const std::vector<std::string> vocab = opus_vocab({});
  const SentencePieceTokenizer tokenizer(opus_spec(vocab));
  const auto spm = load(german_model());
  for (size_t k = 0; k < 50; ++k) {
    const std::string& line = german_sentences()[k];
    std::vector<int32_t> ids;
    std::string expected_pieces_text;
    bool all_known = true;
    for (const std::string& piece : spm->EncodeAsPieces(line)) {
      const auto in_vocab = std::find(vocab.begin(), vocab.end(), piece);
      all_known = all_known && in_vocab != vocab.end();
      ids.push_back(in_vocab == vocab.end() ? 1 : static_cast<int32_t>(in_vocab - vocab.begin()));
    }
    ids.push_back(0);
    const std::string text = tokenizer.decode_target(ids);
    if (all_known) CHECK(text == line);
    CHECK(text.find("\xE2\x96\x81") == std::string::npos);  // no "▁" left
  }
}

TEST_CASE("Tokenizer: pieces the model does not know become unk", "[text][tokenizer]") {
  const SentencePieceTokenizer native(same_model_spec(english_model()));
  // 'Q', 'ж' and '€' never occur in the training sentences.
  const std::vector<int32_t> ids = native.encode_source("a man Q ж €");
  CHECK(std::count(ids.begin(), ids.end(), native_ids.unk) >= 3);
  CHECK(native.decode_target(ids) == "a man");  // unk is dropped, as HF's skip_special_tokens does

  const std::vector<std::string> vocab = opus_vocab({});
  const SentencePieceTokenizer opus(opus_spec(vocab));
  const std::vector<int32_t> opus_ids = opus.encode_source("a man Q ж €");
  CHECK(std::count(opus_ids.begin(), opus_ids.end(), 1) >= 3);
}

TEST_CASE("Tokenizer: special pieces written in the text become special ids", "[text][tokenizer]") {
  const std::vector<std::string> vocab = opus_vocab({});
  const SentencePieceTokenizer tokenizer(opus_spec(vocab));
  const int32_t pad = static_cast<int32_t>(vocab.size()) - 1;
  const auto contains = [](const std::vector<int32_t>& ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  // MarianTokenizer splits "a </s> b" into "a ", "</s>", " b" and encodes the parts separately.
  const std::vector<int32_t> ids = tokenizer.encode_source("a man </s> a dog");
  const std::vector<int32_t> left = tokenizer.encode_source("a man ");
  const std::vector<int32_t> right = tokenizer.encode_source(" a dog");
  std::vector<int32_t> expected(left.begin(), left.end() - 1);
  expected.push_back(0);
  expected.insert(expected.end(), right.begin(), right.end());
  CHECK(ids == expected);
  CHECK(contains(tokenizer.encode_source("x<unk>y"), 1));
  CHECK(tokenizer.encode_source("<pad>") == std::vector<int32_t>{pad, 0});
  CHECK(tokenizer.encode_source("</s></s>") == std::vector<int32_t>{0, 0, 0});
  // A long line made of special pieces is split in linear time.
  std::string many;
  while (many.size() < 100000) many += "<unk></s>";
  CHECK(tokenizer.encode_source(many).size() == 2 * (many.size() / 9) + 1);
}

TEST_CASE("Tokenizer: a leading >>xx<< language code is one piece", "[text][tokenizer]") {
  const std::vector<std::string> vocab = opus_vocab({">>de<<", ">>fr<<"});
  const SentencePieceTokenizer tokenizer(opus_spec(vocab));
  const int32_t de = static_cast<int32_t>(std::find(vocab.begin(), vocab.end(), ">>de<<") - vocab.begin());
  const std::vector<int32_t> plain = tokenizer.encode_source(" a man");
  std::vector<int32_t> expected = {de};
  expected.insert(expected.end(), plain.begin(), plain.end());
  CHECK(tokenizer.encode_source(">>de<< a man") == expected);
  expected[0] = 1;  // a code the vocabulary lacks is unk, as in MarianTokenizer
  CHECK(tokenizer.encode_source(">>xx<< a man") == expected);
  // Only at the very start of the line, as MarianTokenizer.remove_language_code.
  CHECK(tokenizer.encode_source(" >>de<< a man")[0] != de);
  CHECK(tokenizer.encode_source(">>de<<") == std::vector<int32_t>{de, 0});
}

TEST_CASE("Tokenizer: blank lines encode to [eos]", "[text][tokenizer]") {
  const SentencePieceTokenizer tokenizer(same_model_spec(english_model()));
  for (const std::string& line : {std::string(), std::string("   "), std::string(" \t\r\n\v\f"),
                                 std::string("\0", 1), std::string("\xC2\xA0\xE3\x80\x80")}) {
    CHECK(is_blank(line));
    CHECK(tokenizer.encode_source(line) == std::vector<int32_t>{native_ids.eos});
  }
  CHECK(tokenizer.decode_target({}) == "");
  CHECK(tokenizer.decode_target({native_ids.eos}) == "");
  CHECK(tokenizer.decode_target({native_ids.pad, native_ids.unk, native_ids.eos}) == "");
}

TEST_CASE("Tokenizer: untrusted bytes never throw and have a defined meaning", "[text][tokenizer]") {
  const SentencePieceTokenizer tokenizer(same_model_spec(english_model()));
  const std::string fffd = "\xEF\xBF\xBD";
  // Invalid UTF-8 means U+FFFD (which nmt_nfkc normalization then drops).
  CHECK(tokenizer.encode_source("a man \xff\xfe dog") == tokenizer.encode_source("a man " + fffd + fffd + " dog"));
  CHECK(tokenizer.encode_source("a man \xe2\x82") == tokenizer.encode_source("a man " + fffd));
  // NUL is a space.
  CHECK(tokenizer.encode_source(std::string("a\0man", 5)) == tokenizer.encode_source("a man"));
  // Control characters and CR are left to SentencePiece's normalization.
  const std::vector<int32_t> controls = tokenizer.encode_source("a\x01man\rdog\x7f\x1b[0m");
  CHECK(controls.back() == native_ids.eos);
  CHECK(tokenizer.encode_source("a man\r") == tokenizer.encode_source("a man"));
}

TEST_CASE("Tokenizer: a 100,000-character line", "[text][tokenizer]") {
  const SentencePieceTokenizer tokenizer(same_model_spec(english_model()));
  std::string words;
  for (size_t k = 0; words.size() < 100000; ++k) words += english_sentences()[k % 400] + " ";
  words.resize(100000);
  const std::vector<int32_t> ids = tokenizer.encode_source(words);
  CHECK(ids.size() > 10000);
  CHECK(ids.back() == native_ids.eos);
  CHECK(tokenizer.decode_target(ids).size() > 90000);

  const std::vector<int32_t> one_word = tokenizer.encode_source(std::string(100000, 'a'));
  CHECK(one_word.size() > 1000);
  CHECK(one_word.back() == native_ids.eos);

  std::vector<int32_t> truncated = ids;
  CHECK(tokenizer.truncate_source(truncated, 512));
  CHECK(truncated.size() == 512);
  CHECK(std::equal(truncated.begin(), truncated.end() - 1, ids.begin()));
  CHECK(truncated.back() == native_ids.eos);
}

TEST_CASE("Tokenizer::truncate_source keeps EOS last", "[text][tokenizer]") {
  const SentencePieceTokenizer tokenizer(same_model_spec(english_model()));
  std::vector<int32_t> ids = {10, 11, 12, 13, 14, 15, native_ids.eos};
  CHECK_FALSE(tokenizer.truncate_source(ids, 7));
  CHECK(ids.size() == 7);
  CHECK_FALSE(tokenizer.truncate_source(ids, 100));
  CHECK(tokenizer.truncate_source(ids, 4));
  CHECK(ids == std::vector<int32_t>{10, 11, 12, native_ids.eos});
  CHECK(tokenizer.truncate_source(ids, 1));
  CHECK(ids == std::vector<int32_t>{native_ids.eos});
  CHECK_THROWS_AS(tokenizer.truncate_source(ids, 0), Error);
}

TEST_CASE("Tokenizer rejects ids outside the target vocabulary", "[text][tokenizer]") {
  const SentencePieceTokenizer tokenizer(same_model_spec(english_model()));
  const int32_t size = tokenizer.target_vocabulary().size();
  CHECK_THROWS_AS(tokenizer.decode_target({5, size}), Error);
  CHECK_THROWS_AS(tokenizer.decode_target({-1}), Error);
}

TEST_CASE("Tokenizer construction fails cleanly on bad models and ids", "[text][tokenizer]") {
  TokenizerSpec spec = same_model_spec(english_model());
  CHECK_NOTHROW(SentencePieceTokenizer(spec));
  spec.target_spm.clear();
  CHECK_THROWS_AS(SentencePieceTokenizer(spec), Error);
  spec.target_spm = "not a SentencePiece model";
  CHECK_THROWS_AS(SentencePieceTokenizer(spec), Error);

  spec = same_model_spec(english_model());
  spec.special_ids.eos = 100000;
  CHECK_THROWS_AS(SentencePieceTokenizer(spec), Error);
  spec = same_model_spec(english_model());
  spec.special_ids.unk = -1;
  CHECK_THROWS_AS(SentencePieceTokenizer(spec), Error);
  spec = same_model_spec(english_model());
  spec.special_ids.pad = -1;  // no pad token is fine
  CHECK_NOTHROW(SentencePieceTokenizer(spec));
  spec.target_vocab = {"</s>", "<unk>"};  // eos 2 does not fit a 2-piece target vocabulary
  CHECK_THROWS_AS(SentencePieceTokenizer(spec), Error);
}

TEST_CASE("Tokenizer can be shared by threads", "[text][tokenizer]") {
  const SentencePieceTokenizer tokenizer(opus_spec(opus_vocab({})));
  std::vector<std::vector<int32_t>> expected;
  for (const std::string& line : english_sentences()) expected.push_back(tokenizer.encode_source(line));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < english_sentences().size(); ++k) {
        mismatches[t] += tokenizer.encode_source(english_sentences()[k]) != expected[k];
        mismatches[t] += tokenizer.decode_target(expected[k]).empty();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("MultilingualTokenizer frames sources with language tokens and forces the target's first", "[text][tokenizer]") {
  const std::vector<std::string> vocab = opus_vocab({"eng_Latn", "deu_Latn"});
  TokenizerSpec spec = opus_spec(vocab);
  const int32_t english = static_cast<int32_t>(vocab.size()) - 3, german = static_cast<int32_t>(vocab.size()) - 2;
  spec.language_codes = {{"eng_Latn", english}, {"deu_Latn", german}};
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(spec);
  const SentencePieceTokenizer text_only(opus_spec(vocab));
  const std::string line = "The quick brown fox.";
  const std::vector<int32_t> plain = text_only.encode_source(line);  // tokens, EOS

  SECTION("prefix placement: [code] tokens [eos]") {
    std::vector<int32_t> expected = plain;
    expected.insert(expected.begin(), english);
    CHECK(tokenizer->encode_source(line, "eng_Latn") == expected);
    CHECK(tokenizer->target_start("deu_Latn") == std::vector<int32_t>{german});
    // Truncation keeps the language token and EOS (HF's truncation with special tokens).
    std::vector<int32_t> cut = expected;
    REQUIRE(tokenizer->truncate_source(cut, 4));
    CHECK(cut == std::vector<int32_t>{english, plain[0], plain[1], spec.special_ids.eos});
  }
  SECTION("suffix placement: tokens [eos] [code]") {
    spec.source_language = SourceLanguagePlacement::Suffix;
    const std::unique_ptr<Tokenizer> legacy = make_tokenizer(spec);
    std::vector<int32_t> expected = plain;
    expected.push_back(english);
    CHECK(legacy->encode_source(line, "eng_Latn") == expected);
    std::vector<int32_t> cut = expected;
    REQUIRE(legacy->truncate_source(cut, 4));
    CHECK(cut == std::vector<int32_t>{plain[0], plain[1], spec.special_ids.eos, english});
  }
  SECTION("language tokens are dropped when decoding") {
    std::vector<int32_t> ids = text_only.encode_target_prefix("Der schnelle Fuchs");
    const std::string text = text_only.decode_target(ids);
    ids.insert(ids.begin(), german);
    CHECK(tokenizer->decode_target(ids) == text);
  }
  SECTION("missing or unknown codes are refused in one line that names some and how to list all") {
    CHECK_NOTHROW(tokenizer->check_languages({"eng_Latn", "deu_Latn"}));
    for (const Languages& bad : {Languages{"", "deu_Latn"}, Languages{"eng_Latn", "xx_Yyyy"}}) {
      try {
        tokenizer->check_languages(bad);
        FAIL("expected an error");
      } catch (const Error& error) {
        const std::string message = error.what();
        CHECK(message.find("eng_Latn, deu_Latn") != std::string::npos);
        CHECK(message.find("inspect_model.py --languages") != std::string::npos);
        CHECK(message.find('\n') == std::string::npos);
      }
    }
  }
  SECTION("a model of one pair refuses language codes") {
    CHECK_NOTHROW(text_only.check_languages({}));
    CHECK_THROWS_AS(text_only.check_languages({"eng_Latn", "deu_Latn"}), Error);
  }
}

}  // namespace seqtrans

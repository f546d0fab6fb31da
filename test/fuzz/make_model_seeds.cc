// Writes the seed corpus of model_file_fuzzer: small valid model files of a few shapes, so that mutations
// start from files that pass every check. Usage: make_model_seeds DIR (test/fuzz/corpus/model_file_fuzzer).
#include <cstdio>
#include <string>

#include "support/model_builder.h"

using namespace seqtrans::testing;

namespace {

TinyModelShape small_shape() {
  TinyModelShape shape;
  shape.d_model = 4;
  shape.heads = 2;
  shape.ffn = 8;
  shape.encoder_layers = 1;
  shape.decoder_layers = 1;
  shape.vocab = 6;
  shape.max_positions = 8;
  return shape;
}

// The optional parts a converter writes: vocabularies, generation defaults, a non-ASCII description.
ModelImage with_optional_fields(ModelImage image) {
  seqtrans::proto::ModelHeader& header = image.header;
  for (const char* piece : {"</s>", "<unk>", "\xe2\x96\x81" "a", "b", "\xc3\xa4", "<pad>"}) {
    header.mutable_tokenizer()->add_source_vocab(piece);
    header.mutable_tokenizer()->add_target_vocab(piece);
  }
  header.mutable_generation()->set_max_length(6);
  header.mutable_generation()->set_num_beams(2);
  header.mutable_generation()->set_forced_eos_token_id(0);
  header.set_description("seed \xe2\x80\x94 Modell f\xc3\xbcr den Fuzzer");
  return image;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_model_seeds DIR\n");
    return 2;
  }
  const std::string directory = argv[1];
  TinyModelShape two_layers = small_shape();
  two_layers.encoder_layers = 2;
  two_layers.vocab = 9;
  write_model_file(directory + "/tiny.seqtrans", make_tiny_model(small_shape()));
  write_model_file(directory + "/optional_fields.seqtrans", with_optional_fields(make_tiny_model(small_shape())));
  write_model_file(directory + "/two_encoder_layers.seqtrans", make_tiny_model(two_layers));
  TinyLlamaShape llama;
  llama.d_model = 8;
  llama.ffn = 8;
  llama.layers = 1;
  llama.vocab = 6;
  llama.max_positions = 8;
  write_model_file(directory + "/tiny_llama.seqtrans", make_tiny_llama_model(llama));
  return 0;
}

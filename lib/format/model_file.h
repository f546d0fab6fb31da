// Reads and validates a seqtrans model file (layout in proto/model.proto) before anything uses it.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "format/model_config.h"

namespace seqtrans {

// A validated model file: config, tokenizer and host views of every tensor (fp32 or fp16, as stored).
// Tensor views point into the memory-mapped file, which lives as long as this object.
class ModelFile {
 public:
  // Throws seqtrans::Error with one line naming the file and the bad field or tensor.
  static ModelFile open(const std::string& path);
  // The same checks on a model file held in memory (a fuzzer's input); `name` stands in for the path in
  // messages. The tensor views point into `bytes`, which the returned object keeps.
  static ModelFile from_bytes(std::string name, std::string bytes);
  // A model held in memory (e.g. random weights); `name` stands in for the path in messages.
  static ModelFile from_parts(std::string name, ModelConfig config, TokenizerConfig tokenizer,
                              std::map<std::string, Tensor> tensors);

  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const TokenizerConfig& tokenizer() const { return tokenizer_; }
  const GenerationDefaults& generation_defaults() const { return generation_; }
  const std::string& description() const { return description_; }

  bool has_tensor(const std::string& name) const { return tensors_.count(name) != 0; }
  // The tensor `name` with exactly `expected` shape, or a one-line error naming both.
  const Tensor& tensor(const std::string& name, const Shape& expected) const;
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  // Validates the header at `bytes` [size] and sets everything but path_ and backing_ from it.
  void parse(const char* bytes, uint64_t size);

  std::string path_;
  std::shared_ptr<const void> backing_;  // what the tensor views point into: a MappedFile or a string
  ModelConfig config_;
  TokenizerConfig tokenizer_;
  GenerationDefaults generation_;
  std::string description_;
  std::map<std::string, Tensor> tensors_;
};

// Format constants shared with scripts/seqtrans_file.py. Version 2 added config.kind (required from then
// on), position offsets and language codes; version 1 files still load (as encoder-decoder models).
// Version 3 added what decoder-only (Llama-family) models need: the norm kind, rotary positions, key/value
// heads and head_dim, gated feed-forward, bias-free projections, the BOS id and prompt framing; each new
// field's zero value means what older files do, so version 1 and 2 files load unchanged.
inline constexpr char kModelMagic[8] = {'S', 'E', 'Q', 'T', 'R', 'N', 'S', '\0'};
inline constexpr uint32_t kModelFormatVersion = 3;
inline constexpr uint64_t kTensorAlignment = 64;

}  // namespace seqtrans

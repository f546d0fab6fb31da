// libFuzzer target: any bytes as a model file. The reader must accept them or throw one seqtrans::Error
// of one line naming the file; any other exception, a crash, a leak or a read outside the input is a
// finding. The input is parsed from a heap copy (not a mapping), so ASan sees every byte a tensor view
// could reach.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz/fuzz_check.h"
#include "format/model_file.h"

namespace {

constexpr char kName[] = "fuzz-input.seqtrans";

// Reads every byte of every tensor: a view reaching past the input is then an ASan report.
unsigned checksum_tensors(const seqtrans::ModelFile& model) {
  unsigned sum = 0;
  for (const auto& [name, tensor] : model.tensors()) {
    const auto* bytes = static_cast<const unsigned char*>(tensor.raw());
    for (size_t i = 0; i < tensor.bytes(); ++i) sum += bytes[i];
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using seqtrans::fuzz::require;
  try {
    const seqtrans::ModelFile model =
        seqtrans::ModelFile::from_bytes(kName, std::string(reinterpret_cast<const char*>(data), size));
    volatile unsigned sum = checksum_tensors(model);
    (void)sum;
    // What the reader promised: a config the rest of the engine can size itself from.
    const seqtrans::ModelConfig& config = model.config();
    require(config.d_model >= 1, "d_model accepted unchecked");
    for (const seqtrans::StackConfig* stack : {&config.encoder, &config.decoder}) {
      if (stack == &config.encoder && config.kind == seqtrans::ModelKind::DecoderOnly) continue;
      require(stack->num_heads >= 1 && (stack->head_dim > 0 || config.d_model % stack->num_heads == 0) &&
                  stack->num_heads % seqtrans::key_value_heads(*stack) == 0,
              "attention heads accepted unchecked");
    }
    require(config.eos_id >= 0 && config.eos_id < config.target_vocab_size, "eos_id accepted unchecked");
  } catch (const seqtrans::Error& error) {
    const std::string message = error.what();
    seqtrans::fuzz::require_one_line(message);
    require(message.find(kName) != std::string::npos, "a model file error does not name the file");
  }
  return 0;
}

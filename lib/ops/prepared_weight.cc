#include "ops/prepared_weight.h"

#include "cpu/isa.h"
#include "cpu/packed_matrix.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::Plain: return "plain";
    case WeightFormat::Packed: return "packed";
    case WeightFormat::Int8: return "int8";
  }
  return "?";
}

std::shared_ptr<const PreparedWeight> prepare_weight(const Tensor& weight, WeightFormat format, bool pack_now) {
  check_rank("prepare_weight", "weight", weight, 2);
  if (format == WeightFormat::Plain || weight.device() != Device::CPU) return nullptr;
  check_dtype("prepare_weight", "weight", weight, DataType::F32);
  // fp32 panels wait for the products that read them, unless asked now; int8 has no plain path to fall back on.
  if (format == WeightFormat::Packed && !pack_now) return cpu::pack_matrix_on_use(weight);
  return cpu::pack_matrix(weight, format);
}

bool weight_format_available(WeightFormat format, Device device) {
  if (format == WeightFormat::Plain) return true;
  return device == Device::CPU && cpu::cpu_isa() != cpu::Isa::Portable;
}

}  // namespace seqtrans::ops

#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor embed(const Tensor& ids, const Tensor& positions, const Tensor& table, const EmbeddingOptions& options) {
  check_rank("embed", "ids", ids, 1);
  check_rank("embed", "positions", positions, 1);
  check_dtype("embed", "ids", ids, DataType::I32);
  check_dtype("embed", "positions", positions, DataType::I32);
  check_extent("embed", "positions", positions, 0, ids.dim(0));
  check_rank("embed", "table", table, 2);
  check_float("embed", "table", table);
  check_same_device("embed", ids, table);
  check_same_device("embed", positions, table);
  SEQTRANS_CHECK(options.position_offset >= 0, "embed: position offset {} is negative", options.position_offset);
  SEQTRANS_CHECK(options.positions != PositionEncoding::SinusoidalFairseq,
                 "embed: give fairseq sinusoids as a position table (sinusoid_table) with learned positions");
  if (options.positions == PositionEncoding::Learned) {
    SEQTRANS_CHECK(options.position_table != nullptr, "embed: learned positions need a position table");
    check_rank("embed", "position table", *options.position_table, 2);
    check_extent("embed", "position table", *options.position_table, 1, table.dim(1));
    check_like("embed", "position table", *options.position_table, table);
  }
  if (options.sinusoid_table != nullptr) {
    check_rank("embed", "sinusoid table", *options.sinusoid_table, 2);
    check_dtype("embed", "sinusoid table", *options.sinusoid_table, DataType::F32);
    check_extent("embed", "sinusoid table", *options.sinusoid_table, 1, table.dim(1));
    check_same_device("embed", *options.sinusoid_table, table);
  }
  Tensor out({ids.dim(0), table.dim(1)}, table.dtype(), table.device());
  const ProfileScope profile("other kernels");
  switch (table.device()) {
    case Device::CPU: cpu::embed(ids, positions, table, options, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(embed, ids, positions, table, options, out); break;
  }
  return out;
}

Tensor sinusoid_table(int64_t positions, int64_t width, Device device, PositionEncoding kind) {
  SEQTRANS_CHECK(positions >= 0 && width >= 1, "sinusoid_table: {} positions of width {}", positions, width);
  SEQTRANS_CHECK(kind != PositionEncoding::Learned, "sinusoid_table: learned positions have no formula");
  if (kind == PositionEncoding::SinusoidalFairseq) {
    Tensor host({positions, width}, DataType::F32, Device::CPU);
    cpu::fairseq_sinusoid_table(host);
    return device == Device::CPU ? host : host.to(device);
  }
  Tensor out({positions, width}, DataType::F32, device);
  switch (device) {
    case Device::CPU: cpu::sinusoid_table(out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(sinusoid_table, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops

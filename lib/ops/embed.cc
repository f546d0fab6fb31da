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
  if (options.positions == PositionEncoding::Learned) {
    SEQTRANS_CHECK(options.position_table != nullptr, "embed: learned positions need a position table");
    check_rank("embed", "position table", *options.position_table, 2);
    check_extent("embed", "position table", *options.position_table, 1, table.dim(1));
    check_like("embed", "position table", *options.position_table, table);
  }
  Tensor out({ids.dim(0), table.dim(1)}, table.dtype(), table.device());
  const ProfileScope profile("other kernels");
  switch (table.device()) {
    case Device::CPU: cpu::embed(ids, positions, table, options, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(embed, ids, positions, table, options, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops

#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor rotary_table(int64_t positions, int64_t head_dim, float theta, Device device) {
  SEQTRANS_CHECK(positions >= 0 && positions <= (int64_t{1} << 24),
                 "rotary_table: {} positions; fp32 counts exactly only up to 2^24", positions);
  SEQTRANS_CHECK(head_dim >= 2 && head_dim % 2 == 0, "rotary_table: head size {} is not even", head_dim);
  SEQTRANS_CHECK(theta > 1.0f, "rotary_table: theta {} is not above 1", theta);
  Tensor host({positions, head_dim}, DataType::F32, Device::CPU);
  cpu::rotary_table(theta, host);
  return device == Device::CPU ? host : host.to(device);
}

void apply_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table, const RotaryShape& shape) {
  const char* op = "apply_rotary_embedding";
  check_rank(op, "qkv", qkv, 2);
  check_float(op, "qkv", qkv);
  check_rank(op, "positions", positions, 1);
  check_dtype(op, "positions", positions, DataType::I32);
  check_extent(op, "positions", positions, 0, qkv.dim(0));
  check_rank(op, "table", table, 2);
  check_dtype(op, "table", table, DataType::F32);
  SEQTRANS_CHECK(table.dim(1) >= 2 && table.dim(1) % 2 == 0, "{}: table width {} is not an even head size", op,
                 table.dim(1));
  SEQTRANS_CHECK(shape.num_heads >= 1 && shape.num_kv_heads >= 1, "{}: {} heads and {} kv heads", op, shape.num_heads,
                 shape.num_kv_heads);
  check_extent(op, "qkv", qkv, 1, (int64_t{shape.num_heads} + 2 * int64_t{shape.num_kv_heads}) * table.dim(1));
  check_same_device(op, qkv, positions);
  check_same_device(op, qkv, table);
  const ProfileScope profile("other kernels");
  switch (qkv.device()) {
    case Device::CPU: cpu::apply_rotary_embedding(qkv, positions, table, shape); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(apply_rotary_embedding, qkv, positions, table, shape); break;
  }
}

}  // namespace seqtrans::ops

#include "strategies/op_timing.hpp"

#include <algorithm>

namespace clustersim {
namespace {
using i64 = std::int64_t;
bool tp_sharded(Split s) { return s == Split::column || s == Split::row || s == Split::heads; }
}  // namespace

OpTiming time_op(const Op& op, const ShardingContext& ctx, const KernelModel& km) {
  const i64 t = ctx.tp;
  const bool sp = ctx.sequence_parallel && t > 1;
  const double shard = tp_sharded(op.split) ? double(t) : (op.split == Split::seq && sp ? double(t) : 1.0);
  OpTiming r;
  switch (op.kind) {
    case OpKind::matmul: {
      i64 b = op.batch, m = op.m, n = op.n, k = op.k;
      if (op.split == Split::column) n = std::max<i64>(1, n / t);
      if (op.split == Split::row) k = std::max<i64>(1, k / t);
      if (op.split == Split::heads) b = std::max<i64>(1, b / t);
      if (op.expert && ctx.ep > 1) {
        // Each GPU holds experts/ep experts and receives their tokens from ep ranks.
        b = std::max<i64>(1, b / ctx.ep);
        m *= ctx.ep;
      }
      r.forward = km.gemm(b, m, n, k, ctx.dtype);
      // Backward: the gradient of each operand is one GEMM (dgrad, wgrad).
      r.backward = km.gemm(b, m, k, n, ctx.dtype) + km.gemm(b, k, n, m, ctx.dtype);
      r.forward_flops = 2.0 * double(b) * m * n * k;
      break;
    }
    case OpKind::attention: {
      const i64 b = std::max<i64>(1, op.batch / t);
      r.forward = km.attention_forward(b, op.m, op.n, op.k, op.causal, op.fwd_bytes / t, ctx.dtype);
      r.backward = km.attention_backward(b, op.m, op.n, op.k, op.causal, op.bwd_bytes / t, ctx.dtype);
      r.forward_flops = 4.0 * double(b) * op.m * op.n * op.k;
      break;
    }
    case OpKind::memory:
      if (op.kernels > 0) {
        if (op.fwd_bytes > 0) r.forward = km.memory(op.fwd_bytes / shard, op.kernels, op.memory_kind);
        if (op.bwd_bytes > 0) r.backward = km.memory(op.bwd_bytes / shard, 2 * op.kernels, op.memory_kind);
      }
      break;
    case OpKind::embedding:
      // A vocab-parallel lookup writes the full output on every rank (zeros where the
      // row lives elsewhere), so its traffic does not shrink with tp.
      r.forward = km.memory(op.fwd_bytes, 1);
      r.backward = km.memory(op.bwd_bytes, 1);
      break;
    case OpKind::tp_enter:  // Megatron's f: identity forward, all-reduce backward
      if (t > 1) {
        if (sp) r.forward_comm = {Collective::all_gather, op.comm_bytes, CommGroup::tp};
        r.backward_comm = {sp ? Collective::reduce_scatter : Collective::all_reduce, op.comm_bytes, CommGroup::tp};
      }
      break;
    case OpKind::tp_exit:  // Megatron's g: all-reduce forward, identity backward
      if (t > 1) {
        r.forward_comm = {sp ? Collective::reduce_scatter : Collective::all_reduce, op.comm_bytes, CommGroup::tp};
        if (sp) r.backward_comm = {Collective::all_gather, op.comm_bytes, CommGroup::tp};
      }
      break;
    case OpKind::all_to_all:
      if (ctx.ep > 1) {
        r.forward_comm = {Collective::all_to_all, op.comm_bytes, CommGroup::ep};
        r.backward_comm = r.forward_comm;
      }
      break;
  }
  r.saved = op.saved_bytes / shard;
  double param_shard = 1;
  if (op.split == Split::column || op.split == Split::row) param_shard *= double(t);
  if (op.expert) param_shard *= double(ctx.ep);
  r.params = op.params / param_shard;
  return r;
}

}  // namespace clustersim

#include "strategies/op_timing.hpp"

#include "strategies/rules.hpp"

#include <algorithm>
#include <cmath>

namespace clustersim {
namespace {
using i64 = std::int64_t;
// `n` split `ways` ways, at least 1 (shapes that do not divide round down).
i64 split(i64 n, i64 ways) { return ways > 1 ? std::max<i64>(1, n / ways) : n; }
}  // namespace

Fp8CastTraffic fp8_casts(i64 b, i64 m, i64 n, i64 k) {
  const double in = double(b) * double(m) * double(k), out = double(b) * double(m) * double(n);
  return {3 * in, 3 * out + 2 * out + 2 * in};
}

OpWork op_work(const Op& op, const OpShards& s, const KernelModel& km, DType dtype, DType weight_gemm) {
  OpWork r;
  const double ways = double(s.ways());
  switch (op.kind) {
    case OpKind::matmul: {
      i64 b = split(op.batch, s.batch), m = split(op.m, s.rows * s.context);
      const i64 n = split(op.n, s.cols), k = split(op.k, s.contract);
      if (op.expert && s.expert_parallel > 1) {
        b = split(b, s.expert_parallel);
        m *= s.expert_parallel;
      }
      const DType g = gemm_dtype(op, dtype, weight_gemm);
      r.forward = km.gemm(b, m, n, k, g);
      // Backward: the gradient of each operand is one GEMM (dgrad, wgrad).
      r.backward = km.gemm(b, m, k, n, g) + km.gemm(b, k, n, m, g);
      if (op.weight) r.weight_grad = km.gemm(b, k, n, m, g);
      if (g == DType::fp8 && dtype != DType::fp8) {
        const Fp8CastTraffic c = fp8_casts(b, m, n, k);
        r.forward += km.memory(c.forward, c.forward_kernels);
        r.backward += km.memory(c.backward, c.backward_kernels);
      }
      r.forward_flops = 2.0 * double(b) * m * n * k;
      const i64 saved_ways = s.rows * s.context * s.contract * s.batch * (op.split == Split::column ? s.cols : 1);
      r.saved = op.saved_bytes / double(saved_ways);
      break;
    }
    case OpKind::attention: {
      if (s.context > 1 && !s.context_heads) {
        // Ring: `context` block kernels, each of seq/context queries against as many keys.
        const i64 b = split(op.batch, s.ways() / s.context), q = split(op.m, s.context), kv = split(op.n, s.context);
        const double c = double(s.context);
        r.forward = c * km.attention_forward(b, q, kv, op.k, op.causal, op.fwd_bytes / ways, dtype);
        r.backward = c * km.attention_backward(b, q, kv, op.k, op.causal, op.bwd_bytes / ways, dtype);
        r.forward_flops = c * 4.0 * double(b) * q * kv * op.k;
        break;
      }
      const i64 b = split(op.batch, s.ways());
      r.forward = km.attention_forward(b, op.m, op.n, op.k, op.causal, op.fwd_bytes / ways, dtype);
      r.backward = km.attention_backward(b, op.m, op.n, op.k, op.causal, op.bwd_bytes / ways, dtype);
      r.forward_flops = 4.0 * double(b) * op.m * op.n * op.k;
      break;
    }
    case OpKind::memory:
      if (op.kernels > 0 || op.bwd_kernels() > 0) {
        if (op.fwd_bytes > 0) r.forward = km.memory(op.fwd_bytes / ways, op.kernels, op.memory_kind);
        if (op.bwd_bytes > 0) r.backward = km.memory(op.bwd_bytes / ways, op.bwd_kernels(), op.bwd_memory_kind());
      }
      break;
    case OpKind::embedding: {
      const double traffic = double(s.rows * s.cols * s.batch * s.context);
      r.forward = km.memory(op.fwd_bytes / traffic, 1, op.memory_kind);
      r.backward = km.memory(op.bwd_bytes / traffic, 1, op.memory_kind);
      break;
    }
    case OpKind::tp_enter:
    case OpKind::tp_exit:
    case OpKind::all_to_all: break;  // communication only: its collective is the plan's
  }
  if (op.kind != OpKind::matmul) r.saved = op.saved_bytes / ways;
  r.params = op.params / double(s.cols * s.contract * (op.expert ? s.batch * s.expert_parallel : 1));
  return r;
}

OpShards megatron_shards(const Op& op, const ShardingContext& ctx) {
  OpShards s;
  const i64 t = ctx.tp;
  switch (op.split) {
    case Split::column: (op.kind == OpKind::embedding ? s.contract : s.cols) = t; break;
    case Split::row: s.contract = t; break;
    case Split::heads: s.batch = t; break;
    case Split::seq:
      if (ctx.sequence_parallel && t > 1) s.rows = t;
      break;
    case Split::none: break;
  }
  if (op.expert) s.expert_parallel = ctx.ep;
  if (ctx.cp > 1) {
    s.context = ctx.cp;
    s.context_heads = ctx.cp_algorithm == CpAlgorithm::all_to_all;
  }
  return s;
}

ContextExchange context_exchange(const Op& op, const OpShards& s, CpAlgorithm algorithm) {
  ContextExchange x;
  x.algorithm = algorithm;
  if (op.kind != OpKind::attention || s.context <= 1) return x;
  const double ways = double(s.ways());  // this GPU's share of the tensors: its heads, its tokens
  if (algorithm == CpAlgorithm::ring) {
    x.steps = s.context - 1;
    x.forward_bytes = op.kv_bytes / ways;
    x.backward_bytes = 2 * op.kv_bytes / ways;
  } else {
    x.calls = 4;
    x.forward_bytes = op.fwd_bytes / ways;
    x.backward_bytes = op.fwd_bytes / ways;
  }
  return x;
}

double expert_all_to_all_share(i64 top_k, i64 max_nodes_per_token, i64 ep_nodes) {
  if (max_nodes_per_token <= 0 || ep_nodes <= 1 || top_k <= 0) return 1.0;
  const double n = double(ep_nodes);
  const double reached = n * (1.0 - std::pow(1.0 - 1.0 / n, double(top_k)));
  return std::min(1.0, std::min(reached, double(max_nodes_per_token)) / double(top_k));
}

int context_kernels(const ContextExchange& x) { return static_cast<int>(x.steps) + x.calls; }

OpTiming time_op(const Op& op, const ShardingContext& ctx, const KernelModel& km) {
  const i64 t = ctx.tp;
  const bool sp = ctx.sequence_parallel && t > 1;
  OpTiming r;
  const OpShards shards = megatron_shards(op, ctx);
  static_cast<OpWork&>(r) = op_work(op, shards, km, ctx.dtype, ctx.weight_gemm);
  r.context = context_exchange(op, shards, ctx.cp_algorithm);
  // The collectives of tensor and expert parallelism move this GPU's tokens: 1/cp of them.
  const double tokens = 1.0 / double(std::max<i64>(1, ctx.cp));
  switch (op.kind) {
    case OpKind::tp_enter:  // Megatron's f: identity forward, all-reduce backward
      if (t > 1) {
        if (sp) r.forward_comm = {Collective::all_gather, op.comm_bytes * tokens, CommGroup::tp};
        r.backward_comm = {sp ? Collective::reduce_scatter : Collective::all_reduce, op.comm_bytes * tokens, CommGroup::tp};
      }
      break;
    case OpKind::tp_exit:  // Megatron's g: all-reduce forward, identity backward
      if (t > 1) {
        r.forward_comm = {sp ? Collective::reduce_scatter : Collective::all_reduce, op.comm_bytes * tokens, CommGroup::tp};
        if (sp) r.backward_comm = {Collective::all_gather, op.comm_bytes * tokens, CommGroup::tp};
      }
      break;
    case OpKind::all_to_all:
      if (ctx.ep > 1) {
        r.forward_comm = {Collective::all_to_all, op.comm_bytes * ctx.all_to_all_share * tokens, CommGroup::ep};
        r.backward_comm = r.forward_comm;
      }
      break;
    default: break;
  }
  return r;
}

bool tp_comm_overlapped(const FrameworkSpec& f, const PlanSpec& plan) {
  return f.name == Framework::megatron && f.tp_comm_overlap && plan.tp > 1 && plan.sequence_parallel;
}

Seconds tp_collective_time(const ClusterModel& cluster, const Group& tp, const CommStep& step) {
  return collective_time(cluster, step.kind, step.bytes, tp, 1.0);
}

TpOverlapSettings tp_overlap_settings(const GpuProfile& gpu, DType gemm) {
  TpOverlapSettings s;
  s.reduce_scatter_ring = gemm == DType::fp8;
  s.sms = gpu.sms;
  return s;
}

void overlap_tp_comm(const std::vector<Op>& ops, std::vector<OpTiming>& t, const ShardingContext& ctx, const KernelModel& km,
                     const std::function<Seconds(const CommStep&)>& collective, const TpOverlapSettings& settings,
                     const OverlapInterference& interference) {
  const i64 tp = ctx.tp;
  if (tp <= 1) return;
  // The op's GEMMs run as `pieces` GEMMs of 1/pieces of its rows: their summed time.
  const auto chunked = [&](const Op& op, i64 pieces) {
    Op piece = op;
    piece.m = std::max<i64>(1, op.m / pieces);
    OpTiming c = time_op(piece, ctx, km);
    c.forward *= double(pieces);
    c.backward *= double(pieces);
    c.weight_grad *= double(pieces);
    return c;
  };
  const std::size_t n = std::min(ops.size(), t.size());
  for (std::size_t i = 0; i < n; ++i) {
    OpTiming& c = t[i];
    if (ops[i].kind == OpKind::tp_enter && c.forward_comm.active() && c.forward_comm.kind == Collective::all_gather) {
      std::size_t j = i + 1;
      while (j < n && ops[j].kind != OpKind::matmul && ops[j].kind != OpKind::tp_enter && ops[j].kind != OpKind::tp_exit) ++j;
      if (j >= n || ops[j].kind != OpKind::matmul || ops[j].split != Split::column) continue;
      const Seconds gemm = chunked(ops[j], tp).forward;
      c.forward_comm.exposed = ring_exchange_exposed(collective(c.forward_comm), gemm, tp);
      t[j].forward = gemm;
      if (c.backward_comm.active() && c.backward_comm.kind == Collective::reduce_scatter) {
        // Backward, both bulk on SM kernels: the input, kept sharded, gathered again for the
        // weight gradient beside the input-gradient GEMM (TE's qkv_dgrad / fc1_dgrad
        // BulkOverlapCfg), then the input gradient's reduce-scatter beside the weight gradient
        // (qkv_wgrad / fc1_wgrad).
        const Seconds dgrad = t[j].backward - t[j].weight_grad;
        c.backward_comm.exposed = overlap_exposed(dgrad, collective(c.forward_comm), interference) +
                                  overlap_exposed(t[j].weight_grad, collective(c.backward_comm), interference);
      }
    } else if (ops[i].kind == OpKind::tp_exit && c.forward_comm.active() &&
               c.forward_comm.kind == Collective::reduce_scatter) {
      std::size_t j = i;
      while (j-- > 0 && ops[j].kind != OpKind::matmul && ops[j].kind != OpKind::tp_enter && ops[j].kind != OpKind::tp_exit) {
      }
      if (j >= n || ops[j].kind != OpKind::matmul || ops[j].split != Split::row) continue;
      const OpTiming pieces = chunked(ops[j], tp);  // t GEMMs of 1/t of the rows
      if (settings.reduce_scatter_ring) {
        c.forward_comm.exposed = ring_exchange_exposed(collective(c.forward_comm), pieces.forward, tp);
        t[j].forward = pieces.forward;
      } else {
        const Seconds gemm = chunked(ops[j], settings.splits).forward;
        const PipelinedReduceScatter p =
            pipelined_reduce_scatter(collective(c.forward_comm), gemm, settings.splits, settings.rs_sms, settings.sms);
        c.forward_comm.exposed = p.exposed;
        t[j].forward = gemm + p.gemm_extra;
      }
      if (c.backward_comm.active() && c.backward_comm.kind == Collective::all_gather) {
        const Seconds dgrad = pieces.backward - pieces.weight_grad;
        c.backward_comm.exposed = ring_exchange_exposed(collective(c.backward_comm), dgrad, tp);
        t[j].backward = dgrad + t[j].weight_grad;
      }
    }
  }
}

}  // namespace clustersim

#include "strategies/search/lowering.hpp"

#include <algorithm>
#include <cmath>

#include "strategies/rules.hpp"

namespace clustersim::search {
namespace {
using i64 = std::int64_t;

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The word embedding and the output projection that shares its weight.
bool tied_embedding(const ModelGraph& g, const Op& op) {
  return g.tied_params > 0 && op.tied && op.kind == OpKind::embedding;
}
bool tied_projection(const ModelGraph& g, const Op& op, bool in_post) {
  return g.tied_params > 0 && op.tied && in_post && op.kind == OpKind::matmul && op.weight;
}
}  // namespace

int LoweredStage::leader(int v) const {
  while (nodes[std::size_t(v)].follows) v = nodes[std::size_t(v)].pred;
  return v;
}

LoweredStage lower_stage(const IntraOpProblem& p) {
  const ModelGraph& g = *p.graph;
  const double e = g.activation_bytes;
  const i64 T = g.micro_batch * g.tokens_per_sample;
  bool stage_embedding = false, stage_projection = false;
  for (int bi : p.blocks)
    for (const Op& op : g.blocks[std::size_t(bi)].ops) {
      stage_embedding = stage_embedding || tied_embedding(g, op);
      stage_projection = stage_projection || tied_projection(g, op, contains(g.post, bi));
    }

  LoweredStage st;
  std::vector<SNode>& nodes = st.nodes;
  int last = -1, last_matmul = -1;
  for (std::size_t pos = 0; pos < p.blocks.size(); ++pos) {
    const int bi = p.blocks[pos];
    const Block& b = g.blocks[std::size_t(bi)];
    const bool post = contains(g.post, bi);
    const bool is_layer = contains(g.layers, bi);
    st.blocks.push_back({&b, block_recompute(p.recompute, is_layer), -1});
    const int block_input = last;
    int last_residual = -1, last_weight_matmul = -1;
    const Op* entry = nullptr;  // a tp_enter not yet given to the weight matmul it precedes
    for (const Op& op : b.ops) {
      SNode n;
      n.op = &op;
      n.pred = last;
      n.block = int(pos);
      n.recomputed = op_recomputed(op, p.recompute, is_layer);
      n.core = op.core_attention;
      if (tied_projection(g, op, post)) {
        // Megatron keeps one copy when the first and last stage coincide.
        n.tied = stage_embedding;
        n.tied_sync = !stage_embedding;
      }
      if (tied_embedding(g, op)) n.tied_sync = !stage_projection;
      switch (op.kind) {
        case OpKind::tp_enter:  // Megatron's markers; the search places its own collectives
          entry = &op;
          continue;
        case OpKind::tp_exit:
          if (last_weight_matmul >= 0 && !nodes[std::size_t(last_weight_matmul)].exit)
            nodes[std::size_t(last_weight_matmul)].exit = &op;
          continue;
        case OpKind::matmul:
          if (op.weight) {
            n.kind = NodeKind::matmul;
            n.entry = entry;
            entry = nullptr;
            n.in = {op.batch > 1 ? op.batch : op.batch * op.m, op.k, double(op.batch) * op.m * op.k * e};
            n.out = {op.batch > 1 ? op.batch : op.batch * op.m, op.n, double(op.batch) * op.m * op.n * e};
          } else {
            n.kind = NodeKind::batched;  // attention scores/context: split samples and heads
            n.out = {g.micro_batch, p.heads, double(op.batch) * op.m * op.n * e, true};
            n.in = n.out;
          }
          break;
        case OpKind::attention:
          n.kind = NodeKind::batched;
          n.out = {g.micro_batch, p.heads, double(op.batch) * op.m * op.k * e, true};
          n.in = n.out;
          break;
        case OpKind::embedding:
          n.kind = NodeKind::embedding;
          n.out = {T, i64(std::llround(op.fwd_bytes / (2.0 * double(T) * e))), op.fwd_bytes / 2};
          break;
        case OpKind::all_to_all:
          n.kind = NodeKind::exchange;
          n.out = {std::max<i64>(1, p.experts), last >= 0 ? nodes[std::size_t(last)].out.cols_q : 1, op.comm_bytes};
          n.in = n.out;
          break;
        case OpKind::memory:
          if (op.role == OpRole::saved_marker) {
            const int target = last_matmul >= 0 ? last_matmul : last;
            if (target >= 0)
              nodes[std::size_t(target)].markers.push_back({&op, op.split == Split::column || op.split == Split::heads});
            continue;
          }
          n.kind = NodeKind::elementwise;
          if (op.role == OpRole::weight_cast && last_weight_matmul >= 0) {
            // Not on the activations' path: the next op's input is still `last`.
            n.follows = true;
            n.weight_cast = true;
            n.pred = last_weight_matmul;
            n.out = n.in = nodes[std::size_t(last_weight_matmul)].out;
            nodes.push_back(std::move(n));
            continue;
          }
          n.follows = last >= 0;
          if (last >= 0) {
            n.out = nodes[std::size_t(last)].out;
          } else {
            // First op of the stage: its input is the previous block's output, [T, H].
            const i64 cols = std::max<i64>(1, i64(std::llround(b.output_bytes / (double(T) * e))));
            n.out = {T, cols, b.output_bytes};
          }
          n.in = n.out;
          if (op.role == OpRole::residual) {
            n.skip = last_residual >= 0 ? last_residual : block_input;
            last_residual = int(nodes.size());
          }
          break;
      }
      if (n.kind == NodeKind::matmul) last_matmul = last_weight_matmul = int(nodes.size());
      last = int(nodes.size());
      st.blocks.back().last_node = last;
      nodes.push_back(std::move(n));
    }
  }
  return st;
}

Bytes memory_floor(const IntraOpProblem& p, std::int64_t devices) {
  const ModelGraph& g = *p.graph;
  const double d = double(std::max<i64>(1, devices));
  double params = 0, fp8_params = 0;
  Bytes kept = 0;
  bool embedding = false, projection = false;
  for (int bi : p.blocks) {
    const Block& b = g.blocks[std::size_t(bi)];
    Bytes saved = 0, core = 0;
    for (const Op& op : b.ops) {
      params += op.params;
      fp8_params += fp8_cast_params(op, p.rules.compute, p.rules.weight_gemm);
      saved += op.saved_bytes;
      if (op.core_attention) core += op.saved_bytes;
      embedding = embedding || tied_embedding(g, op);
      projection = projection || tied_projection(g, op, contains(g.post, bi));
    }
    const Recompute rc = block_recompute(p.recompute, contains(g.layers, bi));
    kept += kept_activations(rc, saved / d, core / d, b.output_bytes / d, 0).kept;
  }
  if (embedding && projection) params -= g.tied_params;  // held once
  const WeightMemory w = weight_memory(params / d, fp8_params / d, p.rules, 0, 1);
  const bool gradients_after_peak = !p.rules.persistent_grads && p.micro_batches == 1;
  return w.total() - (gradients_after_peak ? w.gradients : 0.0) + p.inflight * kept;
}

}  // namespace clustersim::search

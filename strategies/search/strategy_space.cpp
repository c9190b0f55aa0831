#include "strategies/search/strategy_space.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <functional>

#include "costmodel/kernels.hpp"
#include "strategies/op_timing.hpp"

namespace clustersim::search {
namespace {

using i64 = std::int64_t;
using Axes = std::array<Dim, 2>;

std::string spec_name(const Spec& s) {
  auto part = [&](Dim d) {
    std::string axes;
    for (int a = 0; a < 2; ++a)
      if (s.on[std::size_t(a)] == d) axes += char('0' + a);
    return axes.empty() ? std::string("R") : "S" + axes;
  };
  return part(Dim::rows) + part(Dim::cols);
}

i64 shards(const LogicalMesh& m, const Axes& on, Dim d) {
  i64 s = 1;
  for (int a = 0; a < 2; ++a)
    if (on[std::size_t(a)] == d) s *= m.axes[std::size_t(a)].size;
  return s;
}

Seconds coll(const ClusterModel& c, const LogicalMesh& m, int axis, Collective kind, double bytes) {
  const MeshAxis& ax = m.axes[std::size_t(axis)];
  if (ax.size <= 1 || bytes <= 0) return 0;
  return collective_time(c, kind, bytes, ax.group, ax.node_share);
}

Seconds reshard_one_way(const ClusterModel& c, const LogicalMesh& m, const Spec& from, const Spec& to, double bytes) {
  Seconds t = 0;
  double held = bytes / double(shards(m, from.on, Dim::rows) * shards(m, from.on, Dim::cols));
  for (int a = 0; a < 2; ++a) {
    const Dim f = from.on[std::size_t(a)], g = to.on[std::size_t(a)];
    if (f == g || f == Dim::none || m.axes[std::size_t(a)].size <= 1) continue;  // equal, or slicing only
    if (g == Dim::none) {
      held *= double(m.axes[std::size_t(a)].size);
      t += coll(c, m, a, Collective::all_gather, held);
    } else {
      t += coll(c, m, a, Collective::all_to_all, held);
    }
  }
  return t;
}

// Every assignment of the mesh axes (size > 1) to the given dims.
std::vector<Axes> assignments(const LogicalMesh& m, const std::vector<Dim>& dims) {
  std::vector<Axes> out;
  auto opts = [&](int a) {
    std::vector<Dim> o{Dim::none};
    if (m.axes[std::size_t(a)].size > 1) o.insert(o.end(), dims.begin(), dims.end());
    return o;
  };
  for (Dim d0 : opts(0))
    for (Dim d1 : opts(1)) out.push_back({d0, d1});
  return out;
}

std::string axis_kind(Dim d, bool matmul) {
  switch (d) {
    case Dim::none: return "R";
    case Dim::rows: return "batch";
    case Dim::cols: return matmul ? "column" : "feature";
    case Dim::contract: return matmul ? "row" : "vocab";
  }
  return "?";
}

std::string kind_of(const LogicalMesh& m, const Axes& on, bool matmul) {
  std::string k;
  for (int a = 0; a < 2; ++a) {
    if (m.axes[std::size_t(a)].size <= 1 || on[std::size_t(a)] == Dim::none) continue;
    if (!k.empty()) k += "+";
    k += axis_kind(on[std::size_t(a)], matmul) + "@" + std::to_string(a);
  }
  return k.empty() ? "replicated" : k;
}

// Ways to split `q` into `s` parts evenly.
bool divides(i64 q, i64 s) { return s <= 1 || (q > 0 && q % s == 0); }

class Enumerator {
 public:
  Enumerator(const IntraOpProblem& p, const LoweredStage& st) : p_(p), st_(st), c_(*p.cluster), m_(p.mesh), km_(p.cluster->gpu) {}

  NodeStrategies run(std::string* unshardable, bool share) {
    const std::size_t n_nodes = st_.nodes.size();
    out_.assign(n_nodes, nullptr);
    first_.assign(st_.blocks.size() + 1, int(n_nodes));
    for (std::size_t v = n_nodes; v-- > 0;) first_[std::size_t(st_.nodes[v].block)] = int(v);
    for (std::size_t b = st_.blocks.size(); b-- > 0;) first_[b] = std::min(first_[b], first_[b + 1]);
    for (std::size_t v = 0; v < n_nodes; ++v) {
      const SNode& n = st_.nodes[v];
      if (share) {
        if (const int u = repeat_of(int(v)); u >= 0) {
          out_[v] = out_[std::size_t(u)];
          continue;
        }
      }
      out_[v] = std::make_shared<std::vector<Strategy>>();
      switch (n.kind) {
        case NodeKind::matmul: enumerate_matmul(int(v)); break;
        case NodeKind::embedding: enumerate_embedding(int(v)); break;
        case NodeKind::batched:
        case NodeKind::exchange: enumerate_tensor(int(v)); break;
        case NodeKind::elementwise:
          if (n.follows) follow(int(v));
          else enumerate_tensor(int(v));
          break;
      }
      if (out_[v]->empty() && unshardable && unshardable->empty()) *unshardable = n.op->name;
    }
    NodeStrategies r;
    r.lists.assign(out_.begin(), out_.end());
    return r;
  }

 private:
  // The node one identical block before v whose strategies v's equal (see
  // NodeStrategies), or -1. Everything the enumeration of a node reads is compared.
  int repeat_of(int v) const {
    const SNode& n = st_.nodes[std::size_t(v)];
    const std::size_t pos = std::size_t(n.block);
    if (pos == 0 || p_.blocks[pos] != p_.blocks[pos - 1]) return -1;
    const int u = v - (first_[pos] - first_[pos - 1]);
    if (u < first_[pos - 1] || u >= first_[pos]) return -1;
    const SNode& m = st_.nodes[std::size_t(u)];
    auto same_tensor = [](const Tensor& a, const Tensor& b) {
      return a.rows_q == b.rows_q && a.cols_q == b.cols_q && a.bytes == b.bytes && a.cols_are_heads == b.cols_are_heads;
    };
    auto same_offset = [&](int a, int b) { return (a < 0 && b < 0) || (a >= 0 && b >= 0 && u - a == v - b); };
    if (m.op != n.op || m.kind != n.kind || m.follows != n.follows || !same_tensor(m.in, n.in) || !same_tensor(m.out, n.out) ||
        !same_offset(m.pred, n.pred) || !same_offset(m.skip, n.skip) || m.tied != n.tied || m.tied_sync != n.tied_sync ||
        m.recomputed != n.recomputed || m.core != n.core || m.entry != n.entry || m.exit != n.exit ||
        m.weight_cast != n.weight_cast || m.markers.size() != n.markers.size())
      return -1;
    for (std::size_t i = 0; i < n.markers.size(); ++i)
      if (m.markers[i].op != n.markers[i].op || m.markers[i].output != n.markers[i].output) return -1;
    const BlockInfo& bu = st_.blocks[std::size_t(m.block)];
    const BlockInfo& bv = st_.blocks[pos];
    if (bu.block != bv.block || bu.recompute != bv.recompute || (bu.last_node == u) != (bv.last_node == v)) return -1;
    if (n.follows && out_[std::size_t(st_.leader(u))] != out_[std::size_t(st_.leader(v))]) return -1;
    return u;
  }

  OpWork work(const Op& op, const OpShards& s) const { return op_work(op, s, km_, p_.rules.compute, p_.rules.weight_gemm); }

  // The data axes of a strategy: mesh axes (size > 1) where `on` splits rows while the
  // weight stays whole there (data parallelism). Expert-split ops pass {none, none}.
  i64 data_ways(const Axes& on) const { return shards(m_, on, Dim::rows); }

  // ZeRO levels to offer for a strategy whose weight update could be sharded over
  // `data_ways` devices. The full space offers 0, 2 and 3: ZeRO-1 has ZeRO-2's time
  // (the same reduce-scatter, all-gather and optimizer step) with more memory, so it is
  // dominated and left out. The Megatron space takes exactly the problem's level (the
  // manual baseline's ZeRO knob).
  std::vector<int> zero_levels(double params, i64 data_ways) const {
    if (params <= 0 || data_ways <= 1) return {0};
    if (p_.space == StrategySpace::megatron) return {p_.zero};
    return {0, 2, 3};
  }

  // A reduce-scatter (or, reversed, an all-gather) of `bytes` (the whole buffer) over
  // the data axes of `on`, one axis after the other: axis 1 (inside a host) on the whole
  // buffer, then axis 0 on the 1/d1 that is left; the all-gather runs the other way.
  Seconds over_data_axes(Collective kind, double bytes, const Axes& on) const {
    Seconds t = 0;
    if (kind == Collective::reduce_scatter) {
      for (int a : {1, 0})
        if (on[std::size_t(a)] == Dim::rows && m_.axes[std::size_t(a)].size > 1) {
          t += coll(c_, m_, a, kind, bytes);
          bytes /= double(m_.axes[std::size_t(a)].size);
        }
    } else {
      bytes /= double(data_ways(on));
      for (int a : {0, 1})
        if (on[std::size_t(a)] == Dim::rows && m_.axes[std::size_t(a)].size > 1) {
          bytes *= double(m_.axes[std::size_t(a)].size);
          t += coll(c_, m_, a, kind, bytes);
        }
    }
    return t;
  }

  // The weight update of `params` parameters held by one device, replicated over the
  // data axes of `on`, at ZeRO level `zero`: rules::gradient_sync says which collectives
  // move how many bytes (timed over the data axes: an all-reduce on each, or a
  // reduce-scatter / all-gather one axis after the other), rules::zero3_gather_exposed
  // what of ZeRO-3's per-pass gathers the op's compute does not hide, and
  // rules::optimizer_step_marginal its share of the optimizer step.
  // `fp8_params`: of them, those Transformer Engine casts (rules::fp8_weight_cast).
  void weight_update(StageCosts& cost, double params, double fp8_params, const Axes& on, int zero) const {
    if (params <= 0) return;
    const i64 d = data_ways(on);
    const GradientSync sync = gradient_sync(params, fp8_params, p_.rules, zero, d);
    if (sync.active()) {
      if (sync.reduce == Collective::all_reduce) {
        for (int a = 0; a < 2; ++a)
          if (on[std::size_t(a)] == Dim::rows) cost.dp_sync += coll(c_, m_, a, Collective::all_reduce, sync.reduce_bytes);
      } else {
        cost.dp_sync += over_data_axes(sync.reduce, sync.reduce_bytes, on);
      }
    }
    if (sync.gather_bytes > 0) cost.dp_sync += over_data_axes(Collective::all_gather, sync.gather_bytes, on);
    if (sync.gather_per_pass > 0)
      cost.zero3_gather += zero3_gather_exposed(over_data_axes(Collective::all_gather, sync.gather_per_pass, on),
                                                cost.forward, cost.backward + cost.recompute, c_.gpu.interference);
    cost.optimizer += autograd_grad_accumulation(km_, params, p_.micro_batches, p_.rules) +
                      optimizer_step_marginal(km_, updated_params(params, zero, d), p_.rules) +
                      fp8_weight_cast(km_, zero >= 3 ? fp8_params / double(d) : fp8_params, p_.rules);
  }

  // Names a ZeRO variant: " [zero-2 @ 0]" (the data axes after the @), kind "...+zero-2".
  void mark_zero(Strategy& s, const Axes& on, int zero) const {
    s.zero = zero;
    if (zero == 0) return;
    std::string axes;
    for (int a = 0; a < 2; ++a)
      if (on[std::size_t(a)] == Dim::rows && m_.axes[std::size_t(a)].size > 1) axes += char('0' + a);
    s.name += fmt::format(" [zero-{} @ {}]", zero, axes);
    if (s.kind != "follow") s.kind += fmt::format("+zero-{}", zero);
  }

  // Saved activations of the markers folded into node `n` under its split: rows over
  // `rs`, the input's columns over `in_cols`, the output's over `out_cols`.
  Bytes marker_saved(const SNode& n, i64 rs, i64 in_cols, i64 out_cols) const {
    Bytes saved = 0;
    for (const SavedMarker& mk : n.markers) {
      OpShards sh;
      sh.rows = rs;
      sh.cols = mk.output ? out_cols : in_cols;
      saved += work(*mk.op, sh).saved;
    }
    return saved;
  }

  // What every strategy of node v carries beyond its sharding, then one variant per ZeRO
  // level (`zero` >= 0: that level only, as a follower takes its leader's): the forward
  // again, with its forward collectives, when the op is recomputed; its kept
  // activations for its block's recompute mode; the weight update of `params`
  // replicated over the data axes of `sync`; a tied weight's all-reduce between stages.
  void finish(int v, Strategy s, Seconds forward_comm, Seconds forward_ep, double params, const Axes& sync, int zero = -1) {
    const SNode& n = st_.nodes[std::size_t(v)];
    s.flops = 3.0 * s.forward_flops + (n.recomputed ? s.forward_flops : 0.0);
    // The host's launches: the op's kernels and collectives; DTensor's module costs where
    // the op (a linear with its markers, or the loss) is split over a tensor-parallel axis.
    {
      const HostDispatch& h = c_.gpu.host;
      const bool matmul = n.kind == NodeKind::matmul;
      const i64 tp = matmul ? shards(m_, s.assign, Dim::cols) * shards(m_, s.assign, Dim::contract) : shards(m_, s.assign, Dim::cols);
      s.cost.launches = op_launches(*n.op, s.comm_forward, s.comm_backward, n.recomputed, p_.framework, h, tp);
      for (const Op* marker : {n.entry, n.exit})
        if (marker) s.cost.launches += op_launches(*marker, 0, 0, n.recomputed, p_.framework, h, tp);
    }
    if (n.recomputed) {
      s.cost.recompute = s.cost.forward;
      s.cost.comm += forward_comm;
      s.cost.ep_comm += forward_ep;
    }
    const BlockInfo& block = st_.blocks[std::size_t(n.block)];
    if (block.last_node == v)
      s.boundary = block.block->output_bytes / double(shards(m_, s.out.on, Dim::rows) * shards(m_, s.out.on, Dim::cols));
    s.kept = kept_activations(block.recompute, s.saved, n.core ? s.saved : 0.0, s.boundary, 0).kept;
    s.params = params;
    if (n.tied_sync && params > 0) {
      const i64 tp = std::max<i64>(1, i64(std::llround(p_.graph->tied_params / params)));
      const Bytes bytes = tied_embedding_sync_bytes(p_.graph->tied_params, tp, 2, p_.rules);
      // The first and last stage: on two nodes (one GPU of each, sharing its node's
      // NICs), or inside the only node.
      const bool one_node = c_.nodes <= 1;
      s.cost.dp_sync += collective_time(c_, Collective::all_reduce, bytes, Group{2, one_node ? 2 : 1},
                                        one_node ? 1.0 : 1.0 / double(c_.gpus_per_node));
    }
    const i64 d = data_ways(sync);
    std::vector<int> levels = zero_levels(params, d);
    if (zero >= 0) levels = {params > 0 && d > 1 ? zero : 0};
    const double fp8_params = n.op && fp8_cast_params(*n.op, p_.rules.compute, p_.rules.weight_gemm) > 0 ? params : 0.0;
    for (int z : levels) {
      Strategy x = s;
      weight_update(x.cost, params, fp8_params, sync, z);
      x.weights = weight_memory(params, fp8_params, p_.rules, z, d);
      mark_zero(x, sync, z);
      x.ilp_cost = x.cost.amortised(p_.micro_batches);
      out_[std::size_t(v)]->push_back(std::move(x));
    }
  }

  bool megatron_allows(const Op& op, const Axes& on, bool matmul) const {
    if (p_.space != StrategySpace::megatron) return true;
    if (m_.axes[0].size > 1 && on[0] != Dim::rows) return false;
    if (m_.axes[1].size <= 1) return true;
    Dim want = Dim::none;
    switch (op.split) {
      case Split::column: want = matmul ? Dim::cols : Dim::contract; break;  // embedding: vocab-parallel
      case Split::row: want = Dim::contract; break;
      case Split::heads: want = Dim::cols; break;
      case Split::none:
      case Split::seq: want = Dim::none; break;
    }
    return on[1] == want;
  }

  void enumerate_matmul(int v) {
    const SNode& n = st_.nodes[std::size_t(v)];
    const Op& op = *n.op;
    const double e = p_.graph->activation_bytes;
    for (const auto& on : assignments(m_, {Dim::rows, Dim::cols, Dim::contract})) {
      const i64 rs = shards(m_, on, Dim::rows), ns = shards(m_, on, Dim::cols), ks = shards(m_, on, Dim::contract);
      if (!divides(n.out.rows_q, rs) || !divides(op.n, ns) || !divides(op.k, ks)) continue;
      if (!megatron_allows(op, on, true)) continue;
      const bool expert_split = op.batch > 1;  // rows split the experts: weights split too
      OpShards sh;
      (expert_split ? sh.batch : sh.rows) = rs;
      sh.cols = ns;
      sh.contract = ks;
      const OpWork w = work(op, sh);
      Strategy s;
      s.assign = on;
      for (int a = 0; a < 2; ++a) {
        const Dim d = on[std::size_t(a)];
        s.out.on[std::size_t(a)] = d == Dim::rows ? Dim::rows : (d == Dim::cols ? Dim::cols : Dim::none);
        s.in.on[std::size_t(a)] = d == Dim::rows ? Dim::rows : (d == Dim::contract ? Dim::cols : Dim::none);
      }
      s.cost.forward = w.forward;
      s.cost.backward = w.backward;
      s.forward_flops = w.forward_flops;
      const i64 b = expert_split ? op.batch / rs : op.batch, m = expert_split ? op.m : op.m / rs;
      // The partial output and the input's gradient, each all-reduced where it is split,
      // in the type of the graph's marker where it has one: a column-parallel linear's
      // input is the norm's output, fp32 under autocast, which casts it inside the matmul.
      const double whole_in = double(op.batch) * op.m * op.k * e, whole_out = double(op.batch) * op.m * op.n * e;
      const double in_type = n.entry && whole_in > 0 ? n.entry->comm_bytes / whole_in : 1.0;
      const double out_type = n.exit && whole_out > 0 ? n.exit->comm_bytes / whole_out : 1.0;
      const double out_bytes = double(b) * m * (op.n / ns) * e * out_type, in_bytes = double(b) * m * (op.k / ks) * e * in_type;
      Seconds forward_comm = 0;
      std::string comm;
      for (int a = 0; a < 2; ++a) {
        if (on[std::size_t(a)] == Dim::contract) {
          forward_comm += coll(c_, m_, a, Collective::all_reduce, out_bytes);
          ++s.comm_forward;
          comm += fmt::format(" (all-reduce @ {})", a);
        }
        if (on[std::size_t(a)] == Dim::cols) {
          s.cost.comm += coll(c_, m_, a, Collective::all_reduce, in_bytes);
          ++s.comm_backward;
        }
      }
      s.cost.comm += forward_comm;
      s.saved = w.saved + marker_saved(n, rs, ks, ns);
      s.block_params = w.params;
      Spec wspec;  // B[k, n] as rows = k, cols = n
      for (int a = 0; a < 2; ++a)
        wspec.on[std::size_t(a)] = on[std::size_t(a)] == Dim::contract ? Dim::rows : (on[std::size_t(a)] == Dim::cols ? Dim::cols : Dim::none);
      s.name = spec_name(s.out) + " = " + spec_name(s.in) + " x " + spec_name(wspec) + comm;
      s.kind = kind_of(m_, on, true);
      // The data axes: the weight is replicated where rows split (not where experts do).
      finish(v, std::move(s), forward_comm, 0, n.tied ? 0.0 : w.params, expert_split ? Axes{Dim::none, Dim::none} : on);
    }
  }

  void enumerate_embedding(int v) {
    const SNode& n = st_.nodes[std::size_t(v)];
    const Op& op = *n.op;
    const i64 H = std::max<i64>(1, n.out.cols_q);
    const i64 V = std::max<i64>(1, i64(std::llround(op.params / double(H))));
    for (const auto& on : assignments(m_, {Dim::rows, Dim::cols, Dim::contract})) {
      const i64 rs = shards(m_, on, Dim::rows), cs = shards(m_, on, Dim::cols), vs = shards(m_, on, Dim::contract);
      if (!divides(n.out.rows_q, rs) || !divides(H, cs) || !divides(V, vs)) continue;
      if (!megatron_allows(op, on, false)) continue;
      OpShards sh;
      sh.rows = rs;
      sh.cols = cs;
      sh.contract = vs;
      const OpWork w = work(op, sh);
      Strategy s;
      s.assign = on;
      for (int a = 0; a < 2; ++a)
        s.out.on[std::size_t(a)] = on[std::size_t(a)] == Dim::contract ? Dim::none : on[std::size_t(a)];
      s.in = s.out;
      s.cost.forward = w.forward;
      s.cost.backward = w.backward;
      s.forward_flops = w.forward_flops;
      Seconds forward_comm = 0;
      std::string comm;
      for (int a = 0; a < 2; ++a)
        if (on[std::size_t(a)] == Dim::contract) {
          forward_comm += coll(c_, m_, a, Collective::all_reduce, n.out.bytes / double(rs * cs));
          ++s.comm_forward;
          comm += fmt::format(" (all-reduce @ {})", a);
        }
      s.cost.comm = forward_comm;
      s.saved = w.saved + marker_saved(n, rs, cs, cs);
      s.block_params = w.params;
      Spec table;
      for (int a = 0; a < 2; ++a)
        table.on[std::size_t(a)] = on[std::size_t(a)] == Dim::contract ? Dim::rows : (on[std::size_t(a)] == Dim::cols ? Dim::cols : Dim::none);
      s.name = spec_name(s.out) + " = lookup " + spec_name(table) + comm;
      s.kind = kind_of(m_, on, false);
      finish(v, std::move(s), forward_comm, 0, w.params, on);
    }
  }

  // Ops whose strategies are the specs of their output tensor: attention (rows = samples,
  // cols = heads), the expert exchange, and elementwise ops that start a stage.
  void enumerate_tensor(int v) {
    const SNode& n = st_.nodes[std::size_t(v)];
    const Op& op = *n.op;
    for (const auto& on : assignments(m_, {Dim::rows, Dim::cols})) {
      const i64 rs = shards(m_, on, Dim::rows), cs = shards(m_, on, Dim::cols);
      if (!divides(n.out.rows_q, rs) || !divides(n.out.cols_q, cs)) continue;
      if (!megatron_allows(op, on, false)) continue;
      Strategy s;
      s.assign = on;
      s.out.on = on;
      s.in = s.out;
      if (n.kind == NodeKind::elementwise) {
        for (int z : zero_levels(op.params / double(cs), data_ways(on))) elementwise(v, on, s, z);
        continue;
      }
      Seconds forward_ep = 0;
      if (n.kind == NodeKind::batched) {
        // Samples and heads both split the batch of samples x heads.
        OpShards sh;
        sh.batch = rs * cs;
        const OpWork w = work(op, sh);
        s.cost.forward = w.forward;
        s.cost.backward = w.backward;
        s.forward_flops = w.forward_flops;
        s.saved = w.saved + marker_saved(n, rs, cs, cs);
        s.name = spec_name(s.out) + " = attention(" + spec_name(s.in) + ")";
      } else {
        // Rows split over an axis means experts live on different devices: tokens move
        // there and back (all-to-all forward, and its gradient backward).
        std::string comm;
        for (int a = 0; a < 2; ++a)
          if (on[std::size_t(a)] == Dim::rows && m_.axes[std::size_t(a)].size > 1) {
            forward_ep += coll(c_, m_, a, Collective::all_to_all,
                               op.comm_bytes / double(rs * cs) *
                                   expert_all_to_all_share(p_.top_k, p_.max_nodes_per_token, m_.axes[std::size_t(a)].group.nodes()));
            ++s.comm_forward;
            ++s.comm_backward;
            comm += fmt::format(" (all-to-all @ {})", a);
          }
        s.cost.ep_comm = 2 * forward_ep;
        s.name = spec_name(s.out) + " = exchange(" + spec_name(s.in) + ")" + comm;
      }
      s.kind = kind_of(m_, on, false);
      finish(v, std::move(s), 0, forward_ep, 0, on);
    }
  }

  // A memory-bound op on `on`; its parameters (norm weights) are updated `zero`-style
  // over the data axes (a follower takes its leader's level).
  void elementwise(int v, const Axes& on, Strategy s, int zero) {
    const SNode& n = st_.nodes[std::size_t(v)];
    const Op& op = *n.op;
    const i64 rs = shards(m_, on, Dim::rows), cs = shards(m_, on, Dim::cols);
    OpShards sh;
    sh.rows = rs;
    sh.cols = cs;
    const OpWork w = work(op, sh);
    s.cost.forward = w.forward;
    s.cost.backward = w.backward;
    s.forward_flops = w.forward_flops;
    Seconds forward_comm = 0;
    std::string comm;
    if (op.role == OpRole::row_reduction && cs > 1 && !n.out.cols_are_heads) {
      // Statistics per row (mean/variance, max/sum) are all-reduced over the feature split.
      const double stats = double(p_.graph->micro_batch * p_.graph->tokens_per_sample) / double(rs) * 8;
      for (int a = 0; a < 2; ++a)
        if (on[std::size_t(a)] == Dim::cols) {
          forward_comm += coll(c_, m_, a, Collective::all_reduce, stats);
          ++s.comm_forward;
          ++s.comm_backward;
          comm += fmt::format(" (all-reduce @ {})", a);
        }
    }
    s.cost.comm = 2 * forward_comm;
    s.saved = w.saved + marker_saved(n, rs, cs, cs);
    s.block_params = w.params;
    s.name = spec_name(s.out) + comm;
    if (s.kind != "follow") s.kind = kind_of(m_, on, false);
    finish(v, std::move(s), forward_comm, 0, w.params, on, zero);
  }

  void follow(int v) {
    const std::vector<Strategy>& lead = *out_[std::size_t(st_.leader(v))];
    const bool weights = st_.nodes[std::size_t(v)].weight_cast;
    for (const auto& l : lead) {
      Strategy s;
      s.out = l.out;
      s.in = l.out;
      s.assign = l.out.on;
      s.kind = "follow";
      // Autocast's weight casts: split where the leader's weight is (its n or k), not
      // where its activations are.
      Axes on = l.out.on;
      if (weights)
        for (int a = 0; a < 2; ++a)
          on[std::size_t(a)] = l.assign[std::size_t(a)] == Dim::cols || l.assign[std::size_t(a)] == Dim::contract ? Dim::cols : Dim::none;
      elementwise(v, on, std::move(s), l.zero);
    }
  }

  const IntraOpProblem& p_;
  const LoweredStage& st_;
  const ClusterModel& c_;
  const LogicalMesh& m_;
  KernelModel km_;
  std::vector<std::shared_ptr<std::vector<Strategy>>> out_;
  std::vector<int> first_;  // per block position: its first node (one past the end at the back)
};

}  // namespace

Seconds reshard(const ClusterModel& c, const LogicalMesh& m, const Spec& from, const Spec& to, double bytes) {
  if (from == to) return 0;
  return reshard_one_way(c, m, from, to, bytes) + reshard_one_way(c, m, to, from, bytes);
}

NodeStrategies enumerate_strategies(const IntraOpProblem& p, const LoweredStage& st, std::string* unshardable, bool share) {
  return Enumerator(p, st).run(unshardable, share);
}

std::size_t NodeStrategies::distinct() const {
  std::vector<const std::vector<Strategy>*> seen;
  for (const auto& l : lists) seen.push_back(l.get());
  std::sort(seen.begin(), seen.end(), std::less<>());
  return std::size_t(std::unique(seen.begin(), seen.end()) - seen.begin());
}

}  // namespace clustersim::search

// Strategy enumeration and costs for the intra-op pass.
//
// Tensors are viewed as 2-D [rows, cols]: rows = tokens (or images x pixels, or experts x
// capacity), cols = features. A sharding spec says, for each mesh axis, whether it
// splits rows, cols or nothing ("S0R" = rows on axis 0, cols replicated; "S01R" = rows
// on both axes; "RS1"; "S0S1"). A matmul C[rows,n] = A[rows,k] B[k,n] assigns each mesh
// axis to rows, n, k or nothing: k on an axis leaves partial sums and costs an
// all-reduce of C on that axis (Alpa's "SR = SS x SR"); n on an axis costs an all-reduce
// of dA in backward; rows on an axis replicates the weight there, whose gradient is
// all-reduced once per iteration (data parallelism), or, in the weight-update-sharded
// variants (ZeRO-1/2/3), reduce-scattered, with the updated weights all-gathered (every
// iteration for ZeRO-1/2, every micro-batch before forward and backward for ZeRO-3).
// Memory-bound ops follow their producer (Alpa's follow nodes) and take its ZeRO level;
// residual adds also get an edge from their skip input.
//
// Simplifications (documented in strategies/search/README.md): collectives on both axes
// are costed as one per axis in sequence; resharding is the all-gathers / all-to-alls
// per axis that turn one spec into the other, forward plus the gradient backward; the
// peak memory step holds every op's weights and `inflight` micro-batches of its saved
// activations (end of the forward of 1F1B's first micro-batches); ZeRO-3's transient
// buffer of gathered weights is not counted (nor are other transient buffers).
#include "strategies/search/intra_op.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "costmodel/kernels.hpp"
#include "scenarios/diagnostics.hpp"

namespace clustersim::search {
namespace {

using i64 = std::int64_t;

enum class Dim : std::uint8_t { none, rows, cols, contract };

struct Spec {  // per mesh axis: none, rows or cols
  std::array<Dim, 2> on{Dim::none, Dim::none};
  friend bool operator==(const Spec&, const Spec&) = default;
};

std::string spec_name(const Spec& s, bool contract_as_cols = false) {
  auto part = [&](Dim d) {
    std::string axes;
    for (int a = 0; a < 2; ++a)
      if (s.on[std::size_t(a)] == d || (contract_as_cols && d == Dim::cols && s.on[std::size_t(a)] == Dim::contract))
        axes += char('0' + a);
    return axes.empty() ? std::string("R") : "S" + axes;
  };
  return part(Dim::rows) + part(Dim::cols);
}

struct Tensor {
  i64 rows_q = 1, cols_q = 1;  // the counts a split must divide (samples, heads, features...)
  double bytes = 0;
};

enum class NodeKind { matmul, batched, elementwise, embedding, exchange };

struct SNode {
  const Op* op = nullptr;
  NodeKind kind = NodeKind::elementwise;
  int pred = -1, skip = -1;
  bool follows = false;  // follows pred
  Tensor in, out;
  double saved_input = 0;  // saved copies of this matmul's input (graph markers)
  // The output projection whose weight is the word embedding's (tied) in a stage that
  // also holds the embedding: the embedding's strategy holds and updates the weight.
  bool tied = false;
};

struct Strategy {
  Spec out, in;          // output spec; spec required of the (main) input
  std::array<Dim, 2> assign{Dim::none, Dim::none};  // for matmuls / embeddings: rows, cols (= n), contract (= k / vocab)
  double cost = 0;
  double weight_mem = 0, act_mem = 0;
  int zero = 0;  // weight-update sharding over the data axes (ZeRO level), 0: plain
  std::string name, kind;
};

i64 shards(const LogicalMesh& m, const std::array<Dim, 2>& on, Dim d) {
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

// Seconds to turn a tensor held as `from` into `to` (forward) plus its gradient back.
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

Seconds reshard(const ClusterModel& c, const LogicalMesh& m, const Spec& from, const Spec& to, double bytes) {
  if (from == to) return 0;
  return reshard_one_way(c, m, from, to, bytes) + reshard_one_way(c, m, to, from, bytes);
}


// Every assignment of the mesh axes (size > 1) to the given dims.
std::vector<std::array<Dim, 2>> assignments(const LogicalMesh& m, const std::vector<Dim>& dims) {
  std::vector<std::array<Dim, 2>> out;
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

std::string kind_of(const LogicalMesh& m, const std::array<Dim, 2>& on, bool matmul) {
  std::string k;
  for (int a = 0; a < 2; ++a) {
    if (m.axes[std::size_t(a)].size <= 1 || on[std::size_t(a)] == Dim::none) continue;
    if (!k.empty()) k += "+";
    k += axis_kind(on[std::size_t(a)], matmul) + "@" + std::to_string(a);
  }
  return k.empty() ? "replicated" : k;
}

class Builder {
 public:
  explicit Builder(const IntraOpProblem& p) : p_(p), c_(*p.cluster), m_(p.mesh), km_(p.cluster->gpu) {
    if (p.zero < 0 || p.zero > 3) throw InputError("<search>", "/zero", fmt::format("expected a ZeRO level 0-3, got {}", p.zero));
  }

  void lower() {
    const auto& g = *p_.graph;
    const double e = g.activation_bytes;
    const i64 T = g.micro_batch * g.tokens_per_sample;
    int last = -1, last_matmul = -1;
    bool has_embedding = false;
    for (int bi : p_.blocks) {
      const Block& b = g.blocks[std::size_t(bi)];
      const bool post = std::find(g.post.begin(), g.post.end(), bi) != g.post.end();
      const int block_input = last;
      int last_residual = -1;
      for (const Op& op : b.ops) {
        SNode n;
        n.op = &op;
        n.pred = last;
        has_embedding = has_embedding || op.kind == OpKind::embedding;
        // Tied embeddings (Megatron keeps one copy when the first and last stage coincide).
        n.tied = post && has_embedding && g.tied_params > 0 && op.kind == OpKind::matmul && op.weight &&
                 op.params == g.tied_params;
        switch (op.kind) {
          case OpKind::tp_enter:
          case OpKind::tp_exit: continue;  // Megatron's markers; the search places its own collectives
          case OpKind::matmul:
            if (op.weight) {
              n.kind = NodeKind::matmul;
              n.in = {op.batch > 1 ? op.batch : op.batch * op.m, op.k, double(op.batch) * op.m * op.k * e};
              n.out = {op.batch > 1 ? op.batch : op.batch * op.m, op.n, double(op.batch) * op.m * op.n * e};
            } else {
              n.kind = NodeKind::batched;  // attention scores/context: split samples and heads
              n.out = {g.micro_batch, p_.heads, double(op.batch) * op.m * op.n * e};
              n.in = n.out;
            }
            break;
          case OpKind::attention:
            n.kind = NodeKind::batched;
            n.out = {g.micro_batch, p_.heads, double(op.batch) * op.m * op.k * e};
            n.in = n.out;
            break;
          case OpKind::embedding:
            n.kind = NodeKind::embedding;
            n.out = {T, i64(std::llround(op.fwd_bytes / (2.0 * double(T) * e))), op.fwd_bytes / 2};
            break;
          case OpKind::all_to_all:
            n.kind = NodeKind::exchange;
            n.out = {std::max<i64>(1, p_.experts), last >= 0 ? nodes_[std::size_t(last)].out.cols_q : 1, op.comm_bytes};
            n.in = n.out;
            break;
          case OpKind::memory:
            if (op.role == OpRole::saved_marker) {
              // Saved activations: the input of the preceding matmul.
              const int target = last_matmul >= 0 ? last_matmul : last;
              if (target >= 0) nodes_[std::size_t(target)].saved_input += op.saved_bytes;
              continue;
            }
            n.kind = NodeKind::elementwise;
            n.follows = last >= 0;
            if (last >= 0) {
              n.out = nodes_[std::size_t(last)].out;
            } else {
              // First op of the stage: its input is the previous block's output, [T, H].
              const i64 cols = std::max<i64>(1, i64(std::llround(b.output_bytes / (double(T) * e))));
              n.out = {T, cols, b.output_bytes};
            }
            n.in = n.out;
            if (op.role == OpRole::residual) {
              n.skip = last_residual >= 0 ? last_residual : block_input;
              last_residual = int(nodes_.size());
            }
            break;
        }
        if (n.kind == NodeKind::matmul) last_matmul = int(nodes_.size());
        last = int(nodes_.size());
        nodes_.push_back(n);
      }
    }
  }

  void enumerate() {
    strategies_.resize(nodes_.size());
    for (std::size_t v = 0; v < nodes_.size(); ++v) {
      const SNode& n = nodes_[v];
      switch (n.kind) {
        case NodeKind::matmul: enumerate_matmul(n, strategies_[v]); break;
        case NodeKind::embedding: enumerate_embedding(n, strategies_[v]); break;
        case NodeKind::batched:
        case NodeKind::exchange: enumerate_tensor(n, strategies_[v]); break;
        case NodeKind::elementwise:
          if (n.follows) follow(n, strategies_[std::size_t(leader(int(v)))], strategies_[v]);
          else enumerate_tensor(n, strategies_[v]);
          break;
      }
      if (strategies_[v].empty() && unshardable_.empty()) unshardable_ = n.op->name;
    }
  }

  IlpRequest request(std::vector<int>* leaders_out = nullptr) const {
    IlpRequest r;
    std::vector<NodeIdx> live;
    for (std::size_t v = 0; v < nodes_.size(); ++v) {
      IlpNode node;
      for (const auto& s : strategies_[v]) {
        node.cost.push_back(s.cost);
        node.memory.push_back(s.weight_mem + p_.inflight * s.act_mem);
      }
      if (nodes_[v].follows) node.follows = nodes_[v].pred;
      r.nodes.push_back(std::move(node));
      live.push_back(NodeIdx{int(v)});
    }
    for (std::size_t v = 0; v < nodes_.size(); ++v) {
      const SNode& n = nodes_[v];
      if (n.pred >= 0 && !n.follows) add_edge(r, n.pred, int(v), /*to_input=*/true);
      if (n.skip >= 0) add_edge(r, n.skip, int(v), /*to_input=*/false);
    }
    r.liveness = {live};
    r.memory_budget = p_.memory_budget;
    if (leaders_out) leaders_out->clear();
    return r;
  }

  const std::vector<SNode>& nodes() const { return nodes_; }
  // The first op with no strategy that divides evenly on this mesh ("" when none).
  const std::string& unshardable() const { return unshardable_; }
  const std::vector<std::vector<Strategy>>& strategies() const { return strategies_; }

 private:
  int leader(int v) const {
    while (nodes_[std::size_t(v)].follows) v = nodes_[std::size_t(v)].pred;
    return v;
  }

  void add_edge(IlpRequest& r, int src, int dst, bool to_input) const {
    IlpEdge e{NodeIdx{src}, NodeIdx{dst}, {}};
    const double bytes = nodes_[std::size_t(src)].out.bytes;
    bool any = false;
    // Many strategies share specs (ZeRO variants, for one): cost each pair of specs once.
    auto code = [](const Spec& x) { return std::size_t(x.on[0]) * 4 + std::size_t(x.on[1]); };
    std::array<double, 256> memo;
    memo.fill(-1);
    e.cost.reserve(strategies_[std::size_t(src)].size() * strategies_[std::size_t(dst)].size());
    for (const auto& a : strategies_[std::size_t(src)])
      for (const auto& b : strategies_[std::size_t(dst)]) {
        const Spec& to = to_input ? b.in : b.out;
        double& t = memo[code(a.out) * 16 + code(to)];
        if (t < 0) t = reshard(c_, m_, a.out, to, bytes);
        any = any || t > 0;
        e.cost.push_back(t);
      }
    if (any) r.edges.push_back(std::move(e));
  }

  // Ways to split `n` into `s` parts evenly.
  static bool divides(i64 q, i64 s) { return s <= 1 || (q > 0 && q % s == 0); }

  // The data axes of a strategy: mesh axes (size > 1) where `on` splits rows while the
  // weight stays whole there (data parallelism). Expert-split ops pass {none, none}.
  i64 data_ways(const std::array<Dim, 2>& on) const { return shards(m_, on, Dim::rows); }

  // ZeRO levels to offer for a strategy whose weight update could be sharded over
  // `data_ways` devices. The full space offers 0, 2 and 3: ZeRO-1 has ZeRO-2's time
  // (the same reduce-scatter, all-gather and optimizer step) with more memory in this
  // model, so it is dominated and left out. The Megatron space takes exactly the
  // problem's level (the manual baseline's ZeRO knob).
  std::vector<int> zero_levels(double params, i64 data_ways) const {
    if (params <= 0 || data_ways <= 1) return {0};
    if (p_.space == StrategySpace::megatron) return {p_.zero};
    return {0, 2, 3};
  }

  // Bytes per device of `params` parameters (held by one device before ZeRO) whose
  // update is sharded `zero`-style over `data_ways` devices: ZeRO-1 divides master
  // weights and optimizer states, ZeRO-2 also gradients, ZeRO-3 also the weights
  // (strategies/estimator.cpp's memory model). The autocast copy is made per device.
  double weight_memory(double params, i64 data_ways, int zero) const {
    const auto& r = p_.rules;
    const double d = zero > 0 ? double(std::max<i64>(1, data_ways)) : 1.0;
    return params * (r.weight_bytes / (zero >= 3 ? d : 1.0) + r.grad_bytes / (zero >= 2 ? d : 1.0) +
                     (r.master_bytes + r.optimizer_state_bytes) / (zero >= 1 ? d : 1.0) + r.autocast_copy_bytes);
  }

  // A reduce-scatter (or, reversed, an all-gather) of `bytes` (the whole buffer) over
  // the data axes of `on`, one axis after the other: axis 1 (inside a host) on the whole
  // buffer, then axis 0 on the 1/d1 that is left; the all-gather runs the other way.
  Seconds over_data_axes(Collective kind, double bytes, const std::array<Dim, 2>& on) const {
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

  // Seconds per micro-batch of the weight update of `params` parameters held by one
  // device, replicated over the axes where `on` is rows. Per iteration (amortised over
  // the micro-batches): plain, the gradient all-reduce on each data axis and the
  // optimizer step over every parameter; ZeRO-1/2, a reduce-scatter of the gradients
  // and an all-gather of the updated weights over the data axes and the step over
  // params / d; ZeRO-3, the reduce-scatter and the step only. ZeRO-3 gathers the
  // weights before forward and again before backward of every micro-batch, prefetched
  // behind the op's compute as the estimator does: max(0, gather - forward) +
  // max(0, gather - backward).
  Seconds weight_update(double params, const std::array<Dim, 2>& on, int zero = 0, Seconds forward = 0,
                        Seconds backward = 0) const {
    if (params <= 0) return 0;
    const auto& r = p_.rules;
    const i64 d = data_ways(on);
    if (zero == 0 || d <= 1) {
      Seconds t = km_.memory(params * r.optimizer_step_bytes(), 1);
      for (int a = 0; a < 2; ++a)
        if (on[std::size_t(a)] == Dim::rows) t += coll(c_, m_, a, Collective::all_reduce, params * r.grad_comm_bytes);
      return t / double(p_.micro_batches);
    }
    Seconds per_iteration = km_.memory(params / double(d) * r.optimizer_step_bytes(), 1) +
                            over_data_axes(Collective::reduce_scatter, params * r.grad_comm_bytes, on);
    Seconds per_micro_batch = 0;
    const Seconds gather = over_data_axes(Collective::all_gather, params * r.weight_bytes, on);
    if (zero < 3) per_iteration += gather;
    else per_micro_batch = std::max(0.0, gather - forward) + std::max(0.0, gather - backward);
    return per_iteration / double(p_.micro_batches) + per_micro_batch;
  }

  // Names a ZeRO variant: " [zero-2 @ 0]" (the data axes after the @), kind "...+zero-2".
  void mark_zero(Strategy& s, const std::array<Dim, 2>& on, int zero) const {
    s.zero = zero;
    if (zero == 0) return;
    std::string axes;
    for (int a = 0; a < 2; ++a)
      if (on[std::size_t(a)] == Dim::rows && m_.axes[std::size_t(a)].size > 1) axes += char('0' + a);
    s.name += fmt::format(" [zero-{} @ {}]", zero, axes);
    if (s.kind != "follow") s.kind += fmt::format("+zero-{}", zero);
  }

  // One strategy per ZeRO level offered for `params` parameters replicated over the data
  // axes of `sync`: s plus that level's weight update cost and weight memory.
  void push_weight_update_variants(const Strategy& s, double params, const std::array<Dim, 2>& sync, Seconds forward,
                                   Seconds backward, std::vector<Strategy>& out) const {
    for (int z : zero_levels(params, data_ways(sync))) {
      Strategy v = s;
      v.cost += weight_update(params, sync, z, forward, backward);
      v.weight_mem = weight_memory(params, data_ways(sync), z);
      mark_zero(v, sync, z);
      out.push_back(std::move(v));
    }
  }

  bool megatron_allows(const Op& op, const std::array<Dim, 2>& on, bool matmul) const {
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

  void enumerate_matmul(const SNode& n, std::vector<Strategy>& out) const {
    const Op& op = *n.op;
    const double e = p_.graph->activation_bytes;
    for (const auto& on : assignments(m_, {Dim::rows, Dim::cols, Dim::contract})) {
      const i64 rs = shards(m_, on, Dim::rows), ns = shards(m_, on, Dim::cols), ks = shards(m_, on, Dim::contract);
      if (!divides(n.out.rows_q, rs) || !divides(op.n, ns) || !divides(op.k, ks)) continue;
      if (!megatron_allows(op, on, true)) continue;
      i64 b = op.batch, m = op.m;
      const bool expert_split = op.batch > 1;  // rows split the experts: weights split too
      if (expert_split) b /= rs;
      else m /= rs;
      const i64 nn = op.n / ns, kk = op.k / ks;
      Strategy s;
      s.assign = on;
      for (int a = 0; a < 2; ++a) {
        s.out.on[std::size_t(a)] = on[std::size_t(a)] == Dim::rows ? Dim::rows : (on[std::size_t(a)] == Dim::cols ? Dim::cols : Dim::none);
        s.in.on[std::size_t(a)] = on[std::size_t(a)] == Dim::rows ? Dim::rows : (on[std::size_t(a)] == Dim::contract ? Dim::cols : Dim::none);
      }
      const DType dt = p_.rules.compute;
      const Seconds forward = km_.gemm(b, m, nn, kk, dt), backward = km_.gemm(b, m, kk, nn, dt) + km_.gemm(b, kk, nn, m, dt);
      s.cost = forward + backward;
      std::string comm;
      const double out_bytes = double(b) * m * nn * e, in_bytes = double(b) * m * kk * e;
      for (int a = 0; a < 2; ++a) {
        if (on[std::size_t(a)] == Dim::contract) {
          s.cost += coll(c_, m_, a, Collective::all_reduce, out_bytes);
          comm += fmt::format(" (all-reduce @ {})", a);
        }
        if (on[std::size_t(a)] == Dim::cols) s.cost += coll(c_, m_, a, Collective::all_reduce, in_bytes);
      }
      const double wshard = double(ns * ks * (expert_split ? rs : 1));
      const double params = (n.tied ? 0.0 : op.params) / wshard;
      std::array<Dim, 2> sync = on;  // the data axes: the weight is replicated where rows split
      if (expert_split) sync = {Dim::none, Dim::none};
      s.act_mem = (op.saved_bytes + n.saved_input) / double(rs * ks);
      Spec wspec;  // B[k, n] as rows = k, cols = n
      for (int a = 0; a < 2; ++a)
        wspec.on[std::size_t(a)] = on[std::size_t(a)] == Dim::contract ? Dim::rows : (on[std::size_t(a)] == Dim::cols ? Dim::cols : Dim::none);
      s.name = spec_name(s.out) + " = " + spec_name(s.in) + " x " + spec_name(wspec) + comm;
      s.kind = kind_of(m_, on, true);
      push_weight_update_variants(s, params, sync, forward, backward, out);
    }
  }

  void enumerate_embedding(const SNode& n, std::vector<Strategy>& out) const {
    const Op& op = *n.op;
    const i64 H = std::max<i64>(1, n.out.cols_q);
    const i64 V = std::max<i64>(1, i64(std::llround(op.params / double(H))));
    for (const auto& on : assignments(m_, {Dim::rows, Dim::cols, Dim::contract})) {
      const i64 rs = shards(m_, on, Dim::rows), cs = shards(m_, on, Dim::cols), vs = shards(m_, on, Dim::contract);
      if (!divides(n.out.rows_q, rs) || !divides(H, cs) || !divides(V, vs)) continue;
      if (!megatron_allows(op, on, false)) continue;
      Strategy s;
      s.assign = on;
      for (int a = 0; a < 2; ++a)
        s.out.on[std::size_t(a)] = on[std::size_t(a)] == Dim::contract ? Dim::none : on[std::size_t(a)];
      s.in = s.out;
      const double sh = double(rs * cs);
      const Seconds forward = km_.memory(op.fwd_bytes / sh, 1), backward = km_.memory(op.bwd_bytes / sh, 1);
      s.cost = forward + backward;
      std::string comm;
      for (int a = 0; a < 2; ++a)
        if (on[std::size_t(a)] == Dim::contract) {
          s.cost += coll(c_, m_, a, Collective::all_reduce, n.out.bytes / sh);
          comm += fmt::format(" (all-reduce @ {})", a);
        }
      const double params = op.params / double(cs * vs);
      s.act_mem = op.saved_bytes / sh;
      Spec table;
      for (int a = 0; a < 2; ++a)
        table.on[std::size_t(a)] = on[std::size_t(a)] == Dim::contract ? Dim::rows : (on[std::size_t(a)] == Dim::cols ? Dim::cols : Dim::none);
      s.name = spec_name(s.out) + " = lookup " + spec_name(table) + comm;
      s.kind = kind_of(m_, on, false);
      push_weight_update_variants(s, params, on, forward, backward, out);
    }
  }

  // Ops whose strategies are the specs of their output tensor: attention (rows = samples,
  // cols = heads), the expert exchange, and elementwise ops that start a stage.
  void enumerate_tensor(const SNode& n, std::vector<Strategy>& out) const {
    const Op& op = *n.op;
    for (const auto& on : assignments(m_, {Dim::rows, Dim::cols})) {
      const i64 rs = shards(m_, on, Dim::rows), cs = shards(m_, on, Dim::cols);
      if (!divides(n.out.rows_q, rs) || !divides(n.out.cols_q, cs)) continue;
      if (!megatron_allows(op, on, false)) continue;
      Strategy s;
      s.assign = on;
      s.out.on = on;
      s.in = s.out;
      const double sh = double(rs * cs);
      std::string comm;
      if (n.kind == NodeKind::batched) {
        const i64 b = std::max<i64>(1, op.batch / i64(sh));
        if (op.kind == OpKind::attention) {
          s.cost = km_.attention_forward(b, op.m, op.n, op.k, op.causal, op.fwd_bytes / sh, p_.rules.compute) +
                   km_.attention_backward(b, op.m, op.n, op.k, op.causal, op.bwd_bytes / sh, p_.rules.compute);
        } else {
          const DType dt = p_.rules.compute;
          s.cost = km_.gemm(b, op.m, op.n, op.k, dt) + km_.gemm(b, op.m, op.k, op.n, dt) + km_.gemm(b, op.k, op.n, op.m, dt);
        }
        s.act_mem = (op.saved_bytes + n.saved_input) / sh;
        s.name = spec_name(s.out) + " = attention(" + spec_name(s.in) + ")";
        s.kind = kind_of(m_, on, false);
      } else if (n.kind == NodeKind::exchange) {
        // Rows split over an axis means experts live on different devices: tokens move
        // there and back (all-to-all forward, and its gradient backward).
        for (int a = 0; a < 2; ++a)
          if (on[std::size_t(a)] == Dim::rows && m_.axes[std::size_t(a)].size > 1) {
            s.cost += 2 * coll(c_, m_, a, Collective::all_to_all, op.comm_bytes / sh);
            comm += fmt::format(" (all-to-all @ {})", a);
          }
        s.name = spec_name(s.out) + " = exchange(" + spec_name(s.in) + ")" + comm;
        s.kind = kind_of(m_, on, false);
      } else {
        for (int z : zero_levels(op.params / double(cs), data_ways(on))) {
          Strategy v = s;
          elementwise_cost(op, on, v, z);
          out.push_back(std::move(v));
        }
        continue;
      }
      out.push_back(std::move(s));
    }
  }

  // A memory-bound op on `on`; its parameters (norm weights) are updated `zero`-style
  // over the data axes (a follower takes its leader's level).
  void elementwise_cost(const Op& op, const std::array<Dim, 2>& on, Strategy& s, int zero) const {
    const i64 rs = shards(m_, on, Dim::rows), cs = shards(m_, on, Dim::cols);
    const double sh = double(rs * cs);
    const Seconds forward = km_.memory(op.fwd_bytes / sh, op.kernels);
    const Seconds backward = op.bwd_bytes > 0 ? km_.memory(op.bwd_bytes / sh, 2 * op.kernels) : 0.0;
    s.cost = forward + backward;
    std::string comm;
    if (op.role == OpRole::row_reduction && cs > 1) {
      // Statistics per row (mean/variance, max/sum) are all-reduced over the feature split.
      const double stats = double(p_.graph->micro_batch * p_.graph->tokens_per_sample) / double(rs) * 8;
      for (int a = 0; a < 2; ++a)
        if (on[std::size_t(a)] == Dim::cols) {
          s.cost += 2 * coll(c_, m_, a, Collective::all_reduce, stats);
          comm += fmt::format(" (all-reduce @ {})", a);
        }
    }
    const double params = op.params / double(cs);
    if (params <= 0 || data_ways(on) <= 1) zero = 0;
    s.cost += weight_update(params, on, zero, forward, backward);
    s.weight_mem = weight_memory(params, data_ways(on), zero);
    s.act_mem = op.saved_bytes / sh;
    s.name = spec_name(s.out) + comm;
    if (s.kind != "follow") s.kind = kind_of(m_, on, false);
    mark_zero(s, on, zero);
  }

  void follow(const SNode& n, const std::vector<Strategy>& lead, std::vector<Strategy>& out) const {
    for (const auto& l : lead) {
      Strategy s;
      s.out = l.out;
      s.in = l.out;
      s.assign = l.out.on;
      s.kind = "follow";
      elementwise_cost(*n.op, l.out.on, s, l.zero);
      out.push_back(std::move(s));
    }
  }

  const IntraOpProblem& p_;
  const ClusterModel& c_;
  const LogicalMesh& m_;
  KernelModel km_;
  std::vector<SNode> nodes_;
  std::vector<std::vector<Strategy>> strategies_;
  std::string unshardable_;
};

IntraOpResult summarise(const Builder& b, const IlpRequest& r, const std::vector<StrategyIdx>& choice) {
  IntraOpResult res;
  res.feasible = true;
  res.ilp_nodes = int(r.nodes.size());
  res.ilp_edges = int(r.edges.size());
  for (const auto& n : r.nodes) res.ilp_leaders += n.follows < 0 ? 1 : 0;
  double peak = 0;
  res.latency = evaluate_choice(r, choice, &peak);
  for (std::size_t v = 0; v < r.nodes.size(); ++v) {
    const Strategy& st = b.strategies()[v][std::size_t(choice[v].value)];
    res.weight_memory += st.weight_mem;
    res.activation_memory += st.act_mem;
    const auto& n = b.nodes()[v];
    if (n.kind == NodeKind::elementwise && n.follows) continue;  // counted with their leader
    res.decisions.push_back({n.op->name, st.name, st.kind});
    ++res.kind_counts[st.kind];
  }
  return res;
}

}  // namespace

std::string LogicalMesh::name() const { return fmt::format("{}x{}", axes[0].size, axes[1].size); }

LogicalMesh make_logical_mesh(const ClusterModel& c, std::int64_t hosts, std::int64_t gpus, std::int64_t d0, std::int64_t d1) {
  if (d0 < 1 || d1 < 1 || d0 * d1 != hosts * gpus || d1 > gpus || gpus % d1 != 0)
    throw InputError("<search>", "/mesh",
                     fmt::format("logical mesh {}x{} does not tile a {}x{} submesh with axis 1 inside a host", d0, d1, hosts, gpus));
  LogicalMesh m;
  m.hosts = hosts;
  m.gpus = gpus;
  const std::int64_t gpn = std::max<std::int64_t>(1, c.gpus_per_node);
  m.axes[1] = MeshAxis{d1, Group{d1, d1}, 1.0};
  const std::int64_t per_node0 = std::max<std::int64_t>(1, std::min(d0, gpus / d1));
  m.axes[0] = MeshAxis{d0, Group{d0, per_node0}, double(per_node0) / double(gpn)};
  return m;
}

IlpRequest build_intra_op_request(const IntraOpProblem& p, std::vector<OpDecision>* names) {
  Builder b(p);
  b.lower();
  b.enumerate();
  if (names) {
    names->clear();
    for (const auto& n : b.nodes()) names->push_back({n.op->name, "", ""});
  }
  return b.request();
}

IntraOpResult solve_intra_op(const IntraOpProblem& p, const IlpOptions& options) {
  Builder b(p);
  b.lower();
  b.enumerate();
  IntraOpResult res;
  if (!b.unshardable().empty()) {
    res.message = fmt::format("op {} has no sharding that divides evenly on the {} mesh", b.unshardable(), p.mesh.name());
    return res;
  }
  const IlpRequest r = b.request();
  const IlpResult s = solve_ilp(r, options);
  if (s.status == IlpStatus::infeasible || s.status == IlpStatus::unknown) {
    res.status = s.status;
    res.min_memory = s.min_feasible_memory;
    res.message = s.message;
    res.solved_by_cbc = s.solved_by == IlpSolver::cbc;
    return res;
  }
  res = summarise(b, r, s.choice);
  res.status = s.status;
  res.solved_by_cbc = s.solved_by == IlpSolver::cbc;
  for (const auto& st : b.strategies()) {
    double w = INFINITY, a = INFINITY;
    for (const auto& x : st) w = std::min(w, x.weight_mem), a = std::min(a, x.act_mem);
    res.least_weight_memory += w;
    res.least_activation_memory += a;
  }
  return res;
}

IntraOpResult evaluate_intra_op(const IntraOpProblem& p, const std::vector<OpDecision>& decisions,
                                const std::string& file, const std::string& path) {
  Builder b(p);
  b.lower();
  b.enumerate();
  const IlpRequest r = b.request();
  std::vector<StrategyIdx> choice(r.nodes.size());
  std::size_t next = 0;
  for (std::size_t v = 0; v < r.nodes.size(); ++v) {
    const auto& n = b.nodes()[v];
    if (r.nodes[v].follows >= 0) {
      choice[v] = choice[std::size_t(r.nodes[v].follows)];
      continue;
    }
    const std::string at = fmt::format("{}/{}", path, next);
    if (next >= decisions.size())
      throw InputError(file, path, fmt::format("the plan names {} ops; this stage has more (next: {})", decisions.size(), n.op->name));
    const OpDecision& d = decisions[next++];
    if (d.op != n.op->name) throw InputError(file, at + "/op", fmt::format("expected op \"{}\" here, got \"{}\"", n.op->name, d.op));
    const auto& st = b.strategies()[v];
    auto it = std::find_if(st.begin(), st.end(), [&](const Strategy& x) { return x.name == d.strategy; });
    if (it == st.end())
      throw InputError(file, at + "/strategy",
                       fmt::format("\"{}\" is not a strategy of {} on the {} mesh", d.strategy, d.op, p.mesh.name()));
    choice[v] = StrategyIdx{int(it - st.begin())};
  }
  if (next != decisions.size())
    throw InputError(file, path, fmt::format("the plan names {} ops; this stage has {}", decisions.size(), next));
  IntraOpResult res = summarise(b, r, choice);
  res.status = IlpStatus::feasible;
  return res;
}

}  // namespace clustersim::search

// The intra-op pass: lowering (lowering.cpp) and strategies (strategy_space.cpp) turned
// into the ILP's flat request, solved, and the choice read back with the stage's costs
// and memory. See strategies/search/README.md for the ILP.
//
// Memory. The ILP's memory row holds each op's weight memory and `inflight` micro-batches
// of its kept activations (the peak at the end of 1F1B's warm-up forwards), plus a
// constant: a lower bound of the stage's temporary memory (rules::stage_memory's
// working memory, over each op's least-activation strategy; ZeRO-3's gathered weights
// not counted), so the ILP never rejects a choice the exact rule would accept. In the
// Megatron space every op has one strategy, so the ILP only sums; the stage's memory is
// then rules::stage_memory of the chosen strategies (exact, the estimator's figure), and
// the budget is checked against it.
#include "strategies/search/intra_op.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>
#include <tuple>

#include "costmodel/kernels.hpp"
#include "scenarios/diagnostics.hpp"
#include "strategies/search/lowering.hpp"
#include "strategies/search/strategy_space.hpp"

namespace clustersim::search {
namespace {

using i64 = std::int64_t;
using Strategies = NodeStrategies;

// Eager PyTorch with one micro-batch allocates the gradients after the activation peak
// (rules::stage_memory): the ILP's rows leave them out, a lower bound of either peak.
bool gradients_after_peak(const IntraOpProblem& p) {
  return p.space == StrategySpace::full && !p.rules.persistent_grads && p.micro_batches == 1;
}

Bytes weight_row(const IntraOpProblem& p, const Strategy& s) {
  return s.weights.total() - (gradients_after_peak(p) ? s.weights.gradients : 0.0);
}

// The largest working memory of a block (rules::kept_activations) when each node takes
// the strategy `pick` returns.
template <typename Pick>
Bytes largest_working(const IntraOpProblem& p, const LoweredStage& st, const Pick& pick) {
  std::vector<Bytes> saved(st.blocks.size()), core(st.blocks.size());
  for (std::size_t v = 0; v < st.nodes.size(); ++v) {
    const SNode& n = st.nodes[v];
    const Bytes s = pick(v, [](const Strategy& x) { return x.saved; });
    saved[std::size_t(n.block)] += s;
    if (n.core) core[std::size_t(n.block)] += s;
  }
  Bytes working = 0;
  for (std::size_t b = 0; b < st.blocks.size(); ++b) {
    const BlockInfo& info = st.blocks[b];
    const Bytes boundary = info.last_node >= 0 ? pick(std::size_t(info.last_node), [](const Strategy& x) { return x.boundary; }) : 0.0;
    const Bytes transient = info.block->transient_bytes / double(p.mesh.devices());
    working = std::max(working, kept_activations(info.recompute, saved[b], core[b], boundary, transient).working);
  }
  return working;
}

Bytes temporary_lower_bound(const IntraOpProblem& p, const LoweredStage& st, const Strategies& strategies) {
  return largest_working(p, st, [&](std::size_t v, auto field) {
    Bytes least = INFINITY;
    for (const Strategy& s : strategies[v]) least = std::min(least, field(s));
    return strategies[v].empty() ? 0.0 : least;
  });
}

// Edge matrices already built, by (source list, destination list, tensor bytes, input
// or output spec): the nodes of identical layers share their strategy lists
// (NodeStrategies), so their edges repeat too. The value: the edge's index in the
// request, or -1 when the matrix is all zeros (no edge).
using EdgeMemo = std::map<std::tuple<const void*, const void*, double, bool>, int>;

void add_edge(const IntraOpProblem& p, const LoweredStage& st, const Strategies& strategies, IlpRequest& r, int src, int dst,
              bool to_input, EdgeMemo& built) {
  const double bytes = st.nodes[std::size_t(src)].out.bytes;
  const auto key = std::make_tuple(static_cast<const void*>(strategies.lists[std::size_t(src)].get()),
                                   static_cast<const void*>(strategies.lists[std::size_t(dst)].get()), bytes, to_input);
  if (auto it = built.find(key); it != built.end()) {
    if (it->second >= 0) r.edges.push_back(IlpEdge{NodeIdx{src}, NodeIdx{dst}, r.edges[std::size_t(it->second)].cost});
    return;
  }
  IlpEdge e{NodeIdx{src}, NodeIdx{dst}, {}};
  bool any = false;
  // Many strategies share specs (ZeRO variants, for one): cost each pair of specs once.
  auto code = [](const Spec& x) { return std::size_t(x.on[0]) * 4 + std::size_t(x.on[1]); };
  std::array<double, 256> memo;
  memo.fill(-1);
  e.cost.reserve(strategies[std::size_t(src)].size() * strategies[std::size_t(dst)].size());
  for (const auto& a : strategies[std::size_t(src)])
    for (const auto& b : strategies[std::size_t(dst)]) {
      const Spec& to = to_input ? b.in : b.out;
      double& t = memo[code(a.out) * 16 + code(to)];
      if (t < 0) t = reshard(*p.cluster, p.mesh, a.out, to, bytes);
      any = any || t > 0;
      e.cost.push_back(t);
    }
  built.emplace(key, any ? int(r.edges.size()) : -1);
  if (any) r.edges.push_back(std::move(e));
}

IlpRequest make_request(const IntraOpProblem& p, const LoweredStage& st, const Strategies& strategies, Bytes temporary) {
  IlpRequest r;
  std::vector<NodeIdx> live;
  std::map<const void*, std::size_t> seen;  // a shared strategy list -> the first node with it
  r.nodes.reserve(st.nodes.size());
  for (std::size_t v = 0; v < st.nodes.size(); ++v) {
    IlpNode node;
    const auto [it, fresh] = seen.emplace(strategies.lists[v].get(), v);
    if (!fresh) {
      node.cost = r.nodes[it->second].cost;
      node.memory = r.nodes[it->second].memory;
    } else {
      node.cost.reserve(strategies[v].size());
      node.memory.reserve(strategies[v].size());
      for (const auto& s : strategies[v]) {
        node.cost.push_back(s.ilp_cost);
        node.memory.push_back(weight_row(p, s) + p.inflight * s.kept);
      }
    }
    if (st.nodes[v].follows) node.follows = st.nodes[v].pred;
    r.nodes.push_back(std::move(node));
    live.push_back(NodeIdx{int(v)});
  }
  EdgeMemo built;
  for (std::size_t v = 0; v < st.nodes.size(); ++v) {
    const SNode& n = st.nodes[v];
    if (n.pred >= 0 && !n.follows) add_edge(p, st, strategies, r, n.pred, int(v), /*to_input=*/true, built);
    if (n.skip >= 0) add_edge(p, st, strategies, r, n.skip, int(v), /*to_input=*/false, built);
  }
  r.liveness = {live};
  // The Megatron space checks its exact stage memory after the (trivial) solve.
  r.memory_budget = p.space == StrategySpace::megatron ? INFINITY : p.memory_budget - temporary;
  return r;
}

struct Built {
  LoweredStage stage;
  Strategies strategies;
  std::string unshardable;
  Bytes temporary = 0;
  IlpRequest request;
};

Built build(const IntraOpProblem& p) {
  if (p.zero < 0 || p.zero > 3)
    throw std::invalid_argument(fmt::format("IntraOpProblem::zero: expected a ZeRO level 0-3, got {}", p.zero));
  Built b;
  b.stage = lower_stage(p);
  b.strategies = enumerate_strategies(p, b.stage, &b.unshardable);
  if (!b.unshardable.empty()) return b;
  b.temporary = p.space == StrategySpace::full ? temporary_lower_bound(p, b.stage, b.strategies) : 0.0;
  b.request = make_request(p, b.stage, b.strategies, b.temporary);
  return b;
}

IntraOpResult summarise(const IntraOpProblem& p, const Built& b, const std::vector<StrategyIdx>& choice) {
  const LoweredStage& st = b.stage;
  const IlpRequest& r = b.request;
  IntraOpResult res;
  res.feasible = true;
  res.ilp_nodes = int(r.nodes.size());
  res.ilp_edges = int(r.edges.size());
  for (const auto& n : r.nodes) res.ilp_leaders += n.follows < 0 ? 1 : 0;
  auto chosen = [&](std::size_t v) -> const Strategy& { return b.strategies[v][std::size_t(choice[v].value)]; };
  std::vector<double> block_params(st.blocks.size()), block_fp8_params(st.blocks.size());
  double expert_params = 0, fp8_params = 0, expert_fp8_params = 0;
  for (std::size_t v = 0; v < st.nodes.size(); ++v) {
    const Strategy& s = chosen(v);
    res.costs += s.cost;
    res.weights.weights += s.weights.weights;
    res.weights.gradients += s.weights.gradients;
    res.weights.optimizer_states += s.weights.optimizer_states;
    res.weights.autocast_copy += s.weights.autocast_copy;
    res.weight_memory += weight_row(p, s);
    res.activation_memory += s.kept;
    res.params += s.params;
    if (st.nodes[v].op && st.nodes[v].op->expert) expert_params += s.params;
    res.hardware_flops += s.flops;
    block_params[std::size_t(st.nodes[v].block)] += s.block_params;
    if (st.nodes[v].op && fp8_cast_params(*st.nodes[v].op, p.rules.compute, p.rules.weight_gemm) > 0) {
      block_fp8_params[std::size_t(st.nodes[v].block)] += s.block_params;
      fp8_params += s.params;
      if (st.nodes[v].op->expert) expert_fp8_params += s.params;
    }
    const SNode& n = st.nodes[v];
    if (n.kind == NodeKind::elementwise && n.follows) continue;  // counted with their leader
    res.decisions.push_back({n.op->name, s.name, s.kind});
    ++res.kind_counts[s.kind];
  }
  for (const IlpEdge& e : r.edges) {
    const std::size_t k_dst = r.nodes[std::size_t(e.dst.value)].cost.size();
    res.costs.comm += e.cost[std::size_t(choice[std::size_t(e.src.value)].value) * k_dst + std::size_t(choice[std::size_t(e.dst.value)].value)];
  }
  // The optimizer step's fixed part (kernel launches and ramp), once per stage.
  const KernelModel km(p.cluster->gpu);
  if (res.params > 0) res.costs.optimizer += optimizer_step_fixed(km);
  res.latency = res.costs.amortised(p.micro_batches);
  if (p.space == StrategySpace::megatron) {
    res.exact_memory = true;
    StageMemoryInputs& in = res.stage_inputs;
    in.params = res.params;
    Bytes largest_gathered = -1;
    for (std::size_t k = 0; k < block_params.size(); ++k)
      if (const Bytes g = gathered_block_bytes(block_params[k], block_fp8_params[k], p.rules, p.zero); g > largest_gathered) {
        largest_gathered = g;
        in.largest_block_params = block_params[k];
        in.largest_block_fp8_params = block_fp8_params[k];
      }
    in.kept_per_micro_batch = res.activation_memory;
    in.working = largest_working(p, st, [&](std::size_t v, auto field) { return field(chosen(v)); });
    in.zero = p.zero;
    in.dp = p.mesh.axes[0].size;
    in.micro_batches = p.micro_batches;
    // The Megatron space splits the experts over the data-parallel axis (ep = dp): one
    // replica each, nothing for ZeRO to shard (as the full space's rows have it).
    in.expert_params = expert_params;
    in.expert_dp = 1;
    in.fp8_params = fp8_params;
    in.expert_fp8_params = expert_fp8_params;
  } else {
    res.temporary_memory = b.temporary;
  }
  return res;
}

}  // namespace

StageCosts& StageCosts::operator+=(const StageCosts& o) {
  forward += o.forward;
  backward += o.backward;
  recompute += o.recompute;
  comm += o.comm;
  ep_comm += o.ep_comm;
  zero3_gather += o.zero3_gather;
  dp_sync += o.dp_sync;
  optimizer += o.optimizer;
  launches += o.launches;
  return *this;
}

MemoryBreakdown IntraOpResult::memory(double inflight, const PrecisionRules& r) const {
  if (exact_memory) {
    StageMemoryInputs in = stage_inputs;
    in.in_flight = inflight;
    return stage_memory(in, r);
  }
  MemoryBreakdown m;
  m.weights = weights.weights;
  // The ILP's rows (weight_memory) leave the gradients out when they come after the peak.
  m.gradients = weight_memory - weights.weights - weights.optimizer_states - weights.autocast_copy;
  m.optimizer_states = weights.optimizer_states;
  m.activations = inflight * activation_memory;
  m.temporary = temporary_memory + weights.autocast_copy;
  return m;
}

std::string LogicalMesh::name() const { return fmt::format("{}x{}", axes[0].size, axes[1].size); }

bool tiles(std::int64_t hosts, std::int64_t gpus, std::int64_t d0, std::int64_t d1) {
  return d0 >= 1 && d1 >= 1 && d0 * d1 == hosts * gpus && d1 <= gpus && gpus % d1 == 0;
}

LogicalMesh make_logical_mesh(const ClusterModel& c, std::int64_t hosts, std::int64_t gpus, std::int64_t d0, std::int64_t d1) {
  if (!tiles(hosts, gpus, d0, d1))
    throw std::invalid_argument(
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
  Built b = build(p);
  if (names) {
    names->clear();
    for (const auto& n : b.stage.nodes) names->push_back({n.op->name, "", ""});
  }
  return std::move(b.request);
}

IntraOpResult solve_intra_op(const IntraOpProblem& p, const IlpOptions& options) {
  const Built b = build(p);
  IntraOpResult res;
  if (!b.unshardable.empty()) {
    res.message = fmt::format("op {} has no sharding that divides evenly on the {} mesh", b.unshardable, p.mesh.name());
    return res;
  }
  const IlpResult s = solve_ilp(b.request, options);
  if (s.status == IlpStatus::infeasible || s.status == IlpStatus::unknown) {
    res.status = s.status;
    res.min_memory = s.min_feasible_memory + b.temporary;
    res.temporary_memory = b.temporary;
    res.message = s.message;
    res.solved_by_cbc = s.solved_by == IlpSolver::cbc;
    res.dp_stats = s.dp_stats;
    return res;
  }
  res = summarise(p, b, s.choice);
  res.status = s.status;
  res.solved_by_cbc = s.solved_by == IlpSolver::cbc;
  res.dp_stats = s.dp_stats;
  for (std::size_t v = 0; v < b.strategies.size(); ++v) {
    double w = INFINITY, a = INFINITY;
    for (const auto& x : b.strategies[v]) w = std::min(w, weight_row(p, x)), a = std::min(a, x.kept);
    res.least_weight_memory += w;
    res.least_activation_memory += a;
  }
  if (res.exact_memory) {
    const Bytes need = res.memory(p.inflight, p.rules).total();
    if (need > p.memory_budget * (1 + 1e-12)) {
      res.feasible = false;
      res.status = IlpStatus::infeasible;
      res.min_memory = need;
      res.message = fmt::format("the stage needs {:.3f} GB per device; the budget is {:.3f} GB", need * 1e-9, p.memory_budget * 1e-9);
    }
  }
  return res;
}

IntraOpResult evaluate_intra_op(const IntraOpProblem& p, const std::vector<OpDecision>& decisions,
                                const std::string& file, const std::string& path) {
  const Built b = build(p);
  if (!b.unshardable.empty())
    throw InputError(file, path, fmt::format("op {} has no sharding that divides evenly on the {} mesh", b.unshardable, p.mesh.name()));
  const IlpRequest& r = b.request;
  std::vector<StrategyIdx> choice(r.nodes.size());
  std::size_t next = 0;
  for (std::size_t v = 0; v < r.nodes.size(); ++v) {
    const auto& n = b.stage.nodes[v];
    if (r.nodes[v].follows >= 0) {
      choice[v] = choice[std::size_t(r.nodes[v].follows)];
      continue;
    }
    const std::string at = fmt::format("{}/{}", path, next);
    if (next >= decisions.size())
      throw InputError(file, path, fmt::format("the plan names {} ops; this stage has more (next: {})", decisions.size(), n.op->name));
    const OpDecision& d = decisions[next++];
    if (d.op != n.op->name) throw InputError(file, at + "/op", fmt::format("expected op \"{}\" here, got \"{}\"", n.op->name, d.op));
    const auto& st = b.strategies[v];
    auto it = std::find_if(st.begin(), st.end(), [&](const Strategy& x) { return x.name == d.strategy; });
    if (it == st.end())
      throw InputError(file, at + "/strategy",
                       fmt::format("\"{}\" is not a strategy of {} on the {} mesh", d.strategy, d.op, p.mesh.name()));
    choice[v] = StrategyIdx{int(it - st.begin())};
  }
  if (next != decisions.size())
    throw InputError(file, path, fmt::format("the plan names {} ops; this stage has {}", decisions.size(), next));
  IntraOpResult res = summarise(p, b, choice);
  res.status = IlpStatus::feasible;
  return res;
}

}  // namespace clustersim::search

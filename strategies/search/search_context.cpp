#include "strategies/search/search_context.hpp"

#include <algorithm>
#include <cmath>

#include "scenarios/diagnostics.hpp"
#include "strategies/rules.hpp"

namespace clustersim::search {

using i64 = std::int64_t;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

SearchContext::SearchContext(const Scenario& s, const SearchOptions& o) : s_(s), o_(o) {
  Diagnostics diag(s.source);
  cluster_ = scenario_cluster(s, diag);
  diag.throw_if_errors();
  rules_ = precision_rules(s.training);
  budget_ = cluster_.gpu.usable_memory();
  ilp_ = o.ilp;
  ilp_.explain_infeasible = false;
}

const ModelGraph& SearchContext::graph(i64 samples) {
  auto it = graphs_.find(samples);
  if (it == graphs_.end())
    it = graphs_.emplace(samples, build_model_graph(s_.model, samples, graph_style(s_.training))).first;
  return it->second;
}

std::vector<int> SearchContext::order(const ModelGraph& g) {
  std::vector<int> o = g.pre;
  o.insert(o.end(), g.layers.begin(), g.layers.end());
  o.insert(o.end(), g.post.begin(), g.post.end());
  return o;
}

std::vector<std::string> SearchContext::block_names() {
  const ModelGraph& g = graph(1);
  std::vector<std::string> names;
  for (int b : order(g)) names.push_back(g.blocks[std::size_t(b)].name);
  return names;
}

std::vector<i64> default_micro_batch_counts(i64 global_batch) {
  std::vector<i64> out;
  for (i64 b = 1; b <= global_batch; b *= 2)
    if (global_batch % b == 0) out.push_back(b);
  return out;
}

std::vector<i64> SearchContext::micro_batch_counts() const {
  if (!o_.micro_batch_counts.empty()) return o_.micro_batch_counts;
  return default_micro_batch_counts(s_.training.global_batch);
}

IntraOpProblem SearchContext::problem(const ModelGraph& g, std::vector<int> blocks, const LogicalMesh& mesh, i64 B,
                                      double inflight, StrategySpace space, int zero,
                                      std::optional<Recompute> recompute) const {
  IntraOpProblem p;
  p.cluster = &cluster_;
  p.rules = rules_;
  p.graph = &g;
  p.blocks = std::move(blocks);
  p.mesh = mesh;
  p.micro_batches = B;
  p.inflight = inflight;
  p.memory_budget = budget_;
  p.heads = std::max<i64>(1, s_.model.heads);
  p.experts = std::max<i64>(1, s_.model.experts);
  p.top_k = s_.model.top_k;
  p.max_nodes_per_token = s_.model.max_nodes_per_token;
  p.space = space;
  p.zero = space == StrategySpace::megatron ? zero : 0;
  p.recompute = recompute.value_or(s_.training.recompute);
  p.framework = s_.training.framework;
  return p;
}

const IntraOpResult* SearchContext::reusable(const Entries& entries, int inflight, double* lower) const {
  if (lower) *lower = 0;
  const IntraOpResult* base = nullptr;
  for (const auto& [s0, r] : entries)
    if (s0 <= inflight) base = &r;
  if (!base) return nullptr;
  // inflight 0 is the memory-free problem: its solution is reused as is.
  if (inflight == 0 || !base->feasible || fits(base->memory(inflight, rules_).total())) return base;
  if (lower) *lower = base->latency;
  return nullptr;
}

const IntraOpResult& SearchContext::stage(const ModelGraph& g, const std::vector<int>& blocks, i64 B, const Submesh& sub,
                                          i64 d0, i64 d1, int inflight, StrategySpace space, int zero,
                                          std::optional<Recompute> recompute) {
  Entries& list =
      cache_[Key{blocks, g.micro_batch, sub.hosts, sub.gpus, d0, d1, int(space), zero, recompute ? int(*recompute) : -1}];
  if (const IntraOpResult* r = reusable(list, inflight)) {
    ++timings.cache_hits;
    return *r;
  }
  const auto t0 = Clock::now();
  const LogicalMesh mesh = make_logical_mesh(cluster_, sub.hosts, sub.gpus, d0, d1);
  IntraOpProblem prob = problem(g, blocks, mesh, B, inflight, space, zero, recompute);
  if (inflight == 0) prob.memory_budget = INFINITY;  // the memory-free optimum: a lower bound
  IntraOpResult r = solve_intra_op(prob, ilp_);
  const double dt = seconds_since(t0);
  timings.intra_op_s += dt;
  ++timings.ilp_solves;
  timings.cbc_solves += r.solved_by_cbc ? 1 : 0;
  if ((r.feasible && r.status != IlpStatus::optimal) || r.status == IlpStatus::unknown) ++timings.unproven;
  if (o_.trace)
    timings.ilps.push_back({blocks.size(), g.micro_batch, sub, d0, d1, inflight, r.feasible, r.latency, r.ilp_nodes,
                            r.ilp_leaders, r.ilp_edges, dt, r.dp_stats});
  auto pos = std::find_if(list.begin(), list.end(), [&](const auto& e) { return e.first > inflight; });
  return list.insert(pos, {inflight, std::move(r)})->second;
}

PlanStage SearchContext::make_stage(const IntraOpResult& r, int first, int last, const Submesh& sub, i64 d0, i64 d1,
                                    double inflight) const {
  PlanStage st;
  st.first_block = first;
  st.last_block = last;
  st.submesh = sub;
  st.mesh0 = d0;
  st.mesh1 = d1;
  st.latency = r.latency;
  st.costs = r.costs;
  st.hardware_flops = r.hardware_flops;
  st.params = r.params;
  st.in_flight = inflight;
  st.memory_breakdown = r.memory(inflight, rules_);
  st.memory = st.memory_breakdown.total();
  st.weight_memory = r.weight_memory;
  st.activation_memory = r.activation_memory;
  st.kind_counts = r.kind_counts;
  st.decisions = r.decisions;
  return st;
}

}  // namespace clustersim::search

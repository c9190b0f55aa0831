// Orchestration of the plan search; see search.hpp.
//
// Reuse: an intra-op result depends only on (the block sequence of the stage, the
// micro-batch size, the submesh, the logical mesh, the strategy space) and on the
// number of micro-batches in flight through the memory constraint. With identical
// transformer layers most candidates share a key. For one key we keep the solutions
// found at increasing in-flight counts s0: a solution optimal at s0 that still fits at
// s > s0 is optimal at s too (the feasible set only shrinks as s grows), and
// infeasibility at s0 implies infeasibility at s. So the ILP stays exact.
#include "strategies/search/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <set>
#include <tuple>

#include "costmodel/cluster.hpp"
#include "costmodel/precision.hpp"
#include "scenarios/json_reader.hpp"

namespace clustersim::search {
namespace {

using i64 = std::int64_t;
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Key {
  std::vector<int> blocks;
  i64 samples, hosts, gpus, d0, d1;
  int space;
  int zero = 0;  // the manual space's ZeRO level
  auto tie() const { return std::tie(blocks, samples, hosts, gpus, d0, d1, space, zero); }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

class Searcher {
 public:
  Searcher(const Scenario& s, const SearchOptions& o) : s_(s), o_(o) {
    Diagnostics diag(s.source);
    cluster_ = resolve_cluster(s.cluster, diag);
    diag.throw_if_errors();
    rules_ = precision_rules(s.training.precision, s.training.optimizer);
    budget_ = cluster_.gpu.usable_memory();
    ilp_ = o.ilp;
    ilp_.explain_infeasible = false;
  }

  const ModelGraph& graph(i64 samples) {
    auto it = graphs_.find(samples);
    if (it == graphs_.end())
      it = graphs_.emplace(samples, build_model_graph(s_.model, samples, graph_style(s_.training.precision))).first;
    return it->second;
  }

  std::vector<int> order(const ModelGraph& g) const {
    std::vector<int> o = g.pre;
    o.insert(o.end(), g.layers.begin(), g.layers.end());
    o.insert(o.end(), g.post.begin(), g.post.end());
    return o;
  }

  std::vector<i64> micro_batch_counts() const {
    if (!o_.micro_batch_counts.empty()) return o_.micro_batch_counts;
    std::vector<i64> out;
    for (i64 b = 4; b <= s_.training.global_batch; b *= 2)
      if (b <= s_.training.global_batch && s_.training.global_batch % b == 0) out.push_back(b);
    if (out.empty()) out.push_back(1);
    return out;
  }

  // `zero`: the ZeRO level of StrategySpace::megatron (the manual baseline's knob).
  IntraOpProblem problem(const ModelGraph& g, std::vector<int> blocks, const LogicalMesh& mesh, i64 B, double inflight,
                         StrategySpace space, int zero = 0) const {
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
    p.space = space;
    p.zero = space == StrategySpace::megatron ? zero : 0;
    return p;
  }

  using Entries = std::vector<std::pair<int, IntraOpResult>>;  // per key, by in-flight count

  // The cached result that is exact for `inflight` micro-batches in flight (see the top
  // of this file), else nullptr; `lower` (optional) receives the latency at the largest
  // smaller in-flight count solved, a lower bound.
  const IntraOpResult* reusable(const Entries& entries, int inflight, double* lower = nullptr) const {
    if (lower) *lower = 0;
    const IntraOpResult* base = nullptr;
    for (const auto& [s0, r] : entries)
      if (s0 <= inflight) base = &r;
    if (!base) return nullptr;
    // inflight 0 is the memory-free problem: its solution is reused as is.
    if (inflight == 0 || !base->feasible || base->weight_memory + inflight * base->activation_memory <= budget_ * (1 + 1e-12))
      return base;
    if (lower) *lower = base->latency;
    return nullptr;
  }

  // The intra-op optimum of a stage candidate with `inflight` micro-batches live (`zero`:
  // the ZeRO level of the manual space).
  const IntraOpResult& stage(const ModelGraph& g, const std::vector<int>& blocks, i64 B, const Submesh& sub, i64 d0,
                             i64 d1, int inflight, StrategySpace space, int zero = 0) {
    Entries& entries = cache_[Key{blocks, g.micro_batch, sub.hosts, sub.gpus, d0, d1, int(space), zero}];
    if (const IntraOpResult* r = reusable(entries, inflight)) {
      ++timings_.cache_hits;
      return *r;
    }
    const auto t0 = Clock::now();
    const LogicalMesh mesh = make_logical_mesh(cluster_, sub.hosts, sub.gpus, d0, d1);
    IntraOpProblem prob = problem(g, blocks, mesh, B, inflight, space, zero);
    if (inflight == 0) prob.memory_budget = INFINITY;  // the memory-free optimum: a lower bound
    IntraOpResult r = solve_intra_op(prob, ilp_);
    const double dt = since(t0);
    timings_.intra_op_s += dt;
    ++timings_.ilp_solves;
    timings_.cbc_solves += r.solved_by_cbc ? 1 : 0;
    if ((r.feasible && r.status != IlpStatus::optimal) || r.status == IlpStatus::unknown) ++timings_.unproven;
    if (std::getenv("CLUSTERSIM_SEARCH_TRACE"))
      std::fprintf(stderr, "ilp %zu blocks, %lld samples, submesh %s, mesh %lldx%lld, in flight %d: %s %.4f s, %d nodes %d leaders %d edges, %.3f s\n",
                   blocks.size(), (long long)g.micro_batch, sub.name().c_str(), (long long)d0, (long long)d1, inflight,
                   r.feasible ? "feasible" : "infeasible", r.latency, r.ilp_nodes, r.ilp_leaders, r.ilp_edges, dt);
    auto pos = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first > inflight; });
    return entries.insert(pos, {inflight, std::move(r)})->second;
  }

  static std::vector<std::pair<i64, i64>> logical_meshes(const Submesh& sub) {
    std::vector<std::pair<i64, i64>> out;
    for (i64 d1 = 1; d1 <= sub.gpus; ++d1) {
      if (sub.gpus % d1 != 0) continue;
      const i64 d0 = sub.devices() / d1;
      // Inside one host both axes run over the same links: d0 x d1 and d1 x d0 are the
      // same candidate with the axes renamed, so only d0 <= d1 is solved.
      if (sub.hosts == 1 && d0 > d1) continue;
      out.emplace_back(d0, d1);
    }
    return out;
  }

  PlanStage make_stage(const IntraOpResult& r, int first, int last, const Submesh& sub, i64 d0, i64 d1, int inflight) const {
    PlanStage st;
    st.first_block = first;
    st.last_block = last;
    st.submesh = sub;
    st.mesh0 = d0;
    st.mesh1 = d1;
    st.latency = r.latency;
    st.weight_memory = r.weight_memory;
    st.activation_memory = r.activation_memory;
    st.memory = r.weight_memory + inflight * r.activation_memory;
    st.kind_counts = r.kind_counts;
    st.decisions = r.decisions;
    return st;
  }

  using CandKey = std::tuple<int, int, int, int>;  // first layer, last layer, submesh, stages from the end
  struct Value {
    double t = INFINITY;
    bool exact = true;
    std::pair<i64, i64> mesh{1, 1};
  };

  // One micro-batch count: its graph, clustering and the stage values found so far.
  struct PerB {
    i64 B = 0, samples = 0;
    const ModelGraph* g = nullptr;
    std::vector<int> ord, starts;
    int K = 0;
    std::set<CandKey> refined;
    std::map<CandKey, Value> memo;
    InterOpResult res;
    bool exact = false;  // res uses exact stage values only
    std::pair<int, int> range(int first, int last) const {
      const int a = starts[std::size_t(first)];
      const int z = last + 1 < K ? starts[std::size_t(last + 1)] : int(ord.size());
      return {a, z - 1};
    }
  };

  // Lazy exact stage latencies. A candidate's value is exact when the memory-free ILP
  // optimum fits with `from_end` micro-batches in flight, or when the cache implies the
  // memory-constrained optimum; otherwise a lower bound (the memory-free optimum, or the
  // optimum with fewer micro-batches in flight), until the DP picks the candidate: then
  // its memory-constrained ILPs are solved and the DP runs again. When the DP's plan
  // uses exact values only, it is optimal: every other plan costs at least its
  // lower-bound total. Most memory-tight ILPs (the slow ones) are never needed.
  Value value(PerB& pb, int first, int last, int sub, int from_end) {
    const CandKey ck{first, last, sub, from_end};
    if (auto it = pb.memo.find(ck); it != pb.memo.end()) return it->second;
    const int inflight = int(std::min<i64>(pb.B, from_end));  // 1F1B never holds more than B
    const auto [a, z] = pb.range(first, last);
    const std::vector<int> blocks(pb.ord.begin() + a, pb.ord.begin() + z + 1);
    const Submesh& sm = subs_[std::size_t(sub)];
    const bool refine = !o_.lazy || pb.refined.count(ck) > 0;
    Value best_v;
    for (auto [d0, d1] : logical_meshes(sm)) {
      ++timings_.candidates;
      const IntraOpResult& u = stage(*pb.g, blocks, pb.B, sm, d0, d1, 0, StrategySpace::full);
      if (!u.feasible) continue;  // no sharding divides: infeasible at any budget
      Value v{u.latency, true, {d0, d1}};
      if (u.least_weight_memory + inflight * u.least_activation_memory > budget_ * (1 + 1e-12)) {
        v.t = INFINITY;  // even the least memory of every op overflows: exact
      } else if (u.weight_memory + inflight * u.activation_memory > budget_ * (1 + 1e-12)) {
        const Key k{blocks, pb.g->micro_batch, sm.hosts, sm.gpus, d0, d1, int(StrategySpace::full)};
        double lower = 0;
        if (const IntraOpResult* r = reusable(cache_[k], inflight, &lower)) {
          v.t = r->feasible ? r->latency : INFINITY;
        } else if (refine) {
          const IntraOpResult& r2 = stage(*pb.g, blocks, pb.B, sm, d0, d1, inflight, StrategySpace::full);
          v.t = r2.feasible ? r2.latency : INFINITY;
        } else {
          v.t = std::max(v.t, lower);
          v.exact = false;
        }
      }
      if (v.t < best_v.t || (v.t == best_v.t && v.exact && !best_v.exact)) best_v = v;
    }
    pb.memo[ck] = best_v;
    return best_v;
  }

  // One run of the inter-op DP over the current values; marks the non-exact stages of
  // its plan for refinement.
  void round(PerB& pb) {
    InterOpProblem ip;
    ip.layers = pb.K;
    ip.submeshes = subs_;
    ip.devices = cluster_.total_gpus();
    ip.micro_batches = pb.B;
    auto latency = [&](int first, int last, int sub, int from_end) { return value(pb, first, last, sub, from_end).t; };
    const auto t0 = Clock::now();
    const double intra_before = timings_.intra_op_s;
    pb.res = solve_inter_op(ip, latency);
    timings_.inter_op_s += since(t0) - (timings_.intra_op_s - intra_before);
    pb.exact = pb.res.feasible;
    const int n = int(pb.res.stages.size());
    for (int j = 0; j < n && pb.res.feasible; ++j) {
      const auto& sc = pb.res.stages[std::size_t(j)];
      const CandKey key{sc.first, sc.last, sc.submesh, n - j};
      if (!pb.memo.at(key).exact) {
        pb.refined.insert(key);
        pb.memo.erase(key);
        pb.exact = false;
      }
    }
  }

  SearchPlan alpa() {
    SearchPlan best;
    best.method = "alpa";
    subs_ = submesh_shapes(cluster_.nodes, cluster_.gpus_per_node);
    std::vector<PerB> all;
    for (i64 B : micro_batch_counts()) {
      PerB pb;
      pb.B = B;
      pb.samples = s_.training.global_batch / B;
      pb.g = &graph(pb.samples);
      pb.ord = order(*pb.g);
      const auto t0 = Clock::now();
      std::vector<double> flops, cut;
      for (int b : pb.ord) {
        flops.push_back(pb.g->blocks[std::size_t(b)].fwd_flops());
        cut.push_back(pb.g->blocks[std::size_t(b)].output_bytes);
      }
      pb.starts = cluster_layers(flops, cut, std::min<int>(o_.layer_clusters, int(pb.ord.size())));
      pb.K = int(pb.starts.size());
      timings_.clustering_s += since(t0);
      all.push_back(std::move(pb));
    }
    // The first DP round of each micro-batch count gives a lower bound of its best
    // plan. Counts are then refined in ascending order of that bound, and a count whose
    // bound (which only grows with refinement) reaches the best plan found is dropped:
    // the result is the same as refining every count to the end.
    for (PerB& pb : all) round(pb);
    std::vector<std::size_t> idx(all.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t x, std::size_t y) {
      return all[x].res.iteration_time < all[y].res.iteration_time;
    });
    const PerB* winner = nullptr;
    for (std::size_t i : idx) {
      PerB& pb = all[i];
      while (pb.res.feasible && !pb.exact && !(winner && pb.res.iteration_time >= winner->res.iteration_time)) {
        ++timings_.dp_rounds;
        round(pb);
      }
      if (std::getenv("CLUSTERSIM_SEARCH_TRACE"))
        std::fprintf(stderr, "micro-batches %lld: %s %.6g s after %zu refinements\n", (long long)pb.B,
                     !pb.res.feasible ? "infeasible" : pb.exact ? "exact" : "bound", pb.res.iteration_time, pb.refined.size());
      if (!pb.res.feasible || !pb.exact) continue;
      if (winner && pb.res.iteration_time >= winner->res.iteration_time) continue;
      winner = &pb;
    }
    if (!winner) return best;
    const PerB& pb = *winner;
    best.micro_batches = pb.B;
    best.samples_per_micro_batch = pb.samples;
    best.iteration_time = pb.res.iteration_time;
    best.feasible = true;
    best.pp = i64(pb.res.stages.size());
    const int n = int(pb.res.stages.size());
    for (int j = 0; j < n; ++j) {
      const auto& sc = pb.res.stages[std::size_t(j)];
      const auto [d0, d1] = pb.memo.at({sc.first, sc.last, sc.submesh, n - j}).mesh;
      const auto [a, z] = pb.range(sc.first, sc.last);
      const std::vector<int> blocks(pb.ord.begin() + a, pb.ord.begin() + z + 1);
      const Submesh& sm = subs_[std::size_t(sc.submesh)];
      const int inflight = int(std::min<i64>(pb.B, n - j));
      const IntraOpResult& r = stage(*pb.g, blocks, pb.B, sm, d0, d1, inflight, StrategySpace::full);
      best.stages.push_back(make_stage(r, a, z, sm, d0, d1, inflight));
    }
    return best;
  }

  // Micro-batches in flight on stage j of pp (the memory check): 1F1B's warm-up keeps
  // pp - j (as the Alpa-style DP assumes), GPipe runs every forward before the first
  // backward and keeps all B. Eq. 2 gives both the same latency.
  static int in_flight(const std::string& schedule, i64 B, i64 pp, i64 j) {
    // 1F1B: stage j warms up with pp - j forwards, but never more than B exist.
    return int(schedule == "gpipe" ? B : std::min(B, pp - j));
  }

  // Every dp x tp x pp x micro-batch count x schedule x ZeRO level.
  SearchPlan manual() {
    const auto t0 = Clock::now();
    SearchPlan best;
    best.method = "manual";
    const i64 G = cluster_.total_gpus(), gpn = cluster_.gpus_per_node;
    for (i64 B : micro_batch_counts()) {
      const i64 samples = s_.training.global_batch / B;
      const ModelGraph& g = graph(samples);
      const i64 L = i64(g.layers.size());
      const std::vector<int> ord = order(g);
      for (i64 tp = 1; tp <= gpn; tp *= 2)
        for (i64 pp = 1; pp <= std::min(L, G / tp); ++pp) {
          if (L % pp != 0 || G % (tp * pp) != 0) continue;
          const i64 dp = G / (tp * pp);
          const i64 per = dp * tp;
          Submesh sub = per < gpn ? Submesh{1, per} : Submesh{per / gpn, gpn};
          if (sub.devices() != per || (per < gpn && (per & (per - 1)) != 0) || sub.gpus % tp != 0) continue;
          for (const std::string schedule : {"1f1b", "gpipe"}) {
            // Every GPipe stage keeps B >= min(B, pp - j) micro-batches in flight, as
            // many as under 1F1B or more: its feasible set is a subset, its ILP optimum
            // no faster, Eq. 2 the same, so it cannot beat the 1F1B plan of the same
            // knobs (ties go to 1F1B). With B >= pp it is skipped to save the solves;
            // with B < pp (rare) it is costed, to show it.
            if (schedule == "gpipe" && B >= pp) continue;
            // ZeRO shards the weight update over data parallelism: levels > 0 need dp > 1.
            // (ZeRO-1 ties ZeRO-2's time with more memory; enumerated for completeness.)
            for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
              SearchPlan plan;
              plan.method = "manual";
              plan.micro_batches = B;
              plan.samples_per_micro_batch = samples;
              plan.dp = dp;
              plan.tp = tp;
              plan.pp = pp;
              plan.schedule = schedule;
              plan.zero = zero;
              plan.feasible = true;
              std::vector<StageChoice> times;
              for (i64 j = 0; j < pp; ++j) {
                const int a = j == 0 ? 0 : int(g.pre.size() + std::size_t(j * (L / pp)));
                const int z = j == pp - 1 ? int(g.pre.size() + g.layers.size() + g.post.size()) - 1
                                          : int(g.pre.size() + std::size_t((j + 1) * (L / pp))) - 1;
                const std::vector<int> blocks(ord.begin() + a, ord.begin() + z + 1);
                const int inflight = in_flight(schedule, B, pp, j);
                const IntraOpResult& r = stage(g, blocks, B, sub, dp, tp, inflight, StrategySpace::megatron, zero);
                if (!r.feasible) {
                  plan.feasible = false;
                  break;
                }
                plan.stages.push_back(make_stage(r, a, z, sub, dp, tp, inflight));
                times.push_back({a, z, 0, r.latency});
              }
              if (!plan.feasible) continue;
              plan.iteration_time = pipeline_latency(times, B);
              if (!best.feasible || plan.iteration_time < best.iteration_time) best = std::move(plan);
            }
          }
        }
    }
    timings_.manual_s += since(t0);
    return best;
  }

  SearchPlan evaluate(const SearchPlan& plan, const std::string& file) {
    if (plan.samples_per_micro_batch < 1 || s_.training.global_batch % plan.samples_per_micro_batch != 0)
      throw InputError(file, "/samples_per_micro_batch",
                       fmt::format("expected a divisor of the scenario's global batch ({}), got {}", s_.training.global_batch,
                                   plan.samples_per_micro_batch));
    const i64 B = s_.training.global_batch / plan.samples_per_micro_batch;
    const bool manual = plan.method == "manual";
    if (manual && plan.schedule != "1f1b" && plan.schedule != "gpipe")
      throw InputError(file, "/manual/schedule", fmt::format("expected one of 1f1b | gpipe, got \"{}\"", plan.schedule));
    if (manual && (plan.zero < 0 || plan.zero > 3))
      throw InputError(file, "/manual/zero", fmt::format("expected an integer in [0, 3], got {}", plan.zero));
    if (manual && plan.zero > 0 && plan.dp <= 1)
      throw InputError(file, "/manual/zero",
                       fmt::format("ZeRO {} shards the weight update over data parallelism; it needs dp > 1, got dp {}",
                                   plan.zero, plan.dp));
    const ModelGraph& g = graph(plan.samples_per_micro_batch);
    const std::vector<int> ord = order(g);
    SearchPlan out = plan;
    out.micro_batches = B;
    if (!manual) {
      out.schedule = "1f1b";  // the Alpa-style DP's schedule; ZeRO is per op there
      out.zero = 0;
    }
    out.stages.clear();
    std::vector<StageChoice> times;
    i64 devices = 0;
    int expect = 0;
    const int n = int(plan.stages.size());
    for (int j = 0; j < n; ++j) {
      const PlanStage& st = plan.stages[std::size_t(j)];
      const std::string path = fmt::format("/stages/{}", j);
      if (st.first_block != expect || st.last_block < st.first_block || st.last_block >= int(ord.size()))
        throw InputError(file, path + "/blocks",
                         fmt::format("expected a block range starting at {} and ending before {}, got [{}, {}]", expect,
                                     ord.size(), st.first_block, st.last_block));
      expect = st.last_block + 1;
      devices += st.submesh.devices();
      if (st.submesh.gpus > cluster_.gpus_per_node || st.submesh.hosts > cluster_.nodes)
        throw InputError(file, path + "/submesh", fmt::format("{} does not fit the cluster's {} x {}", st.submesh.name(),
                                                              cluster_.nodes, cluster_.gpus_per_node));
      const LogicalMesh mesh = [&] {
        try {
          return make_logical_mesh(cluster_, st.submesh.hosts, st.submesh.gpus, st.mesh0, st.mesh1);
        } catch (const InputError& e) {
          throw InputError(file, path + "/logical_mesh", e.problems().front().message);
        }
      }();
      const std::vector<int> blocks(ord.begin() + st.first_block, ord.begin() + st.last_block + 1);
      const StrategySpace space = manual ? StrategySpace::megatron : StrategySpace::full;
      const int inflight = in_flight(out.schedule, B, n, j);
      const IntraOpResult r =
          evaluate_intra_op(problem(g, blocks, mesh, B, inflight, space, out.zero), st.decisions, file, path + "/ops");
      out.stages.push_back(make_stage(r, st.first_block, st.last_block, st.submesh, st.mesh0, st.mesh1, inflight));
      times.push_back({st.first_block, st.last_block, 0, r.latency});
    }
    if (expect != int(ord.size()))
      throw InputError(file, "/stages", fmt::format("the stages cover blocks [0, {}) of the model's {}", expect, ord.size()));
    if (devices > cluster_.total_gpus())
      throw InputError(file, "/stages", fmt::format("the stages use {} GPUs; the cluster has {}", devices, cluster_.total_gpus()));
    out.iteration_time = pipeline_latency(times, B);
    out.feasible = true;
    for (const auto& st : out.stages) out.feasible = out.feasible && st.memory <= budget_ * (1 + 1e-12);
    return out;
  }

  std::vector<std::string> block_names() {
    const ModelGraph& g = graph(1);
    std::vector<std::string> names;
    for (int b : order(g)) names.push_back(g.blocks[std::size_t(b)].name);
    return names;
  }

  SearchTimings timings_;

 private:
  const Scenario& s_;
  SearchOptions o_;
  ClusterModel cluster_;
  PrecisionRules rules_;
  IlpOptions ilp_;
  double budget_ = 0;
  std::map<i64, ModelGraph> graphs_;
  std::map<Key, Entries> cache_;
  std::vector<Submesh> subs_;
};

}  // namespace

void SearchOptions::validate() const {
  if (layer_clusters < 1)
    throw InputError("<search options>", "/layer_clusters", fmt::format("expected an integer >= 1, got {}", layer_clusters));
  for (std::size_t i = 0; i < micro_batch_counts.size(); ++i)
    if (micro_batch_counts[i] < 1)
      throw InputError("<search options>", fmt::format("/micro_batch_counts/{}", i),
                       fmt::format("expected an integer >= 1, got {}", micro_batch_counts[i]));
  ilp.validate();
}

SearchReport run_search(const Scenario& s, const SearchOptions& options) {
  options.validate();
  for (i64 B : options.micro_batch_counts)
    if (s.training.global_batch % B != 0)
      throw InputError("<search options>", "/micro_batch_counts",
                       fmt::format("{} does not divide the global batch ({})", B, s.training.global_batch));
  const auto t0 = Clock::now();
  Searcher se(s, options);
  SearchReport rep;
  rep.block_names = se.block_names();
  rep.alpa = se.alpa();
  if (options.manual_baseline) rep.manual = se.manual();
  rep.timings = se.timings_;
  rep.timings.total_s = since(t0);
  return rep;
}

SearchPlan evaluate_plan(const Scenario& s, const SearchPlan& plan, const std::string& file) {
  Searcher se(s, SearchOptions{});
  return se.evaluate(plan, file);
}

nlohmann::json to_json(const SearchPlan& p, const std::vector<std::string>& block_names) {
  using nlohmann::json;
  json stages = json::array();
  for (const auto& st : p.stages) {
    json ops = json::array();
    for (const auto& d : st.decisions) ops.push_back({{"op", d.op}, {"strategy", d.strategy}, {"kind", d.kind}});
    json names = json::array();
    for (int b = st.first_block; b <= st.last_block && b < int(block_names.size()); ++b) names.push_back(block_names[std::size_t(b)]);
    stages.push_back({{"blocks", {st.first_block, st.last_block}},
                      {"block_names", names},
                      {"submesh", {st.submesh.hosts, st.submesh.gpus}},
                      {"logical_mesh", {st.mesh0, st.mesh1}},
                      {"latency_s", st.latency},
                      {"memory_per_gpu_bytes", st.memory},
                      {"weight_memory_bytes", st.weight_memory},
                      {"activation_memory_bytes", st.activation_memory},
                      {"strategy_counts", st.kind_counts},
                      {"ops", ops}});
  }
  json out{{"format", "clustersim-plan"}, {"version", 1}, {"method", p.method},
           {"micro_batches", p.micro_batches}, {"samples_per_micro_batch", p.samples_per_micro_batch},
           {"iteration_time_s", p.iteration_time}, {"stages", stages}};
  if (p.method == "manual")
    out["manual"] = {{"dp", p.dp}, {"tp", p.tp}, {"pp", p.pp}, {"schedule", p.schedule}, {"zero", p.zero}};
  return out;
}

SearchPlan plan_from_json(const nlohmann::json& doc, const std::string& file) {
  Diagnostics diag(file);
  SearchPlan p;
  ObjectReader r(doc, "", diag,
                 {"format", "version", "method", "micro_batches", "samples_per_micro_batch", "iteration_time_s", "stages", "manual"});
  if (!r.valid()) diag.throw_if_errors();
  if (auto f = r.choice("format", {"clustersim-plan"})) (void)f;
  (void)r.integer("version", 1, 1);
  p.method = r.choice("method", {"alpa", "manual"}).value_or("alpa");
  p.samples_per_micro_batch = r.integer("samples_per_micro_batch", 1, INT64_MAX).value_or(1);
  p.micro_batches = r.integer("micro_batches", 1, INT64_MAX, false).value_or(0);
  p.iteration_time = r.number("iteration_time_s", 0, INFINITY, false).value_or(0);
  if (const auto* m = r.object("manual", false)) {
    ObjectReader mr(*m, "/manual", diag, {"dp", "tp", "pp", "schedule", "zero"});
    p.dp = mr.integer("dp", 1, INT64_MAX).value_or(0);
    p.tp = mr.integer("tp", 1, INT64_MAX).value_or(0);
    p.pp = mr.integer("pp", 1, INT64_MAX).value_or(0);
    // Both optional: plan files from before the schedule and ZeRO knobs are 1F1B, ZeRO 0.
    p.schedule = mr.choice("schedule", {"1f1b", "gpipe"}, false).value_or("1f1b");
    p.zero = int(mr.integer("zero", 0, 3, false).value_or(0));
  }
  const auto* stages = r.get("stages");
  if (!stages || !stages->is_array() || stages->empty()) {
    diag.error("/stages", "expected a non-empty array of stages");
    diag.throw_if_errors();
  }
  auto pair = [&](const nlohmann::json& j, const std::string& path, i64& a, i64& b) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_number_integer() || !j[1].is_number_integer()) {
      diag.error(path, "expected two integers, got " + describe(j));
      return;
    }
    a = j[0].get<i64>();
    b = j[1].get<i64>();
  };
  for (std::size_t i = 0; i < stages->size(); ++i) {
    const std::string path = json_path("/stages", i);
    ObjectReader sr((*stages)[i], path, diag,
                    {"blocks", "block_names", "submesh", "logical_mesh", "latency_s", "memory_per_gpu_bytes",
                     "weight_memory_bytes", "activation_memory_bytes", "strategy_counts", "ops"});
    if (!sr.valid()) continue;
    PlanStage st;
    i64 a = 0, b = 0;
    if (const auto* j = sr.get("blocks")) pair(*j, sr.path("blocks"), a, b);
    else diag.error(sr.path("blocks"), "required");
    st.first_block = int(a);
    st.last_block = int(b);
    if (const auto* j = sr.get("submesh")) pair(*j, sr.path("submesh"), st.submesh.hosts, st.submesh.gpus);
    else diag.error(sr.path("submesh"), "required");
    if (const auto* j = sr.get("logical_mesh")) pair(*j, sr.path("logical_mesh"), st.mesh0, st.mesh1);
    else diag.error(sr.path("logical_mesh"), "required");
    const auto* ops = sr.get("ops");
    if (!ops || !ops->is_array()) {
      diag.error(sr.path("ops"), "expected an array of {\"op\", \"strategy\"} objects");
      continue;
    }
    for (std::size_t k = 0; k < ops->size(); ++k) {
      ObjectReader orr((*ops)[k], json_path(sr.path("ops"), k), diag, {"op", "strategy", "kind"});
      OpDecision d;
      d.op = orr.string("op").value_or("");
      d.strategy = orr.string("strategy").value_or("");
      d.kind = orr.string("kind", false).value_or("");
      st.decisions.push_back(std::move(d));
    }
    p.stages.push_back(std::move(st));
  }
  diag.throw_if_errors();
  return p;
}

}  // namespace clustersim::search

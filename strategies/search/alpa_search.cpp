// Lazy exact stage latencies. A candidate's value is exact when the memory-free ILP
// optimum fits with its micro-batches in flight, or when the cache implies the
// memory-constrained optimum; otherwise a lower bound (the memory-free optimum, or the
// optimum with fewer micro-batches in flight), until the DP picks the candidate: then
// its memory-constrained ILPs are solved and the DP runs again. When the DP's plan uses
// exact values only, it is optimal: every other plan costs at least its lower-bound
// total. Most memory-tight ILPs (the slow ones) are never needed.
//
// Micro-batch counts: the first DP round of each count gives a lower bound of its best
// plan. Counts are then refined in ascending order of that bound, and a count whose
// bound (which only grows with refinement) reaches the best plan found is dropped: the
// result is the same as refining every count to the end.
#include "strategies/search/alpa_search.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "strategies/rules.hpp"
#include "strategies/search/lowering.hpp"

namespace clustersim::search {
namespace {

using i64 = std::int64_t;

std::vector<std::pair<i64, i64>> logical_meshes(const Submesh& sub) {
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

// Stage j (counted from 0) of n keeps 1F1B's warm-up of micro-batches in flight.
int in_flight(i64 B, i64 n, i64 j) { return int(micro_batches_in_flight(Schedule::one_f_one_b, n, 1, B, j)); }

class AlpaSearch {
 public:
  explicit AlpaSearch(SearchContext& ctx) : ctx_(ctx), subs_(submesh_shapes(ctx.cluster().nodes, ctx.cluster().gpus_per_node, ctx.options().submeshes)) {
    ctx_.timings.submeshes = int(subs_.size());
  }

  SearchPlan run() {
    SearchPlan best;
    best.method = "alpa";
    std::vector<PerB> all;
    for (i64 B : ctx_.micro_batch_counts()) {
      PerB pb;
      pb.B = B;
      pb.samples = ctx_.scenario().training.global_batch / B;
      pb.g = &ctx_.graph(pb.samples);
      pb.ord = SearchContext::order(*pb.g);
      const auto t0 = Clock::now();
      std::vector<double> flops, cut;
      for (int b : pb.ord) {
        flops.push_back(pb.g->blocks[std::size_t(b)].fwd_flops());
        cut.push_back(pb.g->blocks[std::size_t(b)].output_bytes);
      }
      pb.starts = cluster_layers(flops, cut, std::min<int>(ctx_.options().layer_clusters, int(pb.ord.size())));
      pb.K = int(pb.starts.size());
      ctx_.timings.clustering_s += seconds_since(t0);
      all.push_back(std::move(pb));
    }
    // Progress: 2 steps per micro-batch count, its first DP round and its refinement.
    const std::size_t steps = 2 * all.size();
    const auto report = [&](std::size_t done) {
      if (ctx_.options().progress) ctx_.options().progress({"alpa", done, steps});
    };
    for (std::size_t i = 0; i < all.size(); ++i) {
      report(i);
      round(all[i]);
    }
    std::vector<std::size_t> idx(all.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(),
                     [&](std::size_t x, std::size_t y) { return all[x].res.iteration_time < all[y].res.iteration_time; });
    const PerB* winner = nullptr;
    for (std::size_t n = 0; n < idx.size(); ++n) {
      report(all.size() + n);
      PerB& pb = all[idx[n]];
      while (pb.res.feasible && !pb.exact && !(winner && pb.res.iteration_time >= winner->res.iteration_time)) {
        ++ctx_.timings.dp_rounds;
        round(pb);
      }
      if (ctx_.options().trace)
        ctx_.timings.micro_batch_rounds.push_back(
            {pb.B, !pb.res.feasible ? "infeasible" : pb.exact ? "exact" : "bound", pb.res.iteration_time, pb.refined.size()});
      if (!pb.res.feasible || !pb.exact) continue;
      if (winner && pb.res.iteration_time >= winner->res.iteration_time) continue;
      winner = &pb;
    }
    report(steps);
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
      const int inflight = in_flight(pb.B, n, j);
      const IntraOpResult& r = ctx_.stage(*pb.g, blocks, pb.B, sm, d0, d1, inflight, StrategySpace::full);
      best.stages.push_back(ctx_.make_stage(r, a, z, sm, d0, d1, inflight));
    }
    return best;
  }

 private:
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

  Value value(PerB& pb, int first, int last, int sub, int from_end) {
    const CandKey ck{first, last, sub, from_end};
    if (auto it = pb.memo.find(ck); it != pb.memo.end()) return it->second;
    // The stage from_end stages before the last: index 0 of a from_end-stage pipeline.
    const int inflight = in_flight(pb.B, from_end, 0);
    const auto [a, z] = pb.range(first, last);
    const std::vector<int> blocks(pb.ord.begin() + a, pb.ord.begin() + z + 1);
    const Submesh& sm = subs_[std::size_t(sub)];
    const bool refine = !ctx_.options().lazy || pb.refined.count(ck) > 0;
    const PrecisionRules& rules = ctx_.rules();
    Value best_v;
    IntraOpProblem floor = ctx_.problem(*pb.g, blocks, LogicalMesh{}, pb.B, inflight, StrategySpace::full);
    if (!ctx_.fits(memory_floor(floor, sm.devices()))) {  // exact: no choice fits
      pb.memo[ck] = best_v;
      return best_v;
    }
    for (auto [d0, d1] : logical_meshes(sm)) {
      ++ctx_.timings.candidates;
      const IntraOpResult& u = ctx_.stage(*pb.g, blocks, pb.B, sm, d0, d1, 0, StrategySpace::full);
      if (!u.feasible) continue;  // no sharding divides: infeasible at any budget
      Value v{u.latency, true, {d0, d1}};
      if (!ctx_.fits(u.least_weight_memory + inflight * u.least_activation_memory + u.temporary_memory)) {
        v.t = INFINITY;  // even the least memory of every op overflows: exact
      } else if (!ctx_.fits(u.memory(inflight, rules).total())) {
        const SearchContext::Key k{blocks, pb.g->micro_batch, sm.hosts, sm.gpus, d0, d1, int(StrategySpace::full)};
        double lower = 0;
        if (const IntraOpResult* r = ctx_.reusable(ctx_.entries(k), inflight, &lower)) {
          v.t = r->feasible ? r->latency : INFINITY;
        } else if (refine) {
          const IntraOpResult& r2 = ctx_.stage(*pb.g, blocks, pb.B, sm, d0, d1, inflight, StrategySpace::full);
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
    ip.devices = ctx_.cluster().total_gpus();
    ip.micro_batches = pb.B;
    auto latency = [&](int first, int last, int sub, int from_end) { return value(pb, first, last, sub, from_end).t; };
    const auto t0 = Clock::now();
    const double intra_before = ctx_.timings.intra_op_s;
    pb.res = solve_inter_op(ip, latency);
    ctx_.timings.t_max_tried += pb.res.t_max_tried;
    ctx_.timings.inter_op_s += seconds_since(t0) - (ctx_.timings.intra_op_s - intra_before);
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

  SearchContext& ctx_;
  std::vector<Submesh> subs_;
};

}  // namespace

SearchPlan alpa_search(SearchContext& ctx) { return AlpaSearch(ctx).run(); }

}  // namespace clustersim::search

// What the Alpa-style search, the manual baseline and plan evaluation share for one
// scenario: the resolved cluster, the precision rules, the memory budget, one graph per
// micro-batch size, and the cache of intra-op results.
//
// Reuse: an intra-op result depends only on (the block sequence of the stage, the
// micro-batch size, the submesh, the logical mesh, the strategy space and its ZeRO
// level) and on the number of micro-batches in flight through the memory constraint.
// With identical transformer layers most candidates share a key. For one key we keep
// the solutions found at increasing in-flight counts s0: a solution optimal at s0 that
// still fits at s > s0 is optimal at s too (the feasible set only shrinks as s grows),
// and infeasibility at s0 implies infeasibility at s. So the ILP stays exact.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/precision.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/search/search.hpp"

namespace clustersim::search {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t);

class SearchContext {
 public:
  SearchContext(const Scenario& s, const SearchOptions& o);

  const Scenario& scenario() const { return s_; }
  const SearchOptions& options() const { return o_; }
  const ClusterModel& cluster() const { return cluster_; }
  const PrecisionRules& rules() const { return rules_; }
  Bytes budget() const { return budget_; }
  bool fits(Bytes memory) const { return memory <= budget_ * (1 + 1e-12); }

  const ModelGraph& graph(std::int64_t samples);
  // The model's blocks in execution order (pre, layers, post).
  static std::vector<int> order(const ModelGraph& g);
  std::vector<std::string> block_names();
  // The micro-batch counts to try: the options' or every power of two dividing the batch.
  std::vector<std::int64_t> micro_batch_counts() const;

  // `recompute`: the manual space's recompute knob; absent, the scenario's training.recompute.
  IntraOpProblem problem(const ModelGraph& g, std::vector<int> blocks, const LogicalMesh& mesh, std::int64_t B,
                         double inflight, StrategySpace space, int zero = 0,
                         std::optional<Recompute> recompute = std::nullopt) const;

  using Entries = std::vector<std::pair<int, IntraOpResult>>;  // per key, by in-flight count
  struct Key {
    std::vector<int> blocks;
    std::int64_t samples, hosts, gpus, d0, d1;
    int space;
    int zero = 0;  // the manual space's ZeRO level
    int recompute = -1;  // the manual space's recompute knob; -1: the scenario's
    auto tie() const { return std::tie(blocks, samples, hosts, gpus, d0, d1, space, zero, recompute); }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
  };
  Entries& entries(const Key& k) { return cache_[k]; }
  // The cached result that is exact for `inflight` micro-batches in flight, else nullptr;
  // `lower` (optional) receives the latency at the largest smaller in-flight count
  // solved, a lower bound.
  const IntraOpResult* reusable(const Entries& entries, int inflight, double* lower = nullptr) const;
  // The intra-op optimum of a stage candidate with `inflight` micro-batches live
  // (0: the memory-free problem), solved or reused.
  const IntraOpResult& stage(const ModelGraph& g, const std::vector<int>& blocks, std::int64_t B, const Submesh& sub,
                             std::int64_t d0, std::int64_t d1, int inflight, StrategySpace space, int zero = 0,
                             std::optional<Recompute> recompute = std::nullopt);

  PlanStage make_stage(const IntraOpResult& r, int first, int last, const Submesh& sub, std::int64_t d0, std::int64_t d1,
                       double inflight) const;

  SearchTimings timings;

 private:
  const Scenario& s_;
  SearchOptions o_;
  ClusterModel cluster_;
  PrecisionRules rules_;
  IlpOptions ilp_;
  double budget_ = 0;
  std::map<std::int64_t, ModelGraph> graphs_;
  std::map<Key, Entries> cache_;
};

}  // namespace clustersim::search

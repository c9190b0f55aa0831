// The whole plan search for a scenario: layer clustering, the inter-op DP over stage
// candidates whose latencies come from intra-op ILPs (cached for structurally identical
// candidates), and the manual baseline (dp x tp x pp x micro-batches x schedule x ZeRO,
// Megatron's shardings) under the same cost model. Also the plan file (JSON) both produce and
// `clustersim run --plan` evaluates.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"
#include "strategies/search/ilp.hpp"
#include "strategies/search/inter_op.hpp"
#include "strategies/search/intra_op.hpp"

namespace clustersim::search {

struct SearchOptions {
  int layer_clusters = 8;  // K: layers after clustering (capped by the model's blocks)
  // Micro-batch counts B to try; empty: the powers of two from 4 up to the global
  // batch that divide it.
  std::vector<std::int64_t> micro_batch_counts;
  IlpOptions ilp = default_search_ilp();
  static IlpOptions default_search_ilp() {
    IlpOptions o;
    o.time_limit_s = 5;  // per candidate; hitting it is counted and reported
    return o;
  }
  bool manual_baseline = true;
  // Solve memory-constrained ILPs only for the candidates the DP picks (exact; see
  // search.cpp). false solves every candidate (for tests).
  bool lazy = true;
  void validate() const;  // throws InputError naming the bad value
};

struct PlanStage {
  int first_block = 0, last_block = 0;  // positions in the model's block order, inclusive
  Submesh submesh;
  std::int64_t mesh0 = 1, mesh1 = 1;    // logical mesh
  Seconds latency = 0;                  // per micro-batch
  Bytes memory = 0;                     // per GPU: weights + in-flight activations
  Bytes weight_memory = 0, activation_memory = 0;
  std::map<std::string, int> kind_counts;
  std::vector<OpDecision> decisions;
};

struct SearchPlan {
  std::string method;                   // "alpa" or "manual"
  std::int64_t micro_batches = 0;       // B
  std::int64_t samples_per_micro_batch = 0;
  std::int64_t dp = 0, tp = 0, pp = 0;  // the knobs, for manual plans
  // Manual plans: "1f1b" (stage j of pp keeps pp - j micro-batches in flight) or "gpipe"
  // (every stage keeps all B), and the ZeRO level (0-3) of the weight update over dp.
  // Alpa-style plans are 1F1B; their ZeRO levels are per op, in the strategy names.
  std::string schedule = "1f1b";
  int zero = 0;
  std::vector<PlanStage> stages;
  Seconds iteration_time = 0;
  bool feasible = false;
};

struct SearchTimings {
  double clustering_s = 0, intra_op_s = 0, inter_op_s = 0, manual_s = 0, total_s = 0;
  int ilp_solves = 0, cache_hits = 0, candidates = 0;
  int cbc_solves = 0;  // of ilp_solves, those CBC solved (the rest: the frontier DP)
  int unproven = 0;
  int dp_rounds = 0;  // extra DP runs after refining lower-bound stage latencies  // ILPs stopped by the time limit with a feasible, unproven solution
};

struct SearchReport {
  SearchPlan alpa, manual;
  SearchTimings timings;
  std::vector<std::string> block_names;  // model order
  double speedup() const { return (alpa.feasible && manual.feasible) ? manual.iteration_time / alpa.iteration_time : 0; }
};

SearchReport run_search(const Scenario& s, const SearchOptions& options = {});

// Re-evaluates a plan (each stage's recorded strategies) under the scenario's cost
// model; throws InputError naming the plan file and JSON path when the plan does not
// match the model or cluster.
SearchPlan evaluate_plan(const Scenario& s, const SearchPlan& plan, const std::string& file);

nlohmann::json to_json(const SearchPlan& p, const std::vector<std::string>& block_names);
// Reads a plan file written by to_json; problems are reported with file and JSON path.
SearchPlan plan_from_json(const nlohmann::json& doc, const std::string& file);

}  // namespace clustersim::search

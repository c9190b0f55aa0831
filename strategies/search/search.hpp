// The whole plan search for a scenario: layer clustering, the inter-op DP over stage
// candidates whose latencies come from intra-op ILPs (alpa_search.cpp), and the manual
// baseline (manual.cpp: the manual plan space of strategies/plan_space.hpp costed in
// Megatron's shardings) under the same cost model. Also the plan file (plan_file.cpp)
// both produce and `clustersim run --plan` evaluates, and the plan's Prediction
// (predict.cpp: the same typed answer as the estimator's and the simulator's).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"
#include "strategies/prediction.hpp"
#include "strategies/search/ilp.hpp"
#include "strategies/search/inter_op.hpp"
#include "strategies/search/intra_op.hpp"

namespace clustersim::search {

// How far the search has come: `done` of `total` steps of a phase ("alpa": the first
// DP round of each micro-batch count, then the refinement of each; "manual": the
// manual plans). The CLI turns it into a progress bar; the library prints nothing.
struct SearchProgress {
  std::string phase;
  std::size_t done = 0, total = 0;
};

// The search's default micro-batch counts B: every power of two from 1 to the global
// batch that divides it.
std::vector<std::int64_t> default_micro_batch_counts(std::int64_t global_batch);

struct SearchOptions {
  int layer_clusters = 8;  // K: layers after clustering (capped by the model's blocks)
  // Whole-host submeshes the inter-op DP offers: Alpa's default, powers of two, keeps
  // the ILPs and the DP's submesh loop logarithmic in the hosts (issue 16); `all` is
  // every host count.
  SubmeshSpace submeshes = SubmeshSpace::power_of_two;
  // Micro-batch counts B to try; empty: the powers of two from 1 up to the global batch
  // that divide it.
  std::vector<std::int64_t> micro_batch_counts;
  IlpOptions ilp = default_search_ilp();
  static IlpOptions default_search_ilp() {
    IlpOptions o;
    o.time_limit_s = 5;  // per candidate; hitting it is counted and reported
    return o;
  }
  bool manual_baseline = true;
  // Solve memory-constrained ILPs only for the candidates the DP picks (exact; see
  // alpa_search.cpp). false solves every candidate (for tests).
  bool lazy = true;
  // Record every ILP solve and every micro-batch count's outcome in the report's trace.
  bool trace = false;
  // Called as the search advances (optional).
  std::function<void(const SearchProgress&)> progress;
  // Throws InputError naming the command-line option of a bad value.
  void validate() const;
};

struct PlanStage {
  int first_block = 0, last_block = 0;  // positions in the model's block order, inclusive
  Submesh submesh;
  std::int64_t mesh0 = 1, mesh1 = 1;    // logical mesh
  Seconds latency = 0;                  // per micro-batch, per-iteration work amortised (what the search minimises)
  StageCosts costs;                     // what latency is made of, on one device
  double hardware_flops = 0;            // per micro-batch on one device (recompute counted)
  double params = 0;                    // held per device (before ZeRO)
  double in_flight = 1;                 // micro-batches whose activations are live at the peak
  // Per GPU at the peak. Manual plans: rules::stage_memory (exact: the estimator's).
  // Alpa-style plans: the ILP's rows plus a lower bound of the temporary memory
  // (intra_op.hpp), so a lower bound.
  MemoryBreakdown memory_breakdown;
  Bytes memory = 0;                     // memory_breakdown.total()
  Bytes weight_memory = 0, activation_memory = 0;  // the ILP's rows: ops' weights, kept activations of one micro-batch
  std::map<std::string, int> kind_counts;
  std::vector<OpDecision> decisions;
};

struct SearchPlan {
  std::string method;                   // "alpa" or "manual"
  std::int64_t micro_batches = 0;       // B
  std::int64_t samples_per_micro_batch = 0;
  std::int64_t dp = 0, tp = 0, pp = 0;  // the knobs, for manual plans
  // Manual plans: "1f1b" (stage j of pp keeps min(B, pp - j) micro-batches in flight) or
  // "gpipe" (every stage keeps all B), and the ZeRO level (0-3) of the weight update
  // over dp. Alpa-style plans are 1F1B; their ZeRO levels are per op, in the strategy names.
  std::string schedule = "1f1b";
  int zero = 0;
  // Manual plans: the recompute mode the plan was costed with (a knob of the manual
  // space). Absent (Alpa-style plans, plan files from before the knob): the scenario's
  // training.recompute.
  std::optional<Recompute> recompute;
  std::vector<PlanStage> stages;
  // The search's objective: Eq. 2 (rules::pipeline_makespan) over the stage latencies.
  Seconds iteration_time = 0;
  bool feasible = false;
  // predict_plan() of this plan: the stages' per-micro-batch work pipelined
  // (rules::pipeline_makespan), the per-iteration work after the last micro-batch, and
  // the pipeline sends. run_search, evaluate_plan and cost_manual_plan fill it (method
  // "search"); empty otherwise.
  Prediction prediction;
};

// One intra-op ILP solve (SearchOptions::trace).
struct IlpTrace {
  std::size_t blocks = 0;
  std::int64_t samples = 0;
  Submesh submesh;
  std::int64_t d0 = 1, d1 = 1;
  int inflight = 0;
  bool feasible = false;
  Seconds latency = 0;
  int nodes = 0, leaders = 0, edges = 0;
  double seconds = 0;
  IlpResult::DpStats dp;
};
// One micro-batch count's outcome in the Alpa-style search (SearchOptions::trace).
struct MicroBatchTrace {
  std::int64_t micro_batches = 0;
  std::string outcome;  // "infeasible", "exact" or "bound"
  Seconds iteration_time = 0;
  std::size_t refinements = 0;
};

struct SearchTimings {
  double clustering_s = 0, intra_op_s = 0, inter_op_s = 0, manual_s = 0, total_s = 0;
  int ilp_solves = 0, cache_hits = 0, candidates = 0;
  int cbc_solves = 0;  // of ilp_solves, those CBC solved (the rest: the frontier DP)
  int unproven = 0;    // ILPs stopped by the time limit with a feasible, unproven solution
  int dp_rounds = 0;   // extra DP runs after refining lower-bound stage latencies
  int submeshes = 0;   // submesh shapes the inter-op DP offers
  long t_max_tried = 0;  // inter-op DP passes over t_max, all rounds
  double peak_rss_bytes = 0;  // the process's peak resident memory at the end (getrusage ru_maxrss)
  std::vector<IlpTrace> ilps;                   // SearchOptions::trace only
  std::vector<MicroBatchTrace> micro_batch_rounds;  // SearchOptions::trace only
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

// The scenario's own manual plan (dp, tp, pp, schedule, ZeRO; training.micro_batch and
// training.recompute) costed in the search's Megatron space, as the manual baseline
// costs it. Throws
// InputError for what that space cannot express (sequence parallelism, interleaving,
// expert parallelism other than over dp, tp beyond a node).
SearchPlan cost_manual_plan(const Scenario& s);

// The Prediction of a plan as run_search, evaluate_plan or cost_manual_plan return it
// (its stages carry their costs): method "search", the same fields as the estimator's.
Prediction predict_plan(const Scenario& s, const SearchPlan& plan);

nlohmann::json to_json(const SearchPlan& p, const std::vector<std::string>& block_names);
// Reads a plan file written by to_json; problems are reported with file and JSON path.
SearchPlan plan_from_json(const nlohmann::json& doc, const std::string& file);

}  // namespace clustersim::search

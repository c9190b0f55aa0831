// "What is the best plan for this model on this cluster": every manual plan of
// strategies/plan_space (dp, tp, pp, schedule with interleaved virtual stages, ZeRO,
// sequence parallelism, recompute, micro-batch size), the Alpa-style search's plan and
// the scenario's own plan, each as the Prediction `clustersim run` prints for it (the
// estimator for manual knobs, the search's evaluation of an Alpa-style plan, which
// `run --plan` prints), ranked by iteration time. `clustersim rank` prints it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"
#include "strategies/prediction.hpp"
#include "strategies/search/search.hpp"

namespace clustersim {

struct RankOptions {
  std::size_t top = 10;  // rows of fitting plans to keep (>= 1)
  bool alpa = true;      // include the Alpa-style search's plan
  // The Alpa-style search's options (its manual baseline is not run: the manual knobs
  // are ranked here) and the micro-batch counts of both: empty, the search's default
  // (powers of two), the manual space adding micro-batches of 1 and 2 samples per replica.
  search::SearchOptions search;
  // Progress: phase "manual" (plans estimated), then the search's phases.
  std::function<void(const search::SearchProgress&)> progress;
  void validate() const;  // InputError naming the command-line option
};

struct RankedPlan {
  std::string source;  // "manual", "alpa" or "scenario"
  std::string label;   // "dp 8 x tp 2 x pp 1, 1F1B, ZeRO-1, SP, recompute selective, micro-batch 4 x 16"
  std::size_t rank = 0;  // 1 for the fastest fitting plan; 0 for a plan that does not fit
  Prediction prediction;
  // Manual plans: the scenario's "plan" and "training" keys that give this plan
  // ({"plan": {...}, "training": {"micro_batch", "recompute"}}); the Alpa-style plan:
  // its plan file (what `clustersim run --plan` reads).
  nlohmann::json plan;
};

struct Ranking {
  // The `top` fastest fitting plans in rank order, then the scenario's own plan and the
  // Alpa-style plan where they are not among them.
  std::vector<RankedPlan> rows;
  std::size_t considered = 0;   // plans costed: manual, Alpa-style, the scenario's own
  std::size_t not_fitting = 0;  // of them, those over the GPU memory
  std::size_t manual_space = 0; // manual knob sets enumerated
  std::string alpa_note;        // why there is no Alpa-style row, if there is none
  bool own_in_space = false;    // the scenario's own plan is one of the manual knob sets
};

Ranking rank_plans(const Scenario& s, const RankOptions& options = {});

}  // namespace clustersim

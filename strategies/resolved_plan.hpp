// A scenario's plan resolved to what a consumer can evaluate. A scenario names its plan
// by manual knobs (dp, tp, pp, ...), by a search ({"search": "alpa" | "manual"}) or by a
// plan file ({"file": "x.plan.json"}, relative to the scenario file). run, simulate and
// sweep all resolve it here, so none of them falls back to dp = tp = pp = 1.
#pragma once
#include <optional>
#include <string>

#include "scenarios/scenario.hpp"
#include "strategies/prediction.hpp"
#include "strategies/search/search.hpp"

namespace clustersim {

struct ResolvedPlan {
  // The scenario with manual knobs: its own, or those of a manual plan found by the
  // search or read from a plan file. Empty for an Alpa-style plan (per-op shardings,
  // which manual knobs cannot express).
  std::optional<Scenario> manual;
  // The plan the search found or the file holds (absent for manual knobs).
  std::optional<search::SearchPlan> searched;
  std::string plan_file;  // the resolved path, for {"file": ...}
  std::vector<std::string> block_names;  // for printing a searched plan
};

// Runs the search or reads the plan file when the scenario asks for it. Errors name
// the scenario file and /plan/search or /plan/file (a missing or unreadable plan file,
// no fitting plan, a manual plan whose micro-batch does not split over dp).
ResolvedPlan resolve_plan(const Scenario& s);

// The analytical prediction of a scenario whatever names its plan: the estimator for
// manual knobs (given, found by the search or read from a plan file), the search's
// evaluation of an Alpa-style plan (per-op shardings the estimator cannot express).
Prediction predict_resolved(const ResolvedPlan& r);
Prediction predict_scenario(const Scenario& s);

// The path of a scenario's {"file": ...} plan: relative paths start at the scenario's folder.
std::string plan_file_path(const Scenario& s);

// The scenario with the manual knobs of a manual search plan (method "manual").
// Throws InputError at `file` / `path` when its micro-batch does not split over dp.
Scenario with_manual_plan(const Scenario& s, const search::SearchPlan& p, const std::string& file,
                          const std::string& path);

}  // namespace clustersim

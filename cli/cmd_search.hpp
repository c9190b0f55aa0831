// Entry points of cli/cmd_search.cpp that `clustersim run` uses: evaluating a plan file
// against a scenario.
#pragma once
#include <string>

#include "scenarios/scenario.hpp"

namespace clustersim::cli {

// Evaluates the plan in `plan_file` under scenario `s` and prints it (JSON when `json`).
// Returns the exit code; bad plan files throw InputError.
int run_plan_file(const Scenario& s, const std::string& plan_file, bool json);

// For a scenario whose plan is {"search": ...} or {"file": ...}: runs the search
// (default options) and prints the chosen plan, or evaluates the plan file (a relative
// path is taken from the scenario file's folder).
int run_searched_plan(const Scenario& s, bool json);

}  // namespace clustersim::cli

// Entry points of cli/cmd_search.cpp that `clustersim run` uses: evaluating a plan file
// against a scenario.
#pragma once
#include <string>

#include "scenarios/scenario.hpp"

namespace clustersim::cli {

// Evaluates the plan in `plan_file` under scenario `s` and prints it (JSON when `json`).
// Returns the exit code; bad plan files throw InputError.
int run_plan_file(const Scenario& s, const std::string& plan_file, bool json);

}  // namespace clustersim::cli

// The glue between the commands that compute (run, simulate, search, sweep) and the
// results database: turns a scenario and a command's JSON output into a stored run
// with its hardware profile and provenance.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "results/store.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/serving.hpp"

namespace clustersim::runner {

// The file --db uses when given without a name.
inline constexpr const char* default_db_file = "clustersim.db";

// Builds the record of one run. `result` is the command's JSON output; its "tool"
// object may carry "simgrid_version" and "simgrid_config" (the simulator's), which are
// stored as provenance; for method "simulated" the loaded SimGrid version is recorded
// when the output has none.
results::RunRecord make_run_record(const Scenario& s, const nlohmann::json& result, std::string_view method);
// The same, reusing the scenario's canonical JSON when the caller has it.
results::RunRecord make_run_record(const Scenario& s, nlohmann::json canonical, nlohmann::json result,
                                   std::string_view method);

// Stores one computed run in `db_file` (created when missing) in one transaction.
// Returns the run id. Throws InputError when the file is not a usable database.
std::int64_t store_run(const std::string& db_file, const Scenario& s, const nlohmann::json& result,
                       std::string_view method);

// Stores a `clustersim serve` run (method "served"): the serving scenario's canonical
// JSON and the command's JSON output, whose "plan" is the replica layout and scheduler.
std::int64_t store_serving_run(const std::string& db_file, const ServingScenario& s, const nlohmann::json& result);

}  // namespace clustersim::runner

// The model and cluster sections of a scenario, parsed on their own: a serving
// scenario (scenarios/serving.hpp) has the same two sections as a training one, and
// reads them with the same code so that "valid" means one thing.
#pragma once
#include <nlohmann/json.hpp>

#include "scenarios/diagnostics.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

// `j` is the value at /model (resp. /cluster); problems go to `diag` under that path.
void parse_model_section(const nlohmann::json& j, ModelSpec& m, Diagnostics& diag);
void parse_cluster_section(const nlohmann::json& j, ClusterSpec& c, Diagnostics& diag);

}  // namespace clustersim

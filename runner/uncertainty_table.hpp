// Builds the uncertainty table (strategies/uncertainty) from the validation sets
// (strategies/validation): every case predicted by the estimator, and the one-node cases
// also by the SimGrid replay; one signed residual real / predicted - 1 per prediction
// that fits in memory, filed under the prediction's regime. `clustersim calibrate uncertainty` writes it to
// data/uncertainty.json, which the binary embeds.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "strategies/uncertainty.hpp"

namespace clustersim::runner {

struct UncertaintyBuild {
  UncertaintyTable table;
  nlohmann::json cases;  // per prediction: dataset, id, regime, predicted, real, residual
};
UncertaintyBuild build_uncertainty_table(const std::string& root, bool simulate);
// The document `calibrate uncertainty` writes: the table with its cases, byte-stable.
std::string uncertainty_document(const UncertaintyBuild& b);

}  // namespace clustersim::runner

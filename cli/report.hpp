// Human-readable report of an estimate.
#pragma once
#include <string>

#include "scenarios/scenario.hpp"
#include "strategies/estimator.hpp"

namespace clustersim {
std::string format_report(const Scenario& s, const Estimator& est, const Prediction& e);
}

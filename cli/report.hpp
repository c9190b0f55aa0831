// Human-readable report of an estimate.
#pragma once
#include <string>

#include "scenarios/scenario.hpp"
#include "strategies/estimator.hpp"

namespace clustersim {
std::string format_report(const Scenario& s, const Estimator& est, const Prediction& e);
// "3.17 s to 5.58 s (89% interval, 18 validation runs of transferred/many-nodes/analytical)",
// or why there is none: how far the iteration time can be trusted (strategies/uncertainty).
std::string format_interval(const Interval& i);
}

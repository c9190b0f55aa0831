// The manual plan space: every (dp, tp, pp, micro-batch, schedule, virtual stages)
// that tiles the cluster and passes the scenario's consistency rules.
#pragma once
#include <cstdint>
#include <vector>

#include "scenarios/scenario.hpp"

namespace clustersim {

struct PlanPoint {
  PlanSpec plan;
  std::int64_t micro_batch = 1;
};

struct PlanSpaceOptions {
  bool vary_schedule = true;     // gpipe, 1f1b, interleaved (pp > 1)
  bool vary_micro_batch = true;  // every divisor of the per-replica batch
};

// Other plan fields (zero, sequence_parallel, ep, overlap) are taken from `base`.
std::vector<PlanPoint> enumerate_plans(const Scenario& base, const PlanSpaceOptions& options = {});

}  // namespace clustersim

// The manual plan space: every (dp, tp, pp, micro-batch, schedule, virtual stages, ZeRO)
// that tiles the cluster and passes the scenario's consistency rules. The benchmarks
// and the search's manual baseline enumerate it.
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
  // With vary_schedule, the schedules to try for pp > 1, in this order (interleaved:
  // every virtual stage count that divides the layers); empty: gpipe, 1f1b, interleaved.
  std::vector<Schedule> schedules;
  bool vary_micro_batch = true;  // every divisor of the per-replica batch
  // Non-empty: instead of every micro-batch size, these micro-batch counts per iteration
  // (B), each where the global batch splits into dp x B micro-batches.
  std::vector<std::int64_t> micro_batch_counts;
  bool vary_zero = false;  // ZeRO 0-3 (levels > 0 with dp > 1); else base's
};

// Other plan fields (sequence_parallel, ep, overlap, and zero unless varied) are taken
// from `base`. The order is deterministic: tp, pp, micro-batch size ascending, then the
// schedules in order, then ZeRO ascending.
std::vector<PlanPoint> enumerate_plans(const Scenario& base, const PlanSpaceOptions& options = {});

}  // namespace clustersim

// The manual plan space: every (dp, tp, pp, cp, micro-batch, schedule, virtual stages, ZeRO,
// sequence parallelism, recompute) that tiles the cluster and passes the scenario's
// consistency rules. The benchmarks, the search's manual baseline and `clustersim rank`
// enumerate it: the one place where the manual knobs are listed.
#pragma once
#include <cstdint>
#include <vector>

#include "scenarios/scenario.hpp"

namespace clustersim {

struct PlanPoint {
  PlanSpec plan;
  std::int64_t micro_batch = 1;
  Recompute recompute = Recompute::none;  // training.recompute of this point
};

struct PlanSpaceOptions {
  bool vary_schedule = true;     // gpipe, 1f1b, interleaved, dualpipe (pp > 1, where valid)
  // With vary_schedule, the schedules to try for pp > 1, in this order (interleaved:
  // every virtual stage count that divides the layers); empty: gpipe, 1f1b, interleaved and,
  // for MoE models or a scenario that runs it, dualpipe (even pp, an even m >= 2 pp, ZeRO <= 2:
  // check_consistency keeps the valid ones).
  std::vector<Schedule> schedules;
  bool vary_micro_batch = true;  // every divisor of the per-replica batch
  // Non-empty: instead of every micro-batch size, these micro-batch counts per iteration
  // (B), each where the global batch splits into dp x B micro-batches.
  std::vector<std::int64_t> micro_batch_counts;
  // With micro_batch_counts: also the micro-batch sizes 1 and 2 per replica (B = the
  // replica's batch and half of it), which a list of powers of two misses whenever dp
  // is not one (dp 24 on a batch of 2304 gives B = 96).
  bool small_micro_batches = false;
  bool vary_zero = false;  // ZeRO 0-3 (levels > 0 with dp > 1); else base's
  // Recompute none, selective and full; else base's training.recompute.
  bool vary_recompute = false;
  // Sequence parallelism off and on wherever tp > 1 (off at tp 1); else base's.
  bool vary_sequence_parallel = false;
  // Context parallelism: every cp dividing the GPUs left by tp x pp (dp = the rest), with
  // ring and all-to-all attention where check_consistency takes them (the sequence, and
  // for all-to-all the heads, divide); else base's cp and cp_algorithm.
  bool vary_context_parallel = false;
};

// Other plan fields (ep, overlap, and zero, sequence_parallel and recompute unless
// varied) are taken from `base`. The order is deterministic: tp, pp, cp (ring before
// all-to-all), micro-batch size
// ascending, then the schedules in order, then ZeRO, sequence parallelism (off first)
// and recompute (none, selective, full) ascending.
std::vector<PlanPoint> enumerate_plans(const Scenario& base, const PlanSpaceOptions& options = {});

}  // namespace clustersim

// `clustersim serve --capacity RATE`: the cheapest serving configuration that meets the
// scenario's SLOs at a request rate. Candidates are replicas x tp x pp x the token
// budget (max_batched_tokens) on the scenario's cluster; each is a full serving
// simulation at that rate, run on all cores. Prints nothing.
#pragma once
#include <cstdint>
#include <vector>

#include "costmodel/cluster.hpp"
#include "scenarios/serving.hpp"
#include "sim/serve.hpp"

namespace clustersim::runner {

struct CapacityCandidate {
  std::int64_t replicas = 0, tp = 0, pp = 0, max_batched_tokens = 0;
  std::int64_t gpus() const { return replicas * tp * pp; }
  bool feasible = false;  // the model fits and every request can be served
  bool meets = false;     // SLO attainment >= the scenario's target
  sim::ServeSummary summary;
};

struct CapacityResult {
  std::vector<CapacityCandidate> candidates;  // in enumeration order
  int best = -1;  // the fewest GPUs meeting the SLOs (ties: lower p99 TTFT, then enumeration order)
};

// `jobs` threads (0: all cores). Throws InputError when the scenario has no SLO target.
CapacityResult serve_capacity(const ServingScenario& s, const ClusterModel& cluster, double rate, int jobs = 0);

}  // namespace clustersim::runner

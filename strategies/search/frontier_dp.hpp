// An exact solver for the intra-op ILP's flat request when its graph is a chain with
// short skips (transformer, MoE and Wide-ResNet stages are): dynamic programming over
// the nodes in index order, keeping per assignment of the "frontier" (earlier leaders
// that later nodes still touch) the Pareto set of (cost, memory) of the partial
// solutions. No approximation: a partial solution is dropped only when another with the
// same frontier assignment is no worse in both cost and memory, or when even the least
// memory of the rest cannot fit. The result equals the ILP optimum (tests compare it
// with CBC and with exhaustive enumeration).
//
// It knows nothing of graphs either; `solve_ilp` tries it first and falls back to CBC
// when a request is outside its reach (more than one liveness step or a node listed
// twice in it, a follower before its leader, negative memory, or a frontier or Pareto
// set above the limits below).
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

#include "strategies/search/ilp.hpp"

namespace clustersim::search {

struct FrontierDpLimits {
  std::size_t max_states = std::size_t(1) << 14;  // frontier assignments alive at once
  std::size_t max_points = std::size_t(1) << 24;  // transitions, and Pareto points stored over the whole solve (each at most ~30 bytes)
};

// The optimum of `r` (status optimal or infeasible, the choice, objective, peak memory,
// and when infeasible the smallest budget that fits), or nullopt when out of reach.
// `validated`: the caller has run validate(r) (solve_ilp does), so it is not run again.
std::optional<IlpResult> solve_frontier_dp(const IlpRequest& r, const FrontierDpLimits& limits = {},
                                         bool explain_infeasible = true, bool validated = false);

}  // namespace clustersim::search

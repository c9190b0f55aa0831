// The intra-op ILP as a flat request (Alpa Sec. 4.2, XLA auto_sharding's habit): strategy
// counts, cost vectors, edge cost matrices, liveness sets and a memory budget. The solver
// knows nothing of graphs, ops or meshes, which keeps it testable on hand-built
// instances with known optima. Solved exactly with COIN-OR CBC.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace clustersim::search {

// Named index types: a node of the request and a strategy of one node.
struct NodeIdx {
  int value = 0;
  friend bool operator==(NodeIdx, NodeIdx) = default;
};
struct StrategyIdx {
  int value = 0;
  friend bool operator==(StrategyIdx, StrategyIdx) = default;
};

inline constexpr double kInfiniteCost = std::numeric_limits<double>::infinity();

struct IlpNode {
  std::vector<double> cost;    // seconds per strategy (communication + compute); inf = forbidden
  std::vector<double> memory;  // bytes per strategy while the node is live
  // When set, this node takes the same strategy index as its leader (same count):
  // it shares the leader's variables and adds its costs to them.
  int follows = -1;
};

struct IlpEdge {
  NodeIdx src, dst;
  std::vector<double> cost;  // row-major [k_src x k_dst] resharding seconds; inf = forbidden
};

struct IlpRequest {
  std::vector<IlpNode> nodes;
  std::vector<IlpEdge> edges;
  std::vector<std::vector<NodeIdx>> liveness;  // per time step: the nodes whose memory is live
  double memory_budget = std::numeric_limits<double>::infinity();  // bytes per device
};

// Which method solves the request. automatic: the exact frontier DP
// (frontier_dp.hpp) when the request is within its reach, else CBC; both return the
// optimum, so the choice changes speed only.
enum class IlpSolver { automatic, cbc, dp };

struct IlpOptions {
  IlpSolver solver = IlpSolver::automatic;
  double time_limit_s = 600;  // Alpa's limit
  double relative_gap = 0;    // 0 = prove optimality
  int seed = 1;
  // On infeasibility, solve a second ILP for the smallest memory that fits (the search
  // turns it off: it only needs to know that a candidate does not fit).
  bool explain_infeasible = true;
  // Throws InputError naming the bad value.
  void validate() const;
};

// unknown: the time limit ended the search before any solution or proof of infeasibility.
enum class IlpStatus { optimal, feasible, infeasible, unknown };
std::string to_string(IlpStatus);

struct IlpResult {
  IlpStatus status = IlpStatus::infeasible;
  double objective = 0;                 // seconds
  std::vector<StrategyIdx> choice;      // per node (followers repeat their leader's)
  double peak_memory = 0;               // bytes, max over time steps of the chosen strategies
  // When infeasible because of memory: the smallest budget under which a finite-cost
  // solution exists (infinite when none exists at any budget).
  double min_feasible_memory = 0;
  std::string message;                  // why infeasible, in words
  IlpSolver solved_by = IlpSolver::cbc; // dp or cbc
  // The frontier DP's work on a memory-constrained request (0 when it did not get there):
  // the Lagrangian bounds, the upper bound after mixing layer configurations, and the
  // Pareto points its exact passes stored.
  struct DpStats {
    double lagrangian_lower = 0, lagrangian_upper = 0, mixed_upper = 0;
    std::size_t pareto_points = 0;
  } dp_stats;
};

// Checks the request's shape (counts, matrix sizes, indices, followers) and throws
// InputError describing the first inconsistency.
void validate(const IlpRequest& r);

IlpResult solve_ilp(const IlpRequest& r, const IlpOptions& options = {});

// Objective and peak memory of a given choice (infinite objective when a forbidden
// strategy or edge pair is used). Used by tests and by callers that evaluate fixed plans.
double evaluate_choice(const IlpRequest& r, const std::vector<StrategyIdx>& choice, double* peak_memory = nullptr);

}  // namespace clustersim::search

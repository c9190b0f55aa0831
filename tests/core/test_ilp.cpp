// The flat ILP solver on hand-built instances with known optima (infeasible and
// infinite-cost cases included) and on 200+ random small instances against exhaustive
// enumeration of every strategy combination.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "scenarios/diagnostics.hpp"
#include "strategies/search/ilp.hpp"

using namespace clustersim;
using namespace clustersim::search;

namespace {

// Exhaustive reference: tries every combination (followers forced to their leader's index).
struct Brute {
  bool found = false;
  double objective = INFINITY;
  double min_peak = INFINITY;  // smallest peak over finite-cost combinations
};

int leader(const IlpRequest& r, int v) {
  while (r.nodes[std::size_t(v)].follows >= 0) v = r.nodes[std::size_t(v)].follows;
  return v;
}

Brute brute_force(const IlpRequest& r) {
  Brute b;
  const std::size_t n = r.nodes.size();
  std::vector<StrategyIdx> choice(n);
  std::function<void(std::size_t)> rec = [&](std::size_t v) {
    if (v == n) {
      double peak = 0;
      const double obj = evaluate_choice(r, choice, &peak);
      if (!std::isfinite(obj)) return;
      b.min_peak = std::min(b.min_peak, peak);
      if (peak <= r.memory_budget && obj < b.objective) {
        b.objective = obj;
        b.found = true;
      }
      return;
    }
    const int l = leader(r, int(v));
    if (l != int(v)) {
      choice[v] = choice[std::size_t(l)];  // leaders have smaller indices in these instances
      rec(v + 1);
      return;
    }
    for (int i = 0; i < int(r.nodes[v].cost.size()); ++i) {
      choice[v] = StrategyIdx{i};
      rec(v + 1);
    }
  };
  rec(0);
  return b;
}

IlpNode node(std::vector<double> cost, std::vector<double> memory = {}) {
  if (memory.empty()) memory.assign(cost.size(), 0.0);
  return IlpNode{std::move(cost), std::move(memory), -1};
}

}  // namespace

TEST_CASE("ilp: a chain where resharding outweighs the cheaper node strategy", "[ilp]") {
  // Node 0: strategy 0 costs 1, strategy 1 costs 2. Node 1: 0 costs 5, 1 costs 1.
  // Changing strategy along the edge costs 10, so both pick 1: 2 + 1 = 3 < 1 + 5 = 6.
  IlpRequest r;
  r.nodes = {node({1, 2}), node({5, 1})};
  r.edges = {IlpEdge{NodeIdx{0}, NodeIdx{1}, {0, 10, 10, 0}}};
  const IlpResult res = solve_ilp(r);
  INFO("expected objective 3 (1 + 2 via strategy 1,1), solved " << res.objective);
  REQUIRE(res.status == IlpStatus::optimal);
  CHECK(res.objective == Approx(3.0).epsilon(1e-9));
  CHECK(res.choice[0].value == 1);
  CHECK(res.choice[1].value == 1);
}

TEST_CASE("ilp: the memory budget pushes a node to its slower, smaller strategy", "[ilp]") {
  IlpRequest r;
  r.nodes = {node({1, 3}, {8e9, 2e9}), node({1, 1}, {4e9, 4e9})};
  r.liveness = {{NodeIdx{0}, NodeIdx{1}}};
  r.memory_budget = 10e9;  // 8 + 4 = 12 does not fit; 2 + 4 = 6 does
  const IlpResult res = solve_ilp(r);
  INFO("expected objective 4, solved " << res.objective << ", peak " << res.peak_memory);
  REQUIRE(res.status == IlpStatus::optimal);
  CHECK(res.objective == Approx(4.0).epsilon(1e-9));
  CHECK(res.peak_memory == Approx(6e9).epsilon(1e-12));
}

TEST_CASE("ilp: infeasible memory reports the smallest budget that would fit", "[ilp]") {
  IlpRequest r;
  r.nodes = {node({1, 3}, {8e9, 5e9}), node({1, 2}, {4e9, 3e9})};
  r.liveness = {{NodeIdx{0}}, {NodeIdx{0}, NodeIdx{1}}};
  r.memory_budget = 7e9;  // the smallest peak is 5 + 3 = 8 GB
  const IlpResult res = solve_ilp(r);
  INFO(res.message);
  REQUIRE(res.status == IlpStatus::infeasible);
  CHECK(res.min_feasible_memory == Approx(8e9).epsilon(1e-9));
  CHECK(res.message.find("8.000 GB") != std::string::npos);
}

TEST_CASE("ilp: infinite costs forbid strategies and pairs", "[ilp]") {
  IlpRequest r;
  r.nodes = {node({0, 1}), node({kInfiniteCost, 4})};
  // The pair (1, 1) is forbidden, so node 0 must take 0: 0 + 4 + edge (0,1) = 2.
  r.edges = {IlpEdge{NodeIdx{0}, NodeIdx{1}, {0, 2, 0, kInfiniteCost}}};
  IlpResult res = solve_ilp(r);
  INFO("expected 6, solved " << res.objective);
  REQUIRE(res.status == IlpStatus::optimal);
  CHECK(res.objective == Approx(6.0).epsilon(1e-9));
  CHECK(res.choice[0].value == 0);
  CHECK(res.choice[1].value == 1);

  // Every combination forbidden: infeasible at any budget.
  r.edges[0].cost = {0, kInfiniteCost, 0, kInfiniteCost};
  res = solve_ilp(r);
  REQUIRE(res.status == IlpStatus::infeasible);
  CHECK(std::isinf(res.min_feasible_memory));
  CHECK(res.message.find("finite cost") != std::string::npos);
}

TEST_CASE("ilp: followers share their leader's variables", "[ilp]") {
  // Node 1 follows node 0. Alone node 0 would take strategy 0, but the follower's
  // costs make strategy 1 cheaper: (1 + 9) vs (2 + 1).
  IlpRequest r;
  r.nodes = {node({1, 2}), node({9, 1}), node({0, 0})};
  r.nodes[1].follows = 0;
  // Edge leader -> follower: only the diagonal counts (0.5 on strategy 1).
  r.edges = {IlpEdge{NodeIdx{0}, NodeIdx{1}, {0, 100, 100, 0.5}}, IlpEdge{NodeIdx{1}, NodeIdx{2}, {0, 1, 1, 0}}};
  const IlpResult res = solve_ilp(r);
  INFO("expected 3.5, solved " << res.objective);
  REQUIRE(res.status == IlpStatus::optimal);
  CHECK(res.objective == Approx(3.5).epsilon(1e-9));
  CHECK(res.choice[0].value == 1);
  CHECK(res.choice[1].value == 1);
  CHECK(res.choice[2].value == 1);
}

TEST_CASE("ilp: bad requests and options are reported with the bad value", "[ilp]") {
  IlpRequest r;
  r.nodes = {node({1, 2}), node({1, 2, 3})};
  r.edges = {IlpEdge{NodeIdx{0}, NodeIdx{1}, {0, 0, 0, 0}}};
  CHECK_THROWS_WITH(solve_ilp(r), Catch::Contains("length of cost (4) doesn't match k_src x k_dst (6)"));
  IlpOptions o;
  o.relative_gap = 1.5;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("got 1.5"));
  o = {};
  o.time_limit_s = -1;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("got -1"));
}

TEST_CASE("ilp: 240 random small graphs match exhaustive enumeration", "[ilp][random]") {
  std::mt19937_64 rng(12345);
  auto uni = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int feasible = 0, infeasible = 0, with_followers = 0;
  for (int trial = 0; trial < 240; ++trial) {
    IlpRequest r;
    const int n = pick(2, 6);
    for (int v = 0; v < n; ++v) {
      const int k = pick(1, 4);
      IlpNode nd;
      for (int i = 0; i < k; ++i) {
        nd.cost.push_back(pick(0, 9) == 0 ? kInfiniteCost : uni(0, 1e-3));
        nd.memory.push_back(uni(0, 4e9));
      }
      // Sometimes follow an earlier node with the same strategy count.
      for (int u = 0; u < v; ++u)
        if (r.nodes[std::size_t(u)].cost.size() == std::size_t(k) && pick(0, 3) == 0) {
          nd.follows = u;
          ++with_followers;
          break;
        }
      r.nodes.push_back(std::move(nd));
    }
    // A chain plus a few random extra edges (residual-like).
    for (int v = 1; v < n; ++v) {
      const int u = pick(0, 2) == 0 ? pick(0, v - 1) : v - 1;
      IlpEdge e{NodeIdx{u}, NodeIdx{v}, {}};
      for (std::size_t i = 0; i < r.nodes[std::size_t(u)].cost.size() * r.nodes[std::size_t(v)].cost.size(); ++i)
        e.cost.push_back(pick(0, 14) == 0 ? kInfiniteCost : uni(0, 1e-3));
      r.edges.push_back(std::move(e));
    }
    for (int t = 0; t < pick(0, 3); ++t) {
      std::vector<NodeIdx> live;
      for (int v = 0; v < n; ++v)
        if (pick(0, 1)) live.push_back(NodeIdx{v});
      r.liveness.push_back(live);
    }
    if (!r.liveness.empty()) r.memory_budget = uni(2e9, 12e9);
    const Brute b = brute_force(r);
    const IlpResult res = solve_ilp(r);
    INFO("trial " << trial << ": exhaustive " << b.objective << ", ILP " << res.objective << " (" << to_string(res.status) << ")");
    REQUIRE((res.status == IlpStatus::optimal) == b.found);
    if (b.found) {
      ++feasible;
      CHECK(res.objective == Approx(b.objective).epsilon(1e-6).margin(1e-12));
      double peak = 0;
      CHECK(evaluate_choice(r, res.choice, &peak) == Approx(res.objective));
      CHECK(peak <= r.memory_budget * (1 + 1e-9));
    } else {
      ++infeasible;
      if (std::isfinite(b.min_peak)) CHECK(res.min_feasible_memory == Approx(b.min_peak).epsilon(1e-6));
      else CHECK(std::isinf(res.min_feasible_memory));
    }
  }
  INFO("feasible " << feasible << ", infeasible " << infeasible << ", followers " << with_followers);
  CHECK(feasible > 100);
  CHECK(infeasible > 5);
  CHECK(with_followers > 20);
}

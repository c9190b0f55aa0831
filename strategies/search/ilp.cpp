// The intra-op ILP, solved with CBC (CbcModel over OsiClpSolverInterface).
//
// Leaders L (nodes that follow nobody); follower f of leader l(f) shares s_l.
// For a leader v with k_v strategies: s_v in {0,1}^k_v.
// c_v[i] = sum of cost[i] over v and its followers (+ the diagonal of edges between them).
// For an edge (u, w) between different leaders: e_uw in [0,1]^(k_u x k_w).
//
//   minimise   sum_v c_v . s_v + sum_(u,w) R_uw . e_uw
//   (a) sum_i s_v[i] = 1                              for every leader v
//   (b) sum_j e_uw[i,j] = s_u[i]                      for every edge, every i
//   (c) sum_i e_uw[i,j] = s_w[j]                      for every edge, every j
//   (d) sum_{v live at t} m_v . s_l(v) <= M            for every liveness step t
//   (e) s_v[i] = 0 where c_v[i] is infinite; e_uw[i,j] = 0 where R_uw[i,j] is infinite
//
// Alpa writes (b), (c) as <=; with one-hot s both marginals of e are fixed, so the
// equalities force e_uw[i,j] = s_u[i] s_w[j] and e may stay continuous: fewer integer
// variables and a tighter relaxation, same optimum.
// Costs are scaled to microseconds and memory to GB inside the LP so that CBC's
// absolute tolerances (1e-6 .. 1e-10) are meaningful.
#include "strategies/search/ilp.hpp"

#include <CbcModel.hpp>
#include <CoinMessageHandler.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "scenarios/diagnostics.hpp"
#include "strategies/search/frontier_dp.hpp"

namespace clustersim::search {
namespace {

constexpr double kTimeScale = 1e6;    // seconds -> microseconds
constexpr double kMemoryScale = 1e-9;  // bytes -> GB

int leader_of(const IlpRequest& r, int v) {
  while (r.nodes[std::size_t(v)].follows >= 0) v = r.nodes[std::size_t(v)].follows;
  return v;
}

struct Lp {
  std::vector<int> leaders;          // leader node ids in order
  std::vector<int> leader_slot;      // node -> index into leaders (via its leader)
  std::vector<int> first_var;        // per leader slot: its first s variable
  std::vector<double> node_cost;     // per s variable (scaled), may be inf
  struct EdgeVars {
    int u = 0, w = 0;  // leader slots
    int first = 0;     // first e variable
    std::vector<double> cost;  // scaled
  };
  std::vector<EdgeVars> edges;
  int columns = 0;
};

int strategy_count(const IlpRequest& r, int v) { return int(r.nodes[std::size_t(v)].cost.size()); }

Lp build_lp(const IlpRequest& r) {
  Lp lp;
  const int n = int(r.nodes.size());
  lp.leader_slot.assign(std::size_t(n), -1);
  for (int v = 0; v < n; ++v) {
    if (r.nodes[std::size_t(v)].follows >= 0) continue;
    lp.leader_slot[std::size_t(v)] = int(lp.leaders.size());
    lp.leaders.push_back(v);
    lp.first_var.push_back(lp.columns);
    lp.columns += strategy_count(r, v);
  }
  for (int v = 0; v < n; ++v) lp.leader_slot[std::size_t(v)] = lp.leader_slot[std::size_t(leader_of(r, v))];
  lp.node_cost.assign(std::size_t(lp.columns), 0.0);
  for (int v = 0; v < n; ++v) {
    const int base = lp.first_var[std::size_t(lp.leader_slot[std::size_t(v)])];
    for (int i = 0; i < strategy_count(r, v); ++i) lp.node_cost[std::size_t(base + i)] += r.nodes[std::size_t(v)].cost[std::size_t(i)] * kTimeScale;
  }
  for (const auto& e : r.edges) {
    const int u = lp.leader_slot[std::size_t(e.src.value)], w = lp.leader_slot[std::size_t(e.dst.value)];
    const int ku = strategy_count(r, e.src.value), kw = strategy_count(r, e.dst.value);
    if (u == w) {
      // Both ends share one variable set: only the diagonal can be chosen.
      const int base = lp.first_var[std::size_t(u)];
      for (int i = 0; i < ku; ++i) lp.node_cost[std::size_t(base + i)] += e.cost[std::size_t(i * kw + i)] * kTimeScale;
      continue;
    }
    Lp::EdgeVars ev{u, w, lp.columns, {}};
    ev.cost.resize(e.cost.size());
    for (std::size_t i = 0; i < e.cost.size(); ++i) ev.cost[i] = e.cost[i] * kTimeScale;
    lp.columns += ku * kw;
    lp.edges.push_back(std::move(ev));
  }
  return lp;
}

// Per liveness step, the memory coefficient of each s variable (scaled).
std::vector<std::vector<std::pair<int, double>>> memory_rows(const IlpRequest& r, const Lp& lp) {
  std::vector<std::vector<std::pair<int, double>>> rows;
  for (const auto& step : r.liveness) {
    std::vector<double> coef(std::size_t(lp.columns), 0.0);
    for (NodeIdx v : step) {
      const int base = lp.first_var[std::size_t(lp.leader_slot[std::size_t(v.value)])];
      const auto& mem = r.nodes[std::size_t(v.value)].memory;
      for (std::size_t i = 0; i < mem.size(); ++i) coef[std::size_t(base) + i] += mem[i] * kMemoryScale;
    }
    std::vector<std::pair<int, double>> row;
    for (int c = 0; c < lp.columns; ++c)
      if (coef[std::size_t(c)] != 0) row.emplace_back(c, coef[std::size_t(c)]);
    rows.push_back(std::move(row));
  }
  return rows;
}

struct Solved {
  bool found = false, proven = false;
  bool proven_infeasible = false;
  double objective = 0;
  std::vector<double> x;
};

// mode budget: constraint (d) with budget M. mode min_peak: an extra column P with
// objective 1 and (d) as sum - P <= 0, the costs dropped (only (e) kept).
enum class Mode { budget, min_peak };

Solved run_cbc(const IlpRequest& r, const Lp& lp, const IlpOptions& o, Mode mode) {
  const int peak_col = mode == Mode::min_peak ? lp.columns : -1;
  const int ncols = lp.columns + (mode == Mode::min_peak ? 1 : 0);
  std::vector<double> col_lb(std::size_t(ncols), 0.0), col_ub(std::size_t(ncols), 1.0), obj(std::size_t(ncols), 0.0);
  for (int c = 0; c < lp.columns; ++c) {
    const bool is_s = c < (lp.edges.empty() ? lp.columns : lp.edges.front().first);
    const double cost = is_s ? lp.node_cost[std::size_t(c)] : 0.0;
    if (is_s) {
      if (std::isinf(cost)) col_ub[std::size_t(c)] = 0;  // (e)
      else if (mode == Mode::budget) obj[std::size_t(c)] = cost;
    }
  }
  for (const auto& ev : lp.edges)
    for (std::size_t i = 0; i < ev.cost.size(); ++i) {
      const int c = ev.first + int(i);
      if (std::isinf(ev.cost[i])) col_ub[std::size_t(c)] = 0;  // (e)
      else if (mode == Mode::budget) obj[std::size_t(c)] = ev.cost[i];
    }
  if (peak_col >= 0) {
    col_ub[std::size_t(peak_col)] = 1e30;
    obj[std::size_t(peak_col)] = 1;
  }

  CoinPackedMatrix m(false, 0, 0);
  m.setDimensions(0, ncols);
  std::vector<double> row_lb, row_ub;
  auto add_row = [&](const std::vector<int>& idx, const std::vector<double>& val, double lo, double hi) {
    m.appendRow(int(idx.size()), idx.data(), val.data());
    row_lb.push_back(lo);
    row_ub.push_back(hi);
  };
  for (std::size_t l = 0; l < lp.leaders.size(); ++l) {  // (a)
    const int k = strategy_count(r, lp.leaders[l]);
    std::vector<int> idx;
    for (int i = 0; i < k; ++i) idx.push_back(lp.first_var[l] + i);
    add_row(idx, std::vector<double>(idx.size(), 1.0), 1.0, 1.0);
  }
  for (const auto& ev : lp.edges) {
    const int ku = strategy_count(r, lp.leaders[std::size_t(ev.u)]), kw = strategy_count(r, lp.leaders[std::size_t(ev.w)]);
    for (int i = 0; i < ku; ++i) {  // (b)
      std::vector<int> idx;
      std::vector<double> val;
      for (int j = 0; j < kw; ++j) idx.push_back(ev.first + i * kw + j), val.push_back(1.0);
      idx.push_back(lp.first_var[std::size_t(ev.u)] + i), val.push_back(-1.0);
      add_row(idx, val, 0.0, 0.0);
    }
    for (int j = 0; j < kw; ++j) {  // (c)
      std::vector<int> idx;
      std::vector<double> val;
      for (int i = 0; i < ku; ++i) idx.push_back(ev.first + i * kw + j), val.push_back(1.0);
      idx.push_back(lp.first_var[std::size_t(ev.w)] + j), val.push_back(-1.0);
      add_row(idx, val, 0.0, 0.0);
    }
  }
  const bool budgeted = mode == Mode::min_peak || std::isfinite(r.memory_budget);
  if (budgeted) {
    for (const auto& row : memory_rows(r, lp)) {  // (d)
      std::vector<int> idx;
      std::vector<double> val;
      for (auto [c, v] : row) idx.push_back(c), val.push_back(v);
      if (mode == Mode::min_peak) {
        idx.push_back(peak_col), val.push_back(-1.0);
        add_row(idx, val, -1e30, 0.0);
      } else {
        add_row(idx, val, -1e30, r.memory_budget * kMemoryScale);
      }
    }
  }

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(m, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
  int s_end = lp.edges.empty() ? lp.columns : lp.edges.front().first;
  for (int c = 0; c < s_end; ++c) solver.setInteger(c);
  solver.setHintParam(OsiDoReducePrint, true, OsiHintTry);

  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.solver()->messageHandler()->setLogLevel(0);
  model.setNumberThreads(1);
  model.setRandomSeed(o.seed);
  model.setMaximumSeconds(o.time_limit_s);
  model.setAllowableFractionGap(o.relative_gap);
  model.setAllowableGap(1e-7);
  model.branchAndBound();

  Solved out;
  if (model.bestSolution() && !model.isProvenInfeasible()) {
    out.found = true;
    out.proven = model.isProvenOptimal();
    out.objective = model.getObjValue();
    out.x.assign(model.bestSolution(), model.bestSolution() + ncols);
  }
  out.proven_infeasible = !out.found && (model.isProvenInfeasible() || model.status() == 0);
  return out;
}

std::vector<StrategyIdx> decode(const IlpRequest& r, const Lp& lp, const std::vector<double>& x) {
  std::vector<StrategyIdx> choice(r.nodes.size());
  for (std::size_t v = 0; v < r.nodes.size(); ++v) {
    const int slot = lp.leader_slot[v];
    const int k = strategy_count(r, lp.leaders[std::size_t(slot)]);
    int best = 0;
    for (int i = 1; i < k; ++i)
      if (x[std::size_t(lp.first_var[std::size_t(slot)] + i)] > x[std::size_t(lp.first_var[std::size_t(slot)] + best)]) best = i;
    choice[v] = StrategyIdx{best};
  }
  return choice;
}

}  // namespace

std::string to_string(IlpStatus s) {
  switch (s) {
    case IlpStatus::optimal: return "optimal";
    case IlpStatus::feasible: return "feasible (time limit or gap)";
    case IlpStatus::infeasible: return "infeasible";
    case IlpStatus::unknown: return "unknown (time limit before any solution)";
  }
  return "?";
}

void IlpOptions::validate() const {
  if (!(time_limit_s > 0) || !std::isfinite(time_limit_s))
    throw InputError("command line", "--time-limit", fmt::format("expected a finite number of seconds > 0, got {}", time_limit_s));
  if (!(relative_gap >= 0 && relative_gap < 1))
    throw InputError("command line", "--gap", fmt::format("expected a number in [0, 1), got {}", relative_gap));
}

void validate(const IlpRequest& r) {
  // The request is built by code (the intra-op pass, tests): a bad one is a bug, not input.
  auto bad = [](const std::string& path, const std::string& msg) {
    throw std::invalid_argument(fmt::format("ILP request {}: {}", path, msg));
  };
  const int n = int(r.nodes.size());
  for (int v = 0; v < n; ++v) {
    const auto& node = r.nodes[std::size_t(v)];
    // Paths are formatted only for a message: validation runs on every solve.
    auto p = [v] { return fmt::format("/nodes/{}", v); };
    if (node.cost.empty()) bad(p() + "/cost", "a node needs at least one strategy");
    if (node.memory.size() != node.cost.size())
      bad(p() + "/memory", fmt::format("length of memory ({}) doesn't match length of cost ({})", node.memory.size(), node.cost.size()));
    if (node.follows >= 0) {
      if (node.follows >= n) bad(p() + "/follows", fmt::format("expected a node index < {}, got {}", n, node.follows));
      if (r.nodes[std::size_t(node.follows)].cost.size() != node.cost.size())
        bad(p() + "/follows", fmt::format("a follower needs its leader's strategy count ({}), has {}",
                                        r.nodes[std::size_t(node.follows)].cost.size(), node.cost.size()));
      int steps = 0;
      for (int u = v; u >= 0; u = r.nodes[std::size_t(u)].follows)
        if (++steps > n) bad(p() + "/follows", "followers form a cycle");
    }
    for (double c : node.cost)
      if (std::isnan(c) || c < 0) bad(p() + "/cost", fmt::format("expected costs >= 0 (or infinite), got {}", c));
  }
  for (std::size_t e = 0; e < r.edges.size(); ++e) {
    const auto& edge = r.edges[e];
    auto p = [e] { return fmt::format("/edges/{}", e); };
    if (edge.src.value < 0 || edge.src.value >= n || edge.dst.value < 0 || edge.dst.value >= n)
      bad(p(), fmt::format("node index out of range [0, {}): {} -> {}", n, edge.src.value, edge.dst.value));
    const std::size_t want = r.nodes[std::size_t(edge.src.value)].cost.size() * r.nodes[std::size_t(edge.dst.value)].cost.size();
    if (edge.cost.size() != want)
      bad(p() + "/cost", fmt::format("length of cost ({}) doesn't match k_src x k_dst ({})", edge.cost.size(), want));
    for (double c : edge.cost)
      if (std::isnan(c) || c < 0) bad(p() + "/cost", fmt::format("expected costs >= 0 (or infinite), got {}", c));
  }
  for (std::size_t t = 0; t < r.liveness.size(); ++t)
    for (NodeIdx v : r.liveness[t])
      if (v.value < 0 || v.value >= n) bad(fmt::format("/liveness/{}", t), fmt::format("node index out of range [0, {}): {}", n, v.value));
  if (std::isnan(r.memory_budget) || r.memory_budget < 0)
    bad("/memory_budget", fmt::format("expected bytes >= 0, got {}", r.memory_budget));
}

double evaluate_choice(const IlpRequest& r, const std::vector<StrategyIdx>& choice, double* peak_memory) {
  double total = 0;
  for (std::size_t v = 0; v < r.nodes.size(); ++v) total += r.nodes[v].cost[std::size_t(choice[v].value)];
  for (const auto& e : r.edges) {
    const int kw = int(r.nodes[std::size_t(e.dst.value)].cost.size());
    total += e.cost[std::size_t(choice[std::size_t(e.src.value)].value * kw + choice[std::size_t(e.dst.value)].value)];
  }
  if (peak_memory) {
    double peak = 0;
    for (const auto& step : r.liveness) {
      double m = 0;
      for (NodeIdx v : step) m += r.nodes[std::size_t(v.value)].memory[std::size_t(choice[std::size_t(v.value)].value)];
      peak = std::max(peak, m);
    }
    *peak_memory = peak;
  }
  return total;
}

IlpResult solve_ilp(const IlpRequest& r, const IlpOptions& options) {
  options.validate();
  validate(r);
  IlpResult res;
  if (r.nodes.empty()) {
    res.status = IlpStatus::optimal;
    return res;
  }
  if (options.solver != IlpSolver::cbc) {
    if (auto dp = solve_frontier_dp(r, FrontierDpLimits{}, options.explain_infeasible, /*validated=*/true)) {
      dp->solved_by = IlpSolver::dp;
      return *dp;
    }
    if (options.solver == IlpSolver::dp)
      throw InputError("command line", "--solver",
                       "dp: this intra-op ILP is outside the frontier DP's reach (several liveness steps, a follower before "
                       "its leader, negative memory, or a frontier wider than its limits): use --solver auto or cbc");
  }
  const Lp lp = build_lp(r);
  // A cheap exact test first: if even the smallest finite-cost strategy of every
  // leader group overflows some liveness step, no solution fits.
  if (std::isfinite(r.memory_budget)) {
    for (const auto& step : memory_rows(r, lp)) {
      std::vector<double> coef(std::size_t(lp.columns), 0.0);
      for (auto [c, v] : step) coef[std::size_t(c)] = v;
      double least = 0;
      for (std::size_t l = 0; l < lp.leaders.size(); ++l) {
        double m = INFINITY;
        for (int i = 0; i < strategy_count(r, lp.leaders[l]); ++i) {
          const int c = lp.first_var[l] + i;
          if (std::isfinite(lp.node_cost[std::size_t(c)])) m = std::min(m, coef[std::size_t(c)]);
        }
        least += m;
      }
      if (least > r.memory_budget * kMemoryScale * (1 + 1e-9) && !options.explain_infeasible) {
        res.status = IlpStatus::infeasible;
        res.message = "infeasible: the smallest strategies already exceed the memory budget";
        return res;
      }
    }
  }
  const Solved s = run_cbc(r, lp, options, Mode::budget);
  if (s.found) {
    res.choice = decode(r, lp, s.x);
    res.objective = evaluate_choice(r, res.choice, &res.peak_memory);
    res.status = s.proven ? IlpStatus::optimal : IlpStatus::feasible;
    return res;
  }
  res.status = s.proven_infeasible ? IlpStatus::infeasible : IlpStatus::unknown;
  if (res.status == IlpStatus::unknown) {
    res.message = fmt::format("no solution found within the {} s time limit", options.time_limit_s);
    return res;
  }
  if (!options.explain_infeasible) {
    res.message = "infeasible";
    return res;
  }
  const Solved p = run_cbc(r, lp, options, Mode::min_peak);
  if (!p.found) {
    res.min_feasible_memory = std::numeric_limits<double>::infinity();
    res.message = "no combination of strategies has a finite cost (forbidden strategies or resharding pairs)";
  } else {
    double peak = 0;
    (void)evaluate_choice(r, decode(r, lp, p.x), &peak);
    res.min_feasible_memory = peak;
    res.message = fmt::format("does not fit in {:.3f} GB per device; the smallest memory that fits is {:.3f} GB",
                              r.memory_budget * 1e-9, peak * 1e-9);
  }
  return res;
}

}  // namespace clustersim::search

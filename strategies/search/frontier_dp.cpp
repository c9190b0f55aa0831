// Exact dynamic programming over the flat ILP request; see frontier_dp.hpp.
//
// Nodes are visited in index order. Visiting node t:
//   - a leader adds a variable a_t in [0, k_t) to the frontier; a follower reads its
//     leader's variable (the leader has a smaller index and is still in the frontier);
//   - it adds cost_t[a_lead(t)] and, if live, memory_t[a_lead(t)];
//   - every edge whose later end is t adds R[a_lead(src), a_lead(dst)];
//   - leaders that no later node or edge touches leave the frontier.
// Each visit enumerates transitions (old frontier state, pick) -> new frontier state with
// the cost and memory they add; the memory-constrained passes store them once per request.
// Strategies of a leader that an equivalent strategy (same resharding costs on every edge
// of its group) dominates are dropped first: no optimum needs them.
//
// Without a memory budget this is Viterbi: one value per frontier state. With a budget:
//   1. The memory-free optimum; if it fits, done. If even the least memory overflows,
//      infeasible (that least memory is the smallest budget that would fit).
//   2. Lagrangian relaxation: for lambda >= 0, min_x cost(x) + lambda (mem(x) - M) is a
//      lower bound of the optimum, and every x it yields that fits is an upper bound.
//      Backward passes give, per node and frontier state, the least cost (+ lambda
//      memory) of the rest; lambda is bisected on the sign of mem(x_lambda) - M. Every
//      pair of the solutions seen is also mixed at every cut (identical layers switch
//      all at once under one lambda, the optimum usually mixes them). If the bounds
//      meet, the incumbent is optimal.
//   3. Otherwise forward passes keep, per frontier state, the Pareto set of partial
//      (cost, memory) pairs, dropping a partial solution only when another in the same
//      state is no worse in both, when the least memory of the rest cannot fit, or when
//      its cost plus a lower bound of the rest (step 2's cost-to-go, with and without
//      lambda) exceeds a cut: first 1/8 and 1/2 of the way from the lower to the upper
//      bound (a solution found at or below the cut is optimal), then the upper bound.
// Everything is deterministic: ties go to the earliest generated candidate, and the
// generation order depends on the request only. IlpResult::dp_stats returns the bounds
// (tests/core/test_frontier_dp.cpp reads them; `clustersim search --trace` prints them).
#include "strategies/search/frontier_dp.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>

namespace clustersim::search {
namespace {

constexpr double kFit = 1 + 1e-12;    // relative tolerance of the budget test (as the search's)
constexpr double kBound = 1 + 1e-9;   // slack of the bound pruning against rounding

struct Read {  // an edge read at a step: positions of its ends' leaders in the mid frontier
  const IlpEdge* e;
  int src, dst, kdst;
};

struct Step {
  int node = 0;
  bool leader = false;
  int kt = 1;                         // picks: the leader's strategies, or 1 for a follower
  std::size_t old_states = 1, next_states = 1;
  std::vector<std::size_t> old_stride, next_stride;
  std::vector<int> next_pos;          // per next frontier variable: its position in mid
  int lead_pos = 0;                   // position of the node's leader in mid
  std::vector<Read> reads;
  const std::vector<double>* cost = nullptr;
  const std::vector<double>* mem = nullptr;  // null when the node's memory plays no part
  // Transitions, grouped by old state in ascending order (filled by materialize()).
  std::vector<std::uint32_t> from, to;
  std::vector<std::int32_t> pick;  // strategy of the leader introduced (-1 for followers)
  std::vector<double> tcost, tmem;
};

// Calls f(old state, pick, next state, added cost, added memory) for every finite
// transition of the step, in ascending old state then pick.
// `allowed` (per node, may be empty) masks the picks of dominated strategies; old states
// for which `reached(sc)` is false are skipped.
template <class R, class F>
void enumerate(const Step& st, const std::vector<char>& allowed, R&& reached, F&& f) {
  const std::size_t nold = st.old_stride.size();
  const std::size_t nmid = nold + (st.leader ? 1 : 0);
  // The mid frontier's assignment and, per mid position, its stride in the next state
  // (0 when it leaves); on the stack for the usual one to three variables.
  std::array<int, 16> small{};
  std::array<std::size_t, 16> small_stride{};
  std::vector<int> large;
  std::vector<std::size_t> large_stride;
  if (nmid > small.size()) large.assign(nmid, 0), large_stride.assign(nmid, 0);
  int* a = large.empty() ? small.data() : large.data();
  std::size_t* nstride = large_stride.empty() ? small_stride.data() : large_stride.data();
  for (std::size_t i = 0; i < st.next_pos.size(); ++i) nstride[std::size_t(st.next_pos[i])] += st.next_stride[i];
  // Per read: the entry for pick j is base[j * step] (step 0 when the read does not
  // involve the new leader). Summed in the reads' order, as always.
  struct Ptr {
    const double* base;
    std::size_t step;
  };
  std::array<Ptr, 8> small_ptr{};
  std::vector<Ptr> large_ptr;
  if (st.reads.size() > small_ptr.size()) large_ptr.resize(st.reads.size());
  Ptr* ptr = large_ptr.empty() ? small_ptr.data() : large_ptr.data();
  const std::size_t nreads = st.reads.size();
  const bool lead_is_new = st.leader && std::size_t(st.lead_pos) == nold;
  const std::size_t jstride = st.leader ? nstride[nold] : 0;
  const double* cost = st.cost->data();
  const double* mem = st.mem ? st.mem->data() : nullptr;
  const char* mask = st.leader && !allowed.empty() ? allowed.data() : nullptr;
  for (std::size_t sc = 0; sc < st.old_states; ++sc) {
    if (sc > 0)  // odometer over the old frontier
      for (std::size_t i = 0; i < nold; ++i) {
        if (std::size_t(++a[i]) * st.old_stride[i] < (i + 1 < nold ? st.old_stride[i + 1] : st.old_states)) break;
        a[i] = 0;
      }
    if (!reached(sc)) continue;
    std::size_t code0 = 0;
    for (std::size_t i = 0; i < nold; ++i) code0 += std::size_t(a[i]) * nstride[i];
    if (st.leader) a[nold] = 0;
    for (std::size_t q = 0; q < nreads; ++q) {
      const Read& e = st.reads[q];
      const bool src_new = st.leader && std::size_t(e.src) == nold, dst_new = st.leader && std::size_t(e.dst) == nold;
      ptr[q].base = e.e->cost.data() + std::size_t(a[std::size_t(e.src)] * e.kdst + a[std::size_t(e.dst)]);
      ptr[q].step = (src_new ? std::size_t(e.kdst) : 0) + (dst_new ? 1 : 0);
    }
    const int s0 = a[std::size_t(st.lead_pos)];
    for (int j = 0; j < st.kt; ++j) {
      if (mask && !mask[j]) continue;
      const int s = lead_is_new ? j : s0;
      double add = cost[s];
      for (std::size_t q = 0; q < nreads; ++q) add += ptr[q].base[std::size_t(j) * ptr[q].step];
      if (!std::isfinite(add)) continue;  // costs are >= 0 or +inf: one infinite term makes the sum infinite
      f(sc, st.leader ? j : -1, code0 + std::size_t(j) * jstride, add, mem ? mem[s] : 0.0);
    }
  }
}

struct Prepared {
  int n = 0;
  std::vector<int> lead;       // node -> its leader
  std::vector<Step> steps;     // one per node
  std::vector<double> future;  // future[t]: least memory of nodes >= t
  bool budgeted = false;
  double budget = INFINITY;
  // Per leader: strategies not dominated by an equivalent one (same resharding costs on
  // every edge of its group) that is no dearer (free: cost only) or no dearer and no
  // bigger (mem). Removing dominated strategies changes no optimum.
  std::vector<std::vector<char>> allowed_free, allowed_mem;
};

// Fills p.allowed_free and p.allowed_mem (see Prepared).
void dominance(const IlpRequest& r, Prepared& p, const std::vector<char>& live) {
  const int n = p.n;
  p.allowed_free.assign(std::size_t(n), {});
  p.allowed_mem.assign(std::size_t(n), {});
  std::vector<std::vector<int>> incident(static_cast<std::size_t>(n));  // leader -> edges between its group and another
  std::vector<double> gcost, gmem;
  std::vector<std::uint64_t> sig;
  for (std::size_t e = 0; e < r.edges.size(); ++e) {
    const int ls = p.lead[std::size_t(r.edges[e].src.value)], ld = p.lead[std::size_t(r.edges[e].dst.value)];
    if (ls == ld) continue;
    incident[std::size_t(ls)].push_back(int(e));
    incident[std::size_t(ld)].push_back(int(e));
  }
  std::vector<std::vector<int>> members(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v) members[std::size_t(p.lead[std::size_t(v)])].push_back(v);
  std::vector<std::vector<int>> inner(static_cast<std::size_t>(n));  // edges inside a group: their diagonal is a cost
  for (std::size_t e = 0; e < r.edges.size(); ++e) {
    const int ls = p.lead[std::size_t(r.edges[e].src.value)];
    if (ls == p.lead[std::size_t(r.edges[e].dst.value)]) inner[std::size_t(ls)].push_back(int(e));
  }
  for (int l = 0; l < n; ++l) {
    if (p.lead[std::size_t(l)] != l) continue;
    const std::size_t k = r.nodes[std::size_t(l)].cost.size();
    if (k < 2) continue;
    gcost.assign(k, 0.0);
    gmem.assign(k, 0.0);
    for (int v : members[std::size_t(l)])
      for (std::size_t i = 0; i < k; ++i) {
        gcost[i] += r.nodes[std::size_t(v)].cost[i];
        if (live[std::size_t(v)] && p.budgeted) gmem[i] += r.nodes[std::size_t(v)].memory[i];
      }
    for (int e : inner[std::size_t(l)])
      for (std::size_t i = 0; i < k; ++i) gcost[i] += r.edges[std::size_t(e)].cost[i * k + i];
    // Strategies i and j are equivalent when every edge to another group charges them alike.
    auto same = [&](std::size_t i, std::size_t j) {
      for (int ei : incident[std::size_t(l)]) {
        const IlpEdge& e = r.edges[std::size_t(ei)];
        const std::size_t ks = r.nodes[std::size_t(e.src.value)].cost.size(), kd = r.nodes[std::size_t(e.dst.value)].cost.size();
        if (p.lead[std::size_t(e.src.value)] == l) {
          for (std::size_t c = 0; c < kd; ++c)
            if (e.cost[i * kd + c] != e.cost[j * kd + c]) return false;
        } else {
          for (std::size_t c = 0; c < ks; ++c)
            if (e.cost[c * kd + i] != e.cost[c * kd + j]) return false;
        }
      }
      return true;
    };
    // A hash of each strategy's rows and columns on those edges: equal for equivalent
    // strategies, so most pairs are told apart without comparing the matrices.
    sig.assign(k, 0);
    for (int ei : incident[std::size_t(l)]) {
      const IlpEdge& e = r.edges[std::size_t(ei)];
      const std::size_t ks = r.nodes[std::size_t(e.src.value)].cost.size(), kd = r.nodes[std::size_t(e.dst.value)].cost.size();
      const bool src_side = p.lead[std::size_t(e.src.value)] == l;
      for (std::size_t i = 0; i < k; ++i) {
        std::uint64_t h = sig[i] * 0x9e3779b97f4a7c15ULL + 1;
        const std::size_t len = src_side ? kd : ks;
        for (std::size_t c = 0; c < len; ++c) {
          double x = src_side ? e.cost[i * kd + c] : e.cost[c * kd + i];
          if (x == 0) x = 0;  // -0 == +0 for the comparison below
          std::uint64_t bits = 0;
          std::memcpy(&bits, &x, sizeof bits);
          h = (h ^ bits) * 0x100000001b3ULL;
        }
        sig[i] = h;
      }
    }
    std::vector<char> free_ok(k, 1), mem_ok(k, 1);
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) {
        if (i == j || std::isinf(gcost[j]) || (!free_ok[i] && !mem_ok[i]) || sig[i] != sig[j]) continue;
        const bool cheaper = gcost[j] < gcost[i] || (gcost[j] == gcost[i] && j < i);
        const bool no_dearer = gcost[j] <= gcost[i];
        const bool smaller = gmem[j] < gmem[i] || (gmem[j] == gmem[i] && (gcost[j] < gcost[i] || j < i));
        if (!(cheaper || (no_dearer && smaller))) continue;
        if (!same(i, j)) continue;
        if (cheaper) free_ok[i] = 0;  // a dearer equivalent never helps without memory
        if (no_dearer && gmem[j] <= gmem[i] && (gcost[j] < gcost[i] || gmem[j] < gmem[i] || j < i)) mem_ok[i] = 0;
      }
    p.allowed_free[std::size_t(l)] = std::move(free_ok);
    p.allowed_mem[std::size_t(l)] = std::move(mem_ok);
  }
}

// nullopt: out of reach.
std::optional<Prepared> prepare(const IlpRequest& r, const FrontierDpLimits& lim, bool validated) {
  if (!validated) validate(r);
  if (r.liveness.size() > 1) return std::nullopt;
  Prepared p;
  p.n = int(r.nodes.size());
  p.budget = r.memory_budget * kFit;
  p.lead.resize(std::size_t(p.n));
  for (int v = 0; v < p.n; ++v) {
    int l = v;
    while (r.nodes[std::size_t(l)].follows >= 0) l = r.nodes[std::size_t(l)].follows;
    if (l > v) return std::nullopt;  // the leader must come first
    p.lead[std::size_t(v)] = l;
  }
  std::vector<char> live(std::size_t(p.n), 0);
  if (!r.liveness.empty())
    for (NodeIdx v : r.liveness.front())
      if (live[std::size_t(v.value)]++) return std::nullopt;  // listed twice: counted twice by the ILP; left to CBC
  p.budgeted = std::isfinite(r.memory_budget) && !r.liveness.empty();
  std::vector<const std::vector<double>*> mem(std::size_t(p.n), nullptr);
  p.future.assign(std::size_t(p.n) + 1, 0.0);
  for (int v = 0; v < p.n; ++v) {
    for (double m : r.nodes[std::size_t(v)].memory)
      if (std::isnan(m) || m < 0) return std::nullopt;
    if (live[std::size_t(v)] && p.budgeted) mem[std::size_t(v)] = &r.nodes[std::size_t(v)].memory;
  }
  for (int v = p.n; v-- > 0;) {
    const double least = mem[std::size_t(v)] ? *std::min_element(mem[std::size_t(v)]->begin(), mem[std::size_t(v)]->end()) : 0.0;
    p.future[std::size_t(v)] = p.future[std::size_t(v) + 1] + least;
  }
  std::vector<std::vector<int>> edges_at(std::size_t(p.n));
  std::vector<int> last_use(std::size_t(p.n), -1);
  for (int v = 0; v < p.n; ++v) {
    int& u = last_use[std::size_t(p.lead[std::size_t(v)])];
    u = std::max(u, v);
  }
  for (std::size_t e = 0; e < r.edges.size(); ++e) {
    const int a = r.edges[e].src.value, b = r.edges[e].dst.value;
    const int t = std::max(a, b);
    edges_at[std::size_t(t)].push_back(int(e));
    for (int x : {p.lead[std::size_t(a)], p.lead[std::size_t(b)]})
      last_use[std::size_t(x)] = std::max(last_use[std::size_t(x)], t);
  }
  auto strides = [&](const std::vector<int>& f, std::vector<std::size_t>& stride) -> std::size_t {
    stride.resize(f.size());
    std::size_t s = 1;
    for (std::size_t i = 0; i < f.size(); ++i) {
      stride[i] = s;
      s *= r.nodes[std::size_t(f[i])].cost.size();
      if (s > lim.max_states) return 0;
    }
    return s;
  };
  auto pos_in = [](const std::vector<int>& f, int u) { return int(std::find(f.begin(), f.end(), u) - f.begin()); };
  std::vector<int> frontier;
  p.steps.resize(std::size_t(p.n));
  for (int t = 0; t < p.n; ++t) {
    Step& st = p.steps[std::size_t(t)];
    st.node = t;
    st.leader = p.lead[std::size_t(t)] == t;
    st.kt = st.leader ? int(r.nodes[std::size_t(t)].cost.size()) : 1;
    st.cost = &r.nodes[std::size_t(t)].cost;
    st.mem = mem[std::size_t(t)];
    std::vector<int> mid = frontier;
    if (st.leader) mid.push_back(t);
    std::vector<int> next;
    for (int u : mid)
      if (last_use[std::size_t(u)] > t) next.push_back(u);
    st.old_states = strides(frontier, st.old_stride);
    st.next_states = strides(next, st.next_stride);
    if (st.old_states == 0 || st.next_states == 0) return std::nullopt;
    st.lead_pos = pos_in(mid, p.lead[std::size_t(t)]);
    for (int ei : edges_at[std::size_t(t)]) {
      const IlpEdge& e = r.edges[std::size_t(ei)];
      st.reads.push_back({&e, pos_in(mid, p.lead[std::size_t(e.src.value)]), pos_in(mid, p.lead[std::size_t(e.dst.value)]),
                          int(r.nodes[std::size_t(e.dst.value)].cost.size())});
    }
    for (int u : next) st.next_pos.push_back(pos_in(mid, u));
    frontier = std::move(next);
  }
  dominance(r, p, live);
  return p;
}

// Stores every step's transitions (for the repeated passes of the memory-constrained
// solve); false when they exceed the limit.
bool materialize(Prepared& p, const FrontierDpLimits& lim) {
  std::size_t total = 0;
  for (Step& st : p.steps) {
    const std::size_t cap = st.old_states * std::size_t(st.kt);
    total += cap;
    if (total > lim.max_points) return false;
    st.from.reserve(cap), st.to.reserve(cap), st.pick.reserve(cap), st.tcost.reserve(cap), st.tmem.reserve(cap);
    enumerate(st, p.allowed_mem[std::size_t(st.node)], [](std::size_t) { return true; },
              [&](std::size_t sc, int j, std::size_t code, double c, double m) {
      st.from.push_back(std::uint32_t(sc));
      st.to.push_back(std::uint32_t(code));
      st.pick.push_back(j);
      st.tcost.push_back(c);
      st.tmem.push_back(m);
    });
  }
  return true;
}

// The memory-free optimum by a forward pass that stores only back-pointers; empty when
// no finite-cost solution exists.
std::vector<StrategyIdx> viterbi(const Prepared& p) {
  struct Back {
    std::uint32_t from = 0;
    std::int32_t pick = -1;
  };
  // Every step's back-pointers in one array (step t's from offset[t]), two value buffers.
  std::vector<std::size_t> offset(std::size_t(p.n) + 1, 0);
  for (int t = 0; t < p.n; ++t) offset[std::size_t(t) + 1] = offset[std::size_t(t)] + p.steps[std::size_t(t)].next_states;
  std::vector<Back> back(offset.back());
  std::vector<double> val{0.0}, nv;
  for (int t = 0; t < p.n; ++t) {
    const Step& st = p.steps[std::size_t(t)];
    nv.assign(st.next_states, INFINITY);
    Back* bk = back.data() + offset[std::size_t(t)];
    enumerate(st, p.allowed_free[std::size_t(st.node)], [&](std::size_t sc) { return std::isfinite(val[sc]); },
              [&](std::size_t sc, int j, std::size_t code, double c, double) {
      const double v = val[sc] + c;
      if (v < nv[code]) nv[code] = v, bk[code] = Back{std::uint32_t(sc), j};
    });
    std::swap(val, nv);
  }
  if (!std::isfinite(val[0])) return {};
  std::vector<StrategyIdx> choice(std::size_t(p.n));
  std::uint32_t state = 0;
  for (int t = p.n; t-- > 0;) {
    const Back& b = back[offset[std::size_t(t)] + state];
    if (p.steps[std::size_t(t)].leader) choice[std::size_t(t)] = StrategyIdx{b.pick};
    state = b.from;
  }
  for (int v = 0; v < p.n; ++v) choice[std::size_t(v)] = choice[std::size_t(p.lead[std::size_t(v)])];
  return choice;
}

// Per step t, the least (cost + lambda memory) of steps after t from each of its next
// states; h[n-1] = {0}. Also the total from the start (h_start).
struct CostToGo {
  double lambda = 0;
  std::vector<std::vector<double>> h;
  double start = INFINITY;
};

CostToGo backward(const Prepared& p, double lambda, double cost_weight = 1) {
  CostToGo g;
  g.lambda = lambda;
  g.h.resize(std::size_t(p.n));
  std::vector<double> later{0.0};  // over the next states of the last step: the empty frontier
  for (int t = p.n; t-- > 0;) {
    const Step& st = p.steps[std::size_t(t)];
    g.h[std::size_t(t)] = later;
    std::vector<double> now(st.old_states, INFINITY);
    for (std::size_t i = 0; i < st.from.size(); ++i) {
      const double v = cost_weight * st.tcost[i] + lambda * st.tmem[i] + later[st.to[i]];
      if (v < now[st.from[i]]) now[st.from[i]] = v;
    }
    later = std::move(now);
  }
  g.start = later.empty() ? INFINITY : later[0];
  return g;
}

// The solution that follows the cost-to-go greedily from the start (an optimum of
// cost + lambda memory), as one pick per leader.
std::vector<StrategyIdx> follow(const Prepared& p, const CostToGo& g) {
  std::vector<StrategyIdx> choice(std::size_t(p.n));
  std::uint32_t state = 0;
  for (int t = 0; t < p.n; ++t) {
    const Step& st = p.steps[std::size_t(t)];
    const auto lo = std::lower_bound(st.from.begin(), st.from.end(), state) - st.from.begin();
    std::size_t best = st.from.size();
    double bv = INFINITY;
    for (std::size_t i = std::size_t(lo); i < st.from.size() && st.from[i] == state; ++i) {
      const double v = st.tcost[i] + g.lambda * st.tmem[i] + g.h[std::size_t(t)][st.to[i]];
      if (v < bv) bv = v, best = i;
    }
    if (best == st.from.size()) return {};
    if (st.leader) choice[std::size_t(t)] = StrategyIdx{st.pick[best]};
    state = st.to[best];
  }
  for (int v = 0; v < p.n; ++v) choice[std::size_t(v)] = choice[std::size_t(p.lead[std::size_t(v)])];
  return choice;
}

struct Pt {
  double cost = 0, mem = 0;
  std::uint32_t parent = 0;  // index in the previous layer
  std::int32_t pick = -1;
};

struct Back {  // what backtracking needs of a point of an earlier layer
  std::uint32_t parent = 0;
  std::int32_t pick = -1;
};

// Step 3: the bounded Pareto forward pass. Keeps every partial solution whose cost plus
// a lower bound of the rest is at most `cut`, so it returns the cheapest fitting
// solution of cost <= cut whenever one exists (possibly a slightly dearer one: the
// cut has a little slack against rounding); empty when none survives, nullopt when the
// stored points exceed the limit. Only back-pointers of earlier layers are kept.
std::optional<std::vector<StrategyIdx>> pareto(const Prepared& p, const std::vector<const CostToGo*>& bounds, double cut,
                                               double budget, const FrontierDpLimits& lim, std::size_t& stored_total) {
  std::vector<std::vector<Back>> backs;
  std::vector<std::uint32_t> begin{0}, end{1};  // per state of the current layer
  std::vector<Pt> pts{Pt{}};
  std::size_t stored = 1;
  cut *= kBound;
  std::vector<std::vector<Pt>> buckets;
  backs.reserve(std::size_t(p.n));
  for (int t = 0; t < p.n; ++t) {
    const Step& st = p.steps[std::size_t(t)];
    buckets.resize(std::max(buckets.size(), st.next_states));
    const double fut = p.future[std::size_t(t) + 1];
    for (std::size_t i = 0; i < st.from.size(); ++i) {
      const std::uint32_t b0 = begin[st.from[i]], b1 = end[st.from[i]];
      if (b0 == b1) continue;
      const std::uint32_t to = st.to[i];
      auto& out = buckets[to];
      for (std::uint32_t q = b0; q < b1; ++q) {
        const Pt& pt = pts[q];
        const double m = pt.mem + st.tmem[i];
        if (m + fut > budget) break;  // ascending memory: the rest is larger
        const double c = pt.cost + st.tcost[i];
        bool keep = true;
        for (const CostToGo* g : bounds)
          if (c + g->lambda * (m - budget) + g->h[std::size_t(t)][to] > cut) keep = false;
        if (keep) out.push_back(Pt{c, m, q, st.pick[i]});
      }
    }
    std::vector<Back> back;
    back.reserve(pts.size());
    for (const Pt& pt : pts) back.push_back(Back{pt.parent, pt.pick});
    backs.push_back(std::move(back));
    std::vector<Pt> next;
    begin.assign(st.next_states, 0);
    end.assign(st.next_states, 0);
    for (std::size_t code = 0; code < st.next_states; ++code) {
      auto& v = buckets[code];
      begin[code] = std::uint32_t(next.size());
      std::stable_sort(v.begin(), v.end(), [](const Pt& x, const Pt& y) { return x.mem != y.mem ? x.mem < y.mem : x.cost < y.cost; });
      double best = INFINITY;
      for (const Pt& pt : v)
        if (pt.cost < best) {
          best = pt.cost;
          next.push_back(pt);
        }
      end[code] = std::uint32_t(next.size());
      v.clear();
    }
    pts = std::move(next);
    stored += pts.size();
    stored_total += pts.size();
    if (stored > lim.max_points) return std::nullopt;
  }
  if (pts.empty()) return std::vector<StrategyIdx>{};
  // One state; ascending memory and descending cost: the last point is the cheapest.
  std::vector<StrategyIdx> choice(std::size_t(p.n));
  const Pt& final_pt = pts.back();
  if (p.steps[std::size_t(p.n - 1)].leader) choice[std::size_t(p.n - 1)] = StrategyIdx{final_pt.pick};
  std::size_t idx = final_pt.parent;
  for (int t = p.n - 1; t-- > 0;) {  // backs[t + 1] holds the points after step t
    const Back& b = backs[std::size_t(t) + 1][idx];
    if (p.steps[std::size_t(t)].leader) choice[std::size_t(t)] = StrategyIdx{b.pick};
    idx = b.parent;
  }
  for (int v = 0; v < p.n; ++v) choice[std::size_t(v)] = choice[std::size_t(p.lead[std::size_t(v)])];
  return choice;
}

// Sweeps the cut c from 0 to n over the solutions "leaders before c take a's strategy,
// the others b's", updating cost and memory by the terms that change at each cut, and
// keeps any fitting one cheaper than `upper` (re-evaluated exactly) as the incumbent.
void mix(const IlpRequest& r, const Prepared& p, const std::vector<StrategyIdx>& a, const std::vector<StrategyIdx>& b,
         double& upper, std::vector<StrategyIdx>& incumbent) {
  const int n = p.n;
  std::vector<char> live(static_cast<std::size_t>(n), 0);
  if (!r.liveness.empty())
    for (NodeIdx v : r.liveness.front()) live[std::size_t(v.value)] = 1;
  // Terms are kept as (finite sum, count of infinite terms).
  double cost = 0, mem = 0;
  int inf = 0;
  auto add = [&](double c, double sign) {
    if (std::isinf(c)) inf += int(sign);
    else cost += sign * c;
  };
  std::vector<std::vector<std::pair<int, int>>> events(std::size_t(n) + 1);  // at cut: (kind, index)
  auto pick = [&](int v, bool from_a) { return std::size_t((from_a ? a : b)[std::size_t(v)].value); };
  for (int v = 0; v < n; ++v) {
    const auto& node = r.nodes[std::size_t(v)];
    add(node.cost[pick(v, false)], 1);
    if (live[std::size_t(v)]) mem += node.memory[pick(v, false)];
    events[std::size_t(p.lead[std::size_t(v)]) + 1].push_back({0, v});
  }
  auto edge_cost = [&](const IlpEdge& e, bool src_a, bool dst_a) {
    const std::size_t kw = r.nodes[std::size_t(e.dst.value)].cost.size();
    return e.cost[pick(e.src.value, src_a) * kw + pick(e.dst.value, dst_a)];
  };
  for (std::size_t ei = 0; ei < r.edges.size(); ++ei) {
    const IlpEdge& e = r.edges[ei];
    add(edge_cost(e, false, false), 1);
    const int ls = p.lead[std::size_t(e.src.value)], ld = p.lead[std::size_t(e.dst.value)];
    events[std::size_t(std::min(ls, ld)) + 1].push_back({1, int(ei)});
    if (ls != ld) events[std::size_t(std::max(ls, ld)) + 1].push_back({1, int(ei)});
  }
  auto edge_now = [&](const IlpEdge& e, int c) {
    return edge_cost(e, p.lead[std::size_t(e.src.value)] < c, p.lead[std::size_t(e.dst.value)] < c);
  };
  for (int c = 1; c <= n; ++c) {
    for (auto [kind, i] : events[std::size_t(c)]) {
      if (kind == 0) {
        const auto& node = r.nodes[std::size_t(i)];
        add(node.cost[pick(i, false)], -1);
        add(node.cost[pick(i, true)], 1);
        if (live[std::size_t(i)]) mem += node.memory[pick(i, true)] - node.memory[pick(i, false)];
      } else {
        const IlpEdge& e = r.edges[std::size_t(i)];
        add(edge_now(e, c - 1), -1);
        add(edge_now(e, c), 1);
      }
    }
    if (inf > 0 || cost >= upper * (1 - 1e-12) || mem > p.budget * (1 + 1e-9)) continue;
    std::vector<StrategyIdx> x(static_cast<std::size_t>(n));
    for (int v = 0; v < n; ++v) x[std::size_t(v)] = StrategyIdx{int(pick(p.lead[std::size_t(v)], p.lead[std::size_t(v)] < c))};
    double peak = 0;
    const double exact = evaluate_choice(r, x, &peak);
    if (std::isfinite(exact) && peak <= p.budget && exact < upper) upper = exact, incumbent = std::move(x);
  }
}

double memory_of(const IlpRequest& r, const std::vector<StrategyIdx>& x) {
  double peak = 0;
  (void)evaluate_choice(r, x, &peak);
  return peak;
}

}  // namespace

std::optional<IlpResult> solve_frontier_dp(const IlpRequest& r, const FrontierDpLimits& limits, bool explain_infeasible,
                                           bool validated) {
  auto prep = prepare(r, limits, validated);
  if (!prep) return std::nullopt;
  Prepared& p = *prep;
  IlpResult res;
  res.status = IlpStatus::optimal;
  if (r.nodes.empty()) return res;
  auto done = [&](std::vector<StrategyIdx> x) {
    res.choice = std::move(x);
    res.objective = evaluate_choice(r, res.choice, &res.peak_memory);
    return res;
  };
  std::vector<StrategyIdx> x0 = viterbi(p);
  if (x0.empty()) {
    res.status = IlpStatus::infeasible;
    res.min_feasible_memory = INFINITY;
    res.message = "no combination of strategies has a finite cost (forbidden strategies or resharding pairs)";
    return res;
  }
  if (!p.budgeted || memory_of(r, x0) <= p.budget) return done(std::move(x0));
  if (!materialize(p, limits)) return std::nullopt;
  const CostToGo free = backward(p, 0);

  // Does anything fit? The least memory: lambda so large that cost only breaks ties.
  // Computed exactly as a cost-free pass over memory.
  {
    const CostToGo least = backward(p, 1, /*cost_weight=*/0);
    if (least.start > p.budget) {
      res.status = IlpStatus::infeasible;
      res.min_feasible_memory = explain_infeasible ? least.start : 0;
      res.message = explain_infeasible ? fmt::format("does not fit in {:.3f} GB per device; the smallest memory that fits is {:.3f} GB",
                                                     r.memory_budget * 1e-9, least.start * 1e-9)
                                       : "infeasible";
      return res;
    }
  }

  // Lagrangian bounds. lambda_lo: its solution overflows; lambda_hi: its solution fits.
  const double M = p.budget;
  double lower = free.start;  // L(0)
  CostToGo best_bound = free;
  double upper = INFINITY;
  std::vector<StrategyIdx> incumbent;
  std::vector<std::vector<StrategyIdx>> seen{x0};  // distinct Lagrangian solutions
  auto probe = [&](double lambda) -> bool {  // true when x_lambda fits
    CostToGo g = backward(p, lambda);
    const double L = g.start - lambda * M;
    std::vector<StrategyIdx> x = follow(p, g);
    const bool fits = !x.empty() && memory_of(r, x) <= p.budget;
    if (fits) {
      const double c = evaluate_choice(r, x);
      if (c < upper) upper = c, incumbent = x;
    }
    if (!x.empty() && std::find(seen.begin(), seen.end(), x) == seen.end()) seen.push_back(std::move(x));
    if (L > lower) lower = L, best_bound = std::move(g);
    return fits;
  };
  const double mem0 = memory_of(r, x0);
  double lo = 0, hi = std::max(free.start, 1e-30) / std::max(mem0, 1.0);
  for (int i = 0; i < 80 && !probe(hi); ++i) lo = hi, hi *= 4;
  for (int i = 0; i < 14 && upper - lower > std::abs(upper) * 1e-9; ++i) {
    const double mid = lo > 0 ? std::sqrt(lo * hi) : hi / 4;
    if (probe(mid)) hi = mid;
    else lo = mid;
  }
  if (incumbent.empty()) return std::nullopt;  // cannot happen when the least memory fits
  if (upper - lower <= std::abs(upper) * 1e-9) return done(std::move(incumbent));
  res.dp_stats.lagrangian_lower = lower;
  res.dp_stats.lagrangian_upper = upper;

  // A tighter incumbent first. The Lagrangian solutions switch identical layers all at
  // once, while the optimum often mixes them: for every ordered pair (a, b) of them and
  // every cut, leaders before the cut take a's strategy and the rest b's.
  for (std::size_t ia = 0; ia < seen.size(); ++ia)
    for (std::size_t ib = 0; ib < seen.size(); ++ib)
      if (ia != ib) mix(r, p, seen[ia], seen[ib], upper, incumbent);
  res.dp_stats.mixed_upper = upper;
  if (upper - lower <= std::abs(upper) * 1e-9) return done(std::move(incumbent));
  // The exact pass, first with optimistic cuts between the lower and the upper bound:
  // fewer partial solutions survive a lower cut, and a solution found at or below the
  // cut is optimal (every solution that cheap survives). Otherwise raise the cut.
  for (double f : {0.125, 0.5, 1.0}) {
    const double cut = f < 1 ? lower + f * (upper - lower) : upper;
    const auto better = pareto(p, {&free, &best_bound}, cut, p.budget, limits, res.dp_stats.pareto_points);
    if (!better) return std::nullopt;
    if (better->empty()) continue;
    double peak = 0;
    const double c = evaluate_choice(r, *better, &peak);
    if (!std::isfinite(c) || peak > p.budget) continue;
    if (c < upper) upper = c, incumbent = *better;
    if (c <= cut) break;
  }
  return done(std::move(incumbent));
}

}  // namespace clustersim::search

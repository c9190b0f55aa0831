// Stage-construction DP and layer clustering. See inter_op.hpp and
// strategies/search/README.md for the equations.
#include "strategies/search/inter_op.hpp"

#include "strategies/rules.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <stdexcept>

namespace clustersim::search {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

std::string Submesh::name() const { return fmt::format("({},{})", hosts, gpus); }

std::vector<Submesh> submesh_shapes(std::int64_t hosts, std::int64_t gpus_per_host, SubmeshSpace space) {
  std::vector<Submesh> out;
  for (std::int64_t m = 1; m < gpus_per_host; m *= 2) out.push_back({1, m});
  out.push_back({1, gpus_per_host});
  for (std::int64_t n = 2; n <= hosts; n = space == SubmeshSpace::all ? n + 1 : 2 * n) out.push_back({n, gpus_per_host});
  return out;
}

std::string submesh_space_name(SubmeshSpace s) { return s == SubmeshSpace::all ? "all" : "power-of-two"; }

SubmeshSpace parse_submesh_space(const std::string& name) {
  if (name == "all") return SubmeshSpace::all;
  if (name == "power-of-two") return SubmeshSpace::power_of_two;
  throw std::invalid_argument("expected one of power-of-two | all, got \"" + name + "\"");
}

Seconds pipeline_latency(const std::vector<StageChoice>& stages, std::int64_t micro_batches) {
  std::vector<Seconds> latencies;
  latencies.reserve(stages.size());
  for (const auto& s : stages) latencies.push_back(s.latency);
  return pipeline_makespan(latencies, micro_batches, 1);
}

InterOpResult solve_inter_op(const InterOpProblem& p, const StageLatency& latency) {
  InterOpResult best;
  const int K = p.layers;
  const int S = p.max_stages > 0 ? std::min(p.max_stages, K) : K;
  const int D = int(p.devices);
  const int nsub = int(p.submeshes.size());
  if (K <= 0) return best;
  // Every stage latency the DP may use: lat[s][k][i][sub] (s = stages from the end).
  auto at = [&](int s, int k, int i, int sub) {
    return ((std::size_t(s - 1) * std::size_t(K) + std::size_t(k)) * std::size_t(K) + std::size_t(i)) * std::size_t(nsub) + std::size_t(sub);
  };
  std::vector<double> lat(std::size_t(S) * std::size_t(K) * std::size_t(K) * std::size_t(nsub), kInf);
  std::vector<double> candidates;
  for (int s = 1; s <= S; ++s)
    for (int k = 0; k < K; ++k)
      for (int i = k; i < K; ++i)
        for (int sub = 0; sub < nsub; ++sub) {
          if (p.submeshes[std::size_t(sub)].devices() > D) continue;
          // A stage needs s - 1 stages after it, each with at least one layer.
          if (K - 1 - i < s - 1) continue;
          const double t = latency(k, i, sub, s);
          lat[at(s, k, i, sub)] = t;
          if (std::isfinite(t)) candidates.push_back(t);
        }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  best.t_max_candidates = int(candidates.size());

  // F[s][k][d]: least sum of latencies of s stages covering layers k..K-1 on exactly d devices.
  const std::size_t states = std::size_t(S + 1) * std::size_t(K + 1) * std::size_t(D + 1);
  std::vector<double> F(states);
  struct Arg {
    int i = -1, sub = -1;
  };
  std::vector<Arg> arg(states);
  auto fi = [&](int s, int k, int d) { return (std::size_t(s) * std::size_t(K + 1) + std::size_t(k)) * std::size_t(D + 1) + std::size_t(d); };

  for (double t_max : candidates) {
    if (double(p.micro_batches) * t_max >= best.iteration_time) break;  // early pruning: T >= B t_max
    ++best.t_max_tried;
    std::fill(F.begin(), F.end(), kInf);
    F[fi(0, K, 0)] = 0;
    // Per (s, k): the least and largest d with a finite F (empty: first > second).
    std::vector<std::pair<int, int>> finite_range(std::size_t(S + 1) * std::size_t(K + 1), {D + 1, -1});
    finite_range[std::size_t(K)] = {0, 0};  // s = 0, k = K
    // For every d the candidates (i, sub) are tried in the same order with the same
    // strict comparison as a loop over d outside would: the same values and choices. With
    // the candidate outside, one whose latency exceeds t_max (most of them in the early
    // passes) is skipped once instead of once per device count, and the loop over d
    // runs only where the rest is finite.
    for (int s = 1; s <= S; ++s)
      for (int k = K - 1; k >= 0; --k) {
        double* out = &F[fi(s, k, 0)];
        Arg* out_arg = &arg[fi(s, k, 0)];
        std::fill(out_arg, out_arg + D + 1, Arg{});
        for (int i = k; i < K; ++i) {
          const double* rest = &F[fi(s - 1, i + 1, 0)];
          const auto [lo, hi] = finite_range[std::size_t(s - 1) * std::size_t(K + 1) + std::size_t(i + 1)];
          if (lo > hi) continue;
          for (int sub = 0; sub < nsub; ++sub) {
            const double t = lat[at(s, k, i, sub)];
            if (!(t <= t_max)) continue;
            const int size = int(p.submeshes[std::size_t(sub)].devices());
            const int d_end = std::min(D, hi + size);
            for (int d = std::max(1, lo + size); d <= d_end; ++d) {
              const double r = rest[d - size];
              if (!std::isfinite(r)) continue;
              if (t + r < out[d]) {
                out[d] = t + r;
                out_arg[d] = {i, sub};
              }
            }
          }
        }
        auto& range = finite_range[std::size_t(s) * std::size_t(K + 1) + std::size_t(k)];
        range = {D + 1, -1};
        for (int d = 1; d <= D; ++d)
          if (std::isfinite(out[d])) range = {std::min(range.first, d), d};
      }
    for (int s = 1; s <= S; ++s) {
      if (!std::isfinite(F[fi(s, 0, D)])) continue;
      std::vector<StageChoice> stages;
      int k = 0, d = D;
      for (int r = s; r >= 1; --r) {
        const Arg a = arg[fi(r, k, d)];
        stages.push_back({k, a.i, a.sub, lat[at(r, k, a.i, a.sub)]});
        d -= int(p.submeshes[std::size_t(a.sub)].devices());
        k = a.i + 1;
      }
      const Seconds T = pipeline_latency(stages, p.micro_batches);
      if (T < best.iteration_time) {
        best.iteration_time = T;
        best.stages = std::move(stages);
        best.feasible = true;
      }
    }
  }
  return best;
}

InterOpResult brute_force_inter_op(const InterOpProblem& p, const StageLatency& latency) {
  InterOpResult best;
  const int K = p.layers;
  const int S = p.max_stages > 0 ? std::min(p.max_stages, K) : K;
  std::vector<std::pair<int, int>> ranges;  // (first, last)
  std::vector<int> subs;
  std::function<void(int, std::int64_t)> rec = [&](int k, std::int64_t used) {
    if (k == K) {
      if (used != p.devices) return;
      std::vector<StageChoice> stages;
      const int n = int(ranges.size());
      for (int j = 0; j < n; ++j) {
        const double t = latency(ranges[std::size_t(j)].first, ranges[std::size_t(j)].second, subs[std::size_t(j)], n - j);
        if (!std::isfinite(t)) return;
        stages.push_back({ranges[std::size_t(j)].first, ranges[std::size_t(j)].second, subs[std::size_t(j)], t});
      }
      const Seconds T = pipeline_latency(stages, p.micro_batches);
      if (T < best.iteration_time) {
        best.iteration_time = T;
        best.stages = stages;
        best.feasible = true;
      }
      return;
    }
    if (int(ranges.size()) == S) return;
    for (int i = k; i < K; ++i)
      for (int sub = 0; sub < int(p.submeshes.size()); ++sub) {
        const std::int64_t size = p.submeshes[std::size_t(sub)].devices();
        if (used + size > p.devices) continue;
        ranges.emplace_back(k, i);
        subs.push_back(sub);
        rec(i + 1, used + size);
        ranges.pop_back();
        subs.pop_back();
      }
  };
  rec(0, 0);
  return best;
}

std::vector<int> cluster_layers(const std::vector<double>& flops, const std::vector<double>& cut_bytes, int clusters,
                                double eps) {
  const int n = int(flops.size());
  clusters = std::max(1, std::min(clusters, n));
  std::vector<double> prefix(std::size_t(n + 1), 0.0);
  for (int i = 0; i < n; ++i) prefix[std::size_t(i + 1)] = prefix[std::size_t(i)] + flops[std::size_t(i)];
  const double limit = (1 + eps) * prefix[std::size_t(n)] / clusters;
  auto layer_flops = [&](int a, int b) { return prefix[std::size_t(b)] - prefix[std::size_t(a)]; };  // ops [a, b)
  // G[c][r] = (max cut comm, max layer FLOPs) of the best grouping of ops [0, r) into c layers.
  using Val = std::pair<double, double>;
  const Val none{kInf, kInf};
  std::vector<std::vector<Val>> G(std::size_t(clusters + 1), std::vector<Val>(std::size_t(n + 1), none));
  std::vector<std::vector<int>> from(std::size_t(clusters + 1), std::vector<int>(std::size_t(n + 1), -1));
  auto solve = [&](bool bounded) {
    for (auto& row : G) std::fill(row.begin(), row.end(), none);
    G[0][0] = {0, 0};
    for (int c = 1; c <= clusters; ++c)
      for (int r = c; r <= n; ++r)
        for (int l = c - 1; l < r; ++l) {
          const Val prev = G[std::size_t(c - 1)][std::size_t(l)];
          if (!std::isfinite(prev.first)) continue;
          const double f = layer_flops(l, r);
          if (bounded && f > limit * (1 + 1e-12)) continue;
          // The cut after this layer (none after the last operator).
          const double cut = r < n ? cut_bytes[std::size_t(r - 1)] : 0.0;
          const Val v{std::max(prev.first, cut), std::max(prev.second, f)};
          if (v < G[std::size_t(c)][std::size_t(r)]) {
            G[std::size_t(c)][std::size_t(r)] = v;
            from[std::size_t(c)][std::size_t(r)] = l;
          }
        }
    return std::isfinite(G[std::size_t(clusters)][std::size_t(n)].first);
  };
  if (!solve(true)) (void)solve(false);
  std::vector<int> starts;
  for (int c = clusters, r = n; c > 0; --c) {
    const int l = from[std::size_t(c)][std::size_t(r)];
    starts.push_back(l);
    r = l;
  }
  std::reverse(starts.begin(), starts.end());
  return starts;
}

}  // namespace clustersim::search

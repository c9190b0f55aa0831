#include "costmodel/nvlink_mesh.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

namespace clustersim {

const std::vector<NvlinkPair>& hybrid_cube_mesh() {
  // The cube's 12 edges (4 of them doubled) and the diagonals of faces 0-1-2-3 and
  // 4-5-6-7, as `nvidia-smi topo -m` reads on a DGX-1V (see the header).
  static const std::vector<NvlinkPair> table{
      {0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1}, {1, 5, 2}, {2, 3, 2},
      {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2},
  };
  return table;
}

int MeshWiring::links(int a, int b) const {
  if (a > b) std::swap(a, b);
  for (const auto& p : pairs)
    if (p.a == a && p.b == b) return p.links;
  return 0;
}

MeshWiring mesh_wiring(const ClusterModel& c) {
  if (c.fabric != Fabric::nvlink_mesh || c.gpus_per_node < 1 || c.gpus_per_node > kHybridCubeMeshGpus)
    throw std::invalid_argument(fmt::format("no hybrid cube mesh of {} GPUs on fabric {}", c.gpus_per_node, to_string(c.fabric)));
  MeshWiring w;
  w.gpus = static_cast<int>(c.gpus_per_node);
  for (const auto& p : hybrid_cube_mesh())
    if (p.b < w.gpus) w.pairs.push_back(p);
  w.link_bandwidth = mesh_link_bandwidth(c);
  w.host_bandwidth = mesh_host_bandwidth(c);
  return w;
}

BytesPerSecond mesh_link_bandwidth(const ClusterModel& c) {
  return c.intra_bandwidth / kHybridCubeMeshLinksPerGpu * c.gpu.efficiency.collective_nvlink;
}

// The pcie fabric scales PCIe by the same intra-node NCCL efficiency.
BytesPerSecond mesh_host_bandwidth(const ClusterModel& c) { return c.gpu.pcie_bandwidth * c.gpu.efficiency.collective_nvlink; }

int MeshRings::width() const {
  int w = 0;
  for (const auto& r : rings) w += r.width;
  return w;
}

double MeshRings::share(std::size_t i) const {
  if (!nvlink) return 1.0;
  return double(rings[i].width) / double(width());
}

namespace {

constexpr int kMaxMembers = kHybridCubeMeshGpus;
using Capacity = std::array<std::array<int, kMaxMembers>, kMaxMembers>;  // by member position

// The directed Hamiltonian ring from position 0 with the largest bottleneck on `cap`;
// among equal ones the first in lexicographic order of positions (strictly greater
// replaces, so the first found stays). Depth-first, pruned by the best so far.
struct RingSearch {
  const Capacity& cap;
  int n;
  std::array<int, kMaxMembers> path{}, best_path{};
  std::array<bool, kMaxMembers> used{};
  int best = 0;

  void extend(int depth, int bottleneck) {
    const int last = path[static_cast<std::size_t>(depth - 1)];
    if (depth == n) {
      const int closing = std::min(bottleneck, cap[static_cast<std::size_t>(last)][0]);
      if (closing > best) {
        best = closing;
        best_path = path;
      }
      return;
    }
    for (int next = 1; next < n; ++next) {
      if (used[static_cast<std::size_t>(next)]) continue;
      const int b = std::min(bottleneck, cap[static_cast<std::size_t>(last)][static_cast<std::size_t>(next)]);
      if (b <= best) continue;
      used[static_cast<std::size_t>(next)] = true;
      path[static_cast<std::size_t>(depth)] = next;
      extend(depth + 1, b);
      used[static_cast<std::size_t>(next)] = false;
    }
  }
};

// Every directed Hamiltonian ring from position 0 over links with capacity, in
// lexicographic order of positions.
void all_rings(const Capacity& cap, int n, std::vector<int>& path, std::array<bool, kMaxMembers>& used,
               std::vector<std::vector<int>>& out) {
  const auto last = static_cast<std::size_t>(path.back());
  if (static_cast<int>(path.size()) == n) {
    if (cap[last][0] > 0) out.push_back(path);
    return;
  }
  for (int next = 1; next < n; ++next) {
    if (used[static_cast<std::size_t>(next)] || cap[last][static_cast<std::size_t>(next)] == 0) continue;
    used[static_cast<std::size_t>(next)] = true;
    path.push_back(next);
    all_rings(cap, n, path, used, out);
    path.pop_back();
    used[static_cast<std::size_t>(next)] = false;
  }
}

// The most total width any packing of `rings` reaches on `cap`, by branch and bound
// (each ring's count from the largest that fits down to 0); only a packing strictly
// wider than `best` replaces `counts`.
struct ExactPacking {
  const std::vector<std::vector<int>>& rings;
  Capacity cap;
  int n;
  int best;
  std::vector<int> counts, current;

  int out_of_first() const {
    int c = 0;
    for (int b = 1; b < n; ++b) c += cap[0][static_cast<std::size_t>(b)];
    return c;
  }
  void search(std::size_t i, int total) {
    if (total > best) {
      best = total;
      counts = current;
    }
    // Every ring leaves position 0 once: what it has left bounds what can still come.
    if (i == rings.size() || total + out_of_first() <= best) return;
    const auto& r = rings[i];
    int fits = std::numeric_limits<int>::max();
    for (int k = 0; k < n; ++k)
      fits = std::min(fits, cap[static_cast<std::size_t>(r[static_cast<std::size_t>(k)])]
                               [static_cast<std::size_t>(r[static_cast<std::size_t>((k + 1) % n)])]);
    for (int x = fits; x >= 0; --x) {
      for (int k = 0; k < n; ++k)
        cap[static_cast<std::size_t>(r[static_cast<std::size_t>(k)])]
           [static_cast<std::size_t>(r[static_cast<std::size_t>((k + 1) % n)])] -= x;
      current[i] = x;
      search(i + 1, total + x);
      current[i] = 0;
      for (int k = 0; k < n; ++k)
        cap[static_cast<std::size_t>(r[static_cast<std::size_t>(k)])]
           [static_cast<std::size_t>(r[static_cast<std::size_t>((k + 1) % n)])] += x;
    }
  }
};

}  // namespace

MeshRings pack_rings(const std::vector<NvlinkPair>& pairs, const std::vector<int>& members) {
  MeshRings out;
  const int n = static_cast<int>(members.size());
  if (n < 2) return out;
  if (n > kMaxMembers) throw std::invalid_argument(fmt::format("ring packing over {} GPUs (at most {})", n, kMaxMembers));
  Capacity cap{};
  for (const auto& p : pairs) {
    const auto ia = std::find(members.begin(), members.end(), p.a), ib = std::find(members.begin(), members.end(), p.b);
    if (ia == members.end() || ib == members.end()) continue;
    const auto a = static_cast<std::size_t>(ia - members.begin()), b = static_cast<std::size_t>(ib - members.begin());
    cap[a][b] = cap[b][a] = p.links;
  }
  if (n == 2) {
    // The ring 0 -> 1 -> 0 is its own reverse: it takes both directions of the pair.
    if (cap[0][1] > 0) out.rings.push_back({members, cap[0][1]});
  } else {
    const Capacity full = cap;
    for (;;) {
      RingSearch s{cap, n};
      s.used[0] = true;
      s.path[0] = 0;
      s.extend(1, std::numeric_limits<int>::max());
      if (s.best == 0) break;
      MeshRing ring{{}, s.best};
      for (int i = 0; i < n; ++i) {
        const auto from = static_cast<std::size_t>(s.best_path[static_cast<std::size_t>(i)]);
        const auto to = static_cast<std::size_t>(s.best_path[static_cast<std::size_t>((i + 1) % n)]);
        cap[from][to] -= s.best;
        ring.order.push_back(members[from]);
      }
      out.rings.push_back(std::move(ring));
    }
    // The greedy packing is not always the widest (GPUs 0-6 of a DGX-1: 3 links where 4
    // fit); an exact search over the few NVLink rings (60 on all 8 GPUs) replaces it
    // when it finds a wider one.
    std::vector<std::vector<int>> rings;
    std::vector<int> path{0};
    std::array<bool, kMaxMembers> used{};
    used[0] = true;
    all_rings(full, n, path, used, rings);
    ExactPacking exact{rings, full, n, out.width(), {}, std::vector<int>(rings.size(), 0)};
    exact.search(0, 0);
    if (!exact.counts.empty()) {
      out.rings.clear();
      for (std::size_t i = 0; i < rings.size(); ++i) {
        if (exact.counts[i] == 0) continue;
        MeshRing ring{{}, exact.counts[i]};
        for (int pos : rings[i]) ring.order.push_back(members[static_cast<std::size_t>(pos)]);
        out.rings.push_back(std::move(ring));
      }
    }
  }
  if (out.rings.empty()) {
    out.nvlink = false;
    out.rings.push_back({members, 0});
  }
  return out;
}

const MeshRings& hybrid_cube_mesh_rings(const std::vector<int>& members) {
  // Every subset of the 8 GPUs, packed once (a few milliseconds) on first use; the
  // estimator asks for rings in its inner loops.
  static const std::vector<MeshRings> table = [] {
    std::vector<MeshRings> t(std::size_t{1} << kHybridCubeMeshGpus);
    for (unsigned mask = 0; mask < t.size(); ++mask) {
      std::vector<int> m;
      for (int g = 0; g < kHybridCubeMeshGpus; ++g)
        if (mask & (1u << g)) m.push_back(g);
      t[mask] = pack_rings(hybrid_cube_mesh(), m);
    }
    return t;
  }();
  if (!std::is_sorted(members.begin(), members.end()) ||
      std::adjacent_find(members.begin(), members.end()) != members.end())
    throw std::invalid_argument("hybrid_cube_mesh_rings: members must be distinct and sorted ascending");
  unsigned mask = 0;
  for (int g : members) {
    if (g < 0 || g >= kHybridCubeMeshGpus) throw std::invalid_argument(fmt::format("GPU {} is not in the hybrid cube mesh", g));
    mask |= 1u << g;
  }
  return table[mask];
}

MeshLinks mesh_links(const std::vector<NvlinkPair>& pairs, const std::vector<int>& members, const MeshRings& rings) {
  const auto links = [&](int a, int b) {
    if (a > b) std::swap(a, b);
    for (const auto& p : pairs)
      if (p.a == a && p.b == b) return p.links;
    return 0;
  };
  MeshLinks l;
  if (rings.nvlink) {
    l.ring_width = rings.width();
  } else {
    const auto& order = rings.rings.front().order;
    for (std::size_t i = 0; i < order.size(); ++i) {
      const int k = links(order[i], order[(i + 1) % order.size()]);
      if (k == 0) l.fallback_host_hop = true;
      else if (l.fallback_fewest_links == 0 || k < l.fallback_fewest_links) l.fallback_fewest_links = k;
    }
  }
  for (int a : members) {
    int through_host = 0;
    for (int b : members) {
      if (a == b) continue;
      const int k = links(a, b);
      if (k == 0) ++through_host;
      else if (l.fewest_links == 0 || k < l.fewest_links) l.fewest_links = k;
    }
    l.most_host_peers = std::max(l.most_host_peers, through_host);
  }
  return l;
}

BytesPerSecond ring_bandwidth(const MeshLinks& l, BytesPerSecond link_bandwidth, BytesPerSecond host_bandwidth) {
  if (l.ring_width > 0) return double(l.ring_width) * link_bandwidth;
  double slowest = std::numeric_limits<double>::infinity();
  if (l.fallback_fewest_links > 0) slowest = double(l.fallback_fewest_links) * link_bandwidth;
  if (l.fallback_host_hop) slowest = std::min(slowest, host_bandwidth);
  return slowest;
}

Seconds mesh_all_to_all_time(const MeshLinks& l, BytesPerSecond link_bandwidth, BytesPerSecond host_bandwidth,
                             Bytes per_peer) {
  // Every pair's own NVLinks carry one piece each way; a GPU's PCIe link carries every
  // host-routed piece it sends (and as many it receives).
  Seconds t = 0;
  if (l.fewest_links > 0) t = per_peer / (double(l.fewest_links) * link_bandwidth);
  if (l.most_host_peers > 0) t = std::max(t, double(l.most_host_peers) * per_peer / host_bandwidth);
  return t;
}

BytesPerSecond ring_bandwidth(const MeshWiring& w, const MeshRings& r) {
  if (r.rings.empty()) return std::numeric_limits<double>::infinity();
  return ring_bandwidth(mesh_links(w.pairs, {}, r), w.link_bandwidth, w.host_bandwidth);
}

Seconds mesh_all_to_all_time(const MeshWiring& w, const std::vector<int>& members, Bytes per_peer) {
  return mesh_all_to_all_time(mesh_links(w.pairs, members, MeshRings{}), w.link_bandwidth, w.host_bandwidth, per_peer);
}

}  // namespace clustersim

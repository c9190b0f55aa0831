#include "costmodel/collectives.hpp"
#include "costmodel/nccl_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "costmodel/nvlink_mesh.hpp"

namespace clustersim {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all-reduce";
    case Collective::all_gather: return "all-gather";
    case Collective::reduce_scatter: return "reduce-scatter";
    case Collective::all_to_all: return "all-to-all";
    case Collective::broadcast: return "broadcast";
    case Collective::send_recv: return "send-recv";
  }
  return "?";
}

Seconds all_reduce_time(AllReduceAlgorithm a, std::int64_t ranks, Bytes bytes, double bandwidth, Seconds alpha) {
  const double n = double(ranks);
  if (a == AllReduceAlgorithm::tree) return 2 * bytes / bandwidth + 2 * std::ceil(std::log2(n)) * alpha;
  return 2 * (n - 1) / n * bytes / bandwidth + 2 * (n - 1) * alpha;
}

AllReduceAlgorithm choose_all_reduce(std::int64_t ranks, Bytes bytes, double bandwidth, Seconds alpha) {
  const double tree = all_reduce_time(AllReduceAlgorithm::tree, ranks, bytes, bandwidth, alpha);
  const double ring = all_reduce_time(AllReduceAlgorithm::ring, ranks, bytes, bandwidth, alpha);
  return tree < ring ? AllReduceAlgorithm::tree : AllReduceAlgorithm::ring;
}

std::vector<std::vector<int>> node_placements(std::int64_t gpus_per_node, std::int64_t per_node, std::int64_t stride) {
  std::vector<std::vector<int>> sets;
  const std::int64_t k = std::clamp<std::int64_t>(per_node, 1, std::max<std::int64_t>(1, gpus_per_node));
  if (stride <= 0) {
    sets = node_placements(gpus_per_node, k, 1);
    const std::int64_t even = std::max<std::int64_t>(1, gpus_per_node / k);
    if (even > 1)
      for (auto& set : node_placements(gpus_per_node, k, even)) sets.push_back(std::move(set));
    return sets;
  }
  for (std::int64_t o = 0; o + (k - 1) * stride < gpus_per_node; ++o) {
    if (o % (k * stride) >= stride) continue;
    std::vector<int> set;
    for (std::int64_t i = 0; i < k; ++i) set.push_back(static_cast<int>(o + i * stride));
    sets.push_back(std::move(set));
  }
  return sets;
}

namespace {

// The mesh figures of every placement of a group shape, in links (mesh_links): kept for
// every node size, group size and stride the hybrid cube mesh has, because the
// estimator and the search ask for them in their inner loops.
std::vector<MeshLinks> placement_links(std::int64_t gpus_per_node, std::int64_t per_node, std::int64_t stride) {
  std::vector<MeshLinks> out;
  for (const auto& set : node_placements(gpus_per_node, per_node, stride))
    out.push_back(mesh_links(hybrid_cube_mesh(), set, hybrid_cube_mesh_rings(set)));
  return out;
}

const std::vector<MeshLinks>& mesh_placement_links(std::int64_t gpus_per_node, std::int64_t per_node, std::int64_t stride) {
  constexpr std::int64_t G = kHybridCubeMeshGpus;
  static const std::vector<std::vector<MeshLinks>> table = [] {
    std::vector<std::vector<MeshLinks>> t(static_cast<std::size_t>((G + 1) * (G + 1) * G));
    for (std::int64_t g = 1; g <= G; ++g)
      for (std::int64_t k = 1; k <= g; ++k)
        for (std::int64_t s = 0; s < G; ++s) t[static_cast<std::size_t>((g * (G + 1) + k) * G + s)] = placement_links(g, k, s);
    return t;
  }();
  if (gpus_per_node < 1 || gpus_per_node > G)
    throw std::invalid_argument("nvlink-mesh: no hybrid cube mesh of " + std::to_string(gpus_per_node) + " GPUs");
  const std::int64_t k = std::clamp<std::int64_t>(per_node, 1, gpus_per_node);
  const auto at = [&](std::int64_t s) -> const std::vector<MeshLinks>& {
    return table[static_cast<std::size_t>((gpus_per_node * (G + 1) + k) * G + s)];
  };
  // A stride that places no group of this size on the node says nothing: as unknown.
  if (stride <= 0 || stride >= G || at(stride).empty()) return at(0);
  return at(stride);
}

}  // namespace

BytesPerSecond intra_ring_bandwidth(const ClusterModel& c, const Group& g) {
  if (c.fabric != Fabric::nvlink_mesh) return c.intra_bandwidth * c.gpu.efficiency.collective_nvlink;
  const BytesPerSecond link = mesh_link_bandwidth(c), host = mesh_host_bandwidth(c);
  double slowest = 1e300;
  for (const auto& l : mesh_placement_links(c.gpus_per_node, g.per_node, g.stride))
    slowest = std::min(slowest, ring_bandwidth(l, link, host));
  return slowest;
}

bool tree_all_reduce_considered(bool nvlink_mesh, bool one_node) { return !(nvlink_mesh && one_node); }

Seconds collective_time(const ClusterModel& c, Collective kind, Bytes bytes, Group g, double node_share) {
  const double n = double(g.size);
  if (g.size <= 1 || bytes <= 0) return 0;
  const bool multi_node = g.nodes() > 1;
  const double intra_bw = g.per_node > 1 ? intra_ring_bandwidth(c, g) : 0.0;
  const double net_bw = c.node_network_bandwidth() * c.gpu.efficiency.collective_network * node_share;
  const double alpha = multi_node ? c.inter_latency : c.intra_latency;
  // Bottleneck bandwidth of a ring through the group (per ring-edge stream).
  double ring_bw = 1e300;
  if (g.per_node > 1) ring_bw = std::min(ring_bw, intra_bw);
  if (multi_node) ring_bw = std::min(ring_bw, net_bw);
  const double steps = n - 1;
  // NCCL as measured inside one node (the profile's nccl section): the fitted latency and
  // the per-op, per-size efficiency on the ring term; NCCL's rings at every size there.
  if (!multi_node && g.per_node > 1)
    if (const auto f = nvlink_nccl_terms(c, kind, g.size, bytes))
      return f->latency + f->ring_factor * bus_factor(kind, g.size) * bytes / intra_bw;

  switch (kind) {
    case Collective::all_reduce:
      if (!tree_all_reduce_considered(c.fabric == Fabric::nvlink_mesh, !multi_node))
        return all_reduce_time(AllReduceAlgorithm::ring, g.size, bytes, ring_bw, alpha);
      return all_reduce_time(choose_all_reduce(g.size, bytes, ring_bw, alpha), g.size, bytes, ring_bw, alpha);
    case Collective::all_gather:
    case Collective::reduce_scatter: return steps / n * bytes / ring_bw + steps * alpha;
    case Collective::broadcast: return bytes / ring_bw + steps * alpha;
    case Collective::send_recv: {
      // One transfer; across nodes it uses one GPU's share of the NICs.
      const double bw = multi_node ? c.node_network_bandwidth() * c.gpu.efficiency.collective_network /
                                         double(std::max<std::int64_t>(1, c.gpus_per_node))
                                   : intra_bw;
      return bytes / bw + alpha;
    }
    case Collective::all_to_all: {
      const double local = double(g.per_node);
      double t = 0;
      if (g.per_node > 1 && c.fabric == Fabric::nvlink_mesh) {
        const BytesPerSecond link = mesh_link_bandwidth(c), host = mesh_host_bandwidth(c);
        for (const auto& l : mesh_placement_links(c.gpus_per_node, g.per_node, g.stride))
          t = std::max(t, mesh_all_to_all_time(l, link, host, bytes / n));
      } else if (g.per_node > 1) {
        t = std::max(t, bytes * (local - 1) / n / intra_bw);
      }
      if (multi_node) t = std::max(t, local * bytes * (n - local) / n / net_bw);
      return t + steps * alpha;
    }
  }
  return 0;
}

}  // namespace clustersim

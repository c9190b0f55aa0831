#include "costmodel/collectives.hpp"
#include "costmodel/nccl_model.hpp"

#include <algorithm>
#include <cmath>

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

Seconds collective_time(const ClusterModel& c, Collective kind, Bytes bytes, Group g, double node_share) {
  const double n = double(g.size);
  if (g.size <= 1 || bytes <= 0) return 0;
  const bool multi_node = g.nodes() > 1;
  const double intra_bw = c.intra_bandwidth * c.gpu.efficiency.collective_nvlink;
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
      if (g.per_node > 1) t = std::max(t, bytes * (local - 1) / n / intra_bw);
      if (multi_node) t = std::max(t, local * bytes * (n - local) / n / net_bw);
      return t + steps * alpha;
    }
  }
  return 0;
}

}  // namespace clustersim

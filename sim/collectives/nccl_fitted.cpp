// Collectives inside one node priced by the GPU profile's NCCL fit (costmodel/nccl_model.hpp),
// the figures collective_time uses, so simulator and estimator agree on a lone collective:
//   - the bytes the chosen algorithm moves are scaled by collective_nvlink / efficiency
//     (op, ranks, size): the platform's NVLink links run at collective_nvlink of their
//     bandwidth, and a collective that reaches less than that keeps them busy for
//     proportionally longer. Scaling bytes rather than a per-collective link rate keeps
//     contention as it is: two collectives sharing a port each hold it for their own
//     (longer) time, at the link's one rate; link loads count these wire-time bytes;
//   - NCCL's measured latency (fixed cost plus per-ring-step cost) is one delay before the
//     data moves; the platform's links inside the node carry no latency of their own then;
//   - "auto" is NCCL's ring at every size (as measured: no tree inside a node); a named
//     algorithm runs as named, on the scaled bytes.
#include <algorithm>

#include "costmodel/nccl_model.hpp"
#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

bool run_nccl_fitted(Network& net, std::string_view setting, const CollectiveCall& call) {
  const ClusterModel* c = net.nccl_fit();
  if (!c || call.nccl_fitted || call.groups.empty()) return false;
  const auto n = static_cast<std::int64_t>(call.groups.front().size());
  for (const auto& g : call.groups)
    if (std::any_of(g.begin(), g.end(), [&](std::int64_t r) { return net.node_of(r) != net.node_of(g.front()); }))
      return false;
  const auto f = nvlink_nccl_terms(*c, call.kind, n, call.bytes);
  if (!f) return false;
  CollectiveCall scaled = call;
  scaled.bytes = call.bytes * f->ring_factor;
  scaled.nccl_fitted = true;
  delay(f->latency);
  run_collective(net, setting == "auto" ? (net.switched_nodes() ? "node-aggregated" : "ring-pipelined") : setting, scaled);
  return true;
}

}  // namespace clustersim::sim

// One activity per intra-node collective: when a group sits on one node, its ring's
// edges are symmetric (every GPU has its own NVSwitch port), so one representative
// edge flow carrying the phase, plus the per-step latencies, takes the ring's time.
// It costs one flow instead of n, which is what makes thousand-GPU iterations with a
// tensor-parallel collective per op affordable (sim/README.md has the measurements).
// The price: traffic from elsewhere that crosses only the other GPUs' ports of the
// group is not seen by it. "auto" uses it only for single-node groups on NVSwitch or
// PCIe-switch nodes; data-parallel and pipeline traffic always moves as real flows.
#include <algorithm>

#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

void node_aggregated(Network& net, const CollectiveCall& call) {
  std::vector<Flow> flows;
  Seconds alpha = 0;
  std::int64_t steps = 0;
  for (const auto& g : call.groups) {
    const auto n = static_cast<std::int64_t>(g.size());
    steps = ring_steps(call.kind, n);
    const Bytes per_edge =
        ring_step_bytes(call.kind, call.bytes, n) * double(call.kind == Collective::broadcast ? 1 : steps);
    flows.push_back({g[0], g[1], per_edge});
    alpha = std::max(alpha, net.latency(g[0], g[1]));
  }
  net.run(flows, call.label);
  delay(double(steps - 1) * alpha);
}

}  // namespace clustersim::sim

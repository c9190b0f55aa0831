// One activity per intra-node collective: when a group sits on one node, its ring's
// edges are symmetric (every GPU has its own NVSwitch port), so one representative
// edge flow carrying the phase, plus the per-step latencies, takes the ring's time.
// It costs one flow instead of n, which is what makes thousand-GPU iterations with a
// tensor-parallel collective per op affordable (sim/README.md has the measurements).
// The price: traffic from elsewhere that crosses only the other GPUs' ports of the
// group is not seen by it. "auto" uses it only for single-node groups on NVSwitch or
// PCIe-switch nodes and on built NVLink-mesh nodes; data-parallel and pipeline traffic
// always moves as real flows.
// On an NVLink mesh the edges differ, so each ring packed on the node (ring_channels)
// gets its own representative: a flow on its first hop carrying its share, capped at
// its width of NVLinks. The packing never puts more ring width on a link direction than
// it has NVLinks, so contention-free every representative runs at its cap and the
// collective takes steps/n B / (rings' bandwidth), the estimator's closed form. A group
// without an NVLink ring has one ring whose representative goes on its slowest hop.
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
    if (!net.mesh()) {
      flows.push_back({g[0], g[1], per_edge});
      alpha = std::max(alpha, net.latency(g[0], g[1]));
      continue;
    }
    for (const auto& ch : ring_channels(net, g)) {
      const auto& order = ch.order;
      std::size_t hop = 0;  // capped rings: the first hop; the uncapped fallback: its slowest
      if (ch.max_rate <= 0)
        for (std::size_t i = 1; i < order.size(); ++i)
          if (net.edge_bandwidth(order[i], order[(i + 1) % order.size()]) <
              net.edge_bandwidth(order[hop], order[(hop + 1) % order.size()]))
            hop = i;
      const auto src = order[hop], dst = order[(hop + 1) % order.size()];
      flows.push_back({src, dst, per_edge * ch.share, ch.max_rate});
      for (std::size_t i = 0; i < order.size(); ++i)
        alpha = std::max(alpha, net.latency(order[i], order[(i + 1) % order.size()]));
    }
  }
  net.run(flows, call.label);
  delay(double(steps - 1) * alpha);
}

}  // namespace clustersim::sim

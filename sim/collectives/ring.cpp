// NCCL's ring, step by step: the buffer is cut into n chunks; all-reduce runs n-1
// reduce-scatter steps then n-1 all-gather steps, each step one flow of one chunk per
// ring edge, and a step starts when the previous one has finished everywhere. Exact
// and expensive (2n(n-1) flows per all-reduce): the reference the aggregated
// ring-pipelined is checked against. Broadcast: a chain, one full-buffer step per hop.
#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

void ring_stepwise(Network& net, const CollectiveCall& call) {
  std::vector<std::vector<RingChannel>> channels;
  std::int64_t n = 0;
  for (const auto& g : call.groups) {
    channels.push_back(ring_channels(net, g));
    n = static_cast<std::int64_t>(g.size());
  }
  const std::int64_t steps = ring_steps(call.kind, n);
  std::vector<Flow> flows;
  for (std::int64_t step = 0; step < steps; ++step) {
    flows.clear();
    for (const auto& group_channels : channels) {
      for (const auto& ch : group_channels) {
        const Bytes chunk = ring_step_bytes(call.kind, call.bytes, n) * ch.share;
        const auto& order = ch.order;
        if (call.kind == Collective::broadcast) {
          flows.push_back({order[static_cast<std::size_t>(step)], order[static_cast<std::size_t>(step + 1)], chunk, ch.max_rate});
          continue;
        }
        for (std::size_t i = 0; i < order.size(); ++i)
          flows.push_back({order[i], order[(i + 1) % order.size()], chunk, ch.max_rate});
      }
    }
    net.run(flows, call.label);
  }
}

}  // namespace clustersim::sim

// The chunked, pipelined ring aggregated: with small enough chunks every edge streams
// continuously, so an all-reduce phase is one flow per edge carrying 2(n-1)/n of the
// buffer (n-1 of n for all-gather and reduce-scatter, the whole buffer for a broadcast
// chain). The flow pays its route's latency once; the other steps' latencies are a
// delay afterwards. Contention-free it takes 2(n-1)/n B/bw + 2(n-1) alpha, the closed
// form; under contention the edge flows share links like any other traffic.
#include <algorithm>

#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

void ring_pipelined(Network& net, const CollectiveCall& call) {
  std::vector<Flow> flows;
  Seconds alpha = 0;
  std::int64_t steps = 0;
  for (const auto& g : call.groups) {
    const auto n = static_cast<std::int64_t>(g.size());
    steps = ring_steps(call.kind, n);
    const auto channels = ring_channels(net, g);
    const Bytes per_edge = ring_step_bytes(call.kind, call.bytes, n) * double(call.kind == Collective::broadcast ? 1 : steps);
    for (const auto& ch : channels) {
      const auto& order = ch.order;
      const std::size_t edges = call.kind == Collective::broadcast ? order.size() - 1 : order.size();
      for (std::size_t i = 0; i < edges; ++i) {
        const auto src = order[i], dst = order[(i + 1) % order.size()];
        flows.push_back({src, dst, per_edge * ch.share, ch.max_rate});
        alpha = std::max(alpha, net.latency(src, dst));
      }
    }
  }
  net.run(flows, call.label);
  delay(double(steps - 1) * alpha);
}

}  // namespace clustersim::sim

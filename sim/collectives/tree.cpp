// Double binary tree all-reduce (NCCL's tree): two binary trees over the group, the
// second built on the reversed rank order so that most leaves of one are inner nodes
// of the other; each carries half the buffer. Reduce: every child sends its half up;
// broadcast: every parent sends it down. Aggregated like the pipelined ring: one flow
// per tree edge per phase and the remaining per-level latencies as a delay, so
// contention-free it takes about 2 B/bw + 2 depth alpha.
#include <algorithm>

#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

void double_binary_tree(Network& net, const CollectiveCall& call) {
  std::vector<Flow> up, down;
  Seconds alpha = 0;
  std::int64_t depth = 0;
  for (const auto& g : call.groups) {
    const auto n = g.size();
    std::int64_t d = 0;
    while ((std::size_t{1} << (d + 1)) - 1 < n) ++d;  // levels below the root
    depth = std::max(depth, d);
    for (int tree = 0; tree < 2; ++tree) {
      const auto at = [&](std::size_t i) { return tree == 0 ? g[i] : g[n - 1 - i]; };
      for (std::size_t i = 1; i < n; ++i) {
        const auto child = at(i), parent = at((i - 1) / 2);
        up.push_back({child, parent, call.bytes / 2});
        down.push_back({parent, child, call.bytes / 2});
        alpha = std::max(alpha, net.latency(child, parent));
      }
    }
  }
  net.run(up, call.label + " (reduce)");
  delay(double(depth - 1) * alpha);
  net.run(down, call.label + " (broadcast)");
  delay(double(depth - 1) * alpha);
}

}  // namespace clustersim::sim

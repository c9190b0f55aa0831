// Double binary tree all-reduce (NCCL's tree): two binary trees over the group, the
// second built on the reversed order so that most leaves of one are inner nodes of the
// other; each carries half the buffer. Reduce: every child sends its half up;
// broadcast: every parent sends it down. Aggregated like the pipelined ring: one flow
// per tree edge per phase and the remaining per-level latencies as a delay, so
// contention-free it takes about 2 B/bw + 2 depth alpha.
// A group with several ranks on each of several nodes is arranged as NCCL arranges it:
// the binary trees span the nodes, one rank of each node in them, and inside a node the
// ranks form a chain ending at that rank (on an NVLink mesh along the node's widest
// packed ring, so every hop is an NVLink), the two trees' chains running opposite ways.
// Then each NIC carries about B per phase and direction, as the closed form assumes; a
// binary tree over all ranks in rank order would put up to 16 tree edges on a node's NIC.
#include <algorithm>

#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

namespace {

std::int64_t levels_below_root(std::size_t n) {
  std::int64_t d = 0;
  while ((std::size_t{1} << (d + 1)) - 1 < n) ++d;
  return d;
}

}  // namespace

void double_binary_tree(Network& net, const CollectiveCall& call) {
  std::vector<Flow> up, down;
  Seconds alpha = 0;
  std::int64_t depth = 0;
  const auto edge = [&](std::int64_t child, std::int64_t parent) {
    up.push_back({child, parent, call.bytes / 2});
    down.push_back({parent, child, call.bytes / 2});
    alpha = std::max(alpha, net.latency(child, parent));
  };
  for (const auto& g : call.groups) {
    std::vector<std::vector<std::int64_t>> by_node = split_by_node(net, g);
    const std::size_t local = by_node.front().size();
    const bool uniform = std::all_of(by_node.begin(), by_node.end(), [&](const auto& v) { return v.size() == local; });
    if (by_node.size() < 2 || local < 2 || !uniform) {
      const auto n = g.size();
      depth = std::max(depth, levels_below_root(n));
      for (int tree = 0; tree < 2; ++tree) {
        const auto at = [&](std::size_t i) { return tree == 0 ? g[i] : g[n - 1 - i]; };
        for (std::size_t i = 1; i < n; ++i) edge(at(i), at((i - 1) / 2));
      }
      continue;
    }
    // Chains inside the nodes: the order of the first ring channel inside one node.
    std::vector<std::vector<std::int64_t>> chains;
    for (const auto& node : by_node) chains.push_back(ring_channels(net, node).front().order);
    const std::size_t nodes = by_node.size();
    depth = std::max(depth, static_cast<std::int64_t>(local - 1) + levels_below_root(nodes));
    for (int tree = 0; tree < 2; ++tree) {
      // Tree 0 gathers each node's chain into its first GPU, tree 1 into its last.
      const auto head = [&](std::size_t node) { return tree == 0 ? chains[node].front() : chains[node].back(); };
      for (const auto& chain : chains)
        for (std::size_t j = 0; j + 1 < local; ++j)
          tree == 0 ? edge(chain[j + 1], chain[j]) : edge(chain[j], chain[j + 1]);
      const auto node_at = [&](std::size_t i) { return tree == 0 ? i : nodes - 1 - i; };
      for (std::size_t i = 1; i < nodes; ++i) edge(head(node_at(i)), head(node_at((i - 1) / 2)));
    }
  }
  net.run(up, call.label + " (reduce)");
  delay(double(depth - 1) * alpha);
  net.run(down, call.label + " (broadcast)");
  delay(double(depth - 1) * alpha);
}

}  // namespace clustersim::sim

// Hierarchical all-reduce: reduce-scatter inside each node, all-reduce of the 1/local
// shard across nodes among the ranks with the same local index, all-gather inside the
// node. Each phase is a pipelined ring; the cross-node phase runs one ring per local
// rank, so every GPU's NIC carries its own ring.
#include <map>

#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

void hierarchical(Network& net, const CollectiveCall& call) {
  CollectiveCall intra_rs{Collective::reduce_scatter, call.bytes, {}, call.label + " (intra reduce-scatter)"};
  CollectiveCall inter{Collective::all_reduce, 0, {}, call.label + " (inter all-reduce)"};
  CollectiveCall intra_ag{Collective::all_gather, call.bytes, {}, call.label + " (intra all-gather)"};
  for (const auto& g : call.groups) {
    std::map<std::int64_t, std::vector<std::int64_t>> by_node;  // ordered: deterministic
    for (auto r : g) by_node[net.node_of(r)].push_back(r);
    const std::size_t local = by_node.begin()->second.size();
    inter.bytes = call.bytes / double(local);
    for (const auto& [node, ranks] : by_node)
      if (ranks.size() > 1) {
        intra_rs.groups.push_back(ranks);
        intra_ag.groups.push_back(ranks);
      }
    if (by_node.size() > 1)
      for (std::size_t i = 0; i < local; ++i) {
        std::vector<std::int64_t> across;
        for (const auto& [node, ranks] : by_node)
          if (i < ranks.size()) across.push_back(ranks[i]);
        inter.groups.push_back(std::move(across));
      }
  }
  if (!intra_rs.groups.empty()) ring_pipelined(net, intra_rs);
  if (!inter.groups.empty()) ring_pipelined(net, inter);
  if (!intra_ag.groups.empty()) ring_pipelined(net, intra_ag);
}

}  // namespace clustersim::sim

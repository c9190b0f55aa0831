// The name -> {description, kinds, function} table of collective algorithms, and the
// "auto" choice.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <simgrid/s4u.hpp>

#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

const std::vector<AlgorithmInfo>& collective_algorithms() {
  using C = Collective;
  static const std::vector<AlgorithmInfo> table{
      {"all-to-all", "every rank sends bytes/n directly to every other rank, all at once", {C::all_to_all},
       all_to_all_direct},
      {"hierarchical",
       "all-reduce as reduce-scatter inside each node, all-reduce across nodes per local rank, all-gather inside "
       "each node",
       {C::all_reduce},
       hierarchical},
      {"node-aggregated",
       "ring inside one node as one activity: one representative edge flow per phase plus the per-step latencies",
       {C::all_reduce, C::all_gather, C::reduce_scatter, C::broadcast},
       node_aggregated},
      {"p2p", "one flow from the first to the second rank of each group (pipeline sends)", {C::send_recv},
       point_to_point},
      {"ring", "NCCL ring, step by step: 2(n-1) (all-reduce) or n-1 synchronised steps of one flow per edge",
       {C::all_reduce, C::all_gather, C::reduce_scatter, C::broadcast},
       ring_stepwise},
      {"ring-pipelined",
       "chunked, pipelined ring aggregated to one flow per edge per phase plus the per-step latencies",
       {C::all_reduce, C::all_gather, C::reduce_scatter, C::broadcast},
       ring_pipelined},
      {"tree", "double binary tree all-reduce: reduce up both trees, then broadcast down, B/2 per tree",
       {C::all_reduce},
       double_binary_tree},
  };
  return table;
}

const AlgorithmInfo* find_collective_algorithm(std::string_view name) {
  for (const auto& a : collective_algorithms())
    if (a.name == name) return &a;
  return nullptr;
}

void delay(Seconds seconds) {
  if (seconds > 0) simgrid::s4u::this_actor::sleep_for(seconds);
}

std::int64_t ring_steps(Collective kind, std::int64_t n) {
  return kind == Collective::all_reduce ? 2 * (n - 1) : n - 1;
}

Bytes ring_step_bytes(Collective kind, Bytes bytes, std::int64_t n) {
  return kind == Collective::broadcast ? bytes : bytes / double(n);
}

std::vector<std::vector<std::int64_t>> ring_channels(const Network& net, const std::vector<std::int64_t>& group) {
  // Split the group by node (ranks stay in rank order inside a node).
  std::vector<std::vector<std::int64_t>> by_node;
  for (auto r : group) {
    if (by_node.empty() || net.node_of(by_node.back().front()) != net.node_of(r)) by_node.push_back({});
    by_node.back().push_back(r);
  }
  const std::size_t local = by_node.front().size();
  const bool uniform = std::all_of(by_node.begin(), by_node.end(), [&](const auto& v) { return v.size() == local; });
  if (by_node.size() < 2 || local < 2 || !uniform) return {group};
  std::vector<std::vector<std::int64_t>> channels;
  for (std::size_t c = 0; c < local; ++c) {
    // Enter each node at local rank c+1, leave it from local rank c.
    std::vector<std::int64_t> order;
    for (const auto& node : by_node)
      for (std::size_t i = 0; i < local; ++i) order.push_back(node[(c + 1 + i) % local]);
    channels.push_back(std::move(order));
  }
  return channels;
}

void run_collective(Network& net, std::string_view setting, const CollectiveCall& call) {
  if (call.groups.empty() || call.bytes <= 0) return;
  const auto n = static_cast<std::int64_t>(call.groups.front().size());
  if (n < 2) return;
  if (run_nccl_fitted(net, setting, call)) return;
  if (call.kind == Collective::all_to_all) return all_to_all_direct(net, call);
  if (call.kind == Collective::send_recv) return point_to_point(net, call);
  std::string_view name = setting;
  if (setting == "auto") {
    name = "ring-pipelined";
    const bool single_node = net.switched_nodes() && std::all_of(call.groups.begin(), call.groups.end(), [&](const auto& g) {
      return std::all_of(g.begin(), g.end(), [&](std::int64_t r) { return net.node_of(r) == net.node_of(g.front()); });
    });
    if (single_node) name = "node-aggregated";
    if (call.kind == Collective::all_reduce) {
      // Judged on the first edge's route.
      const auto& g = call.groups.front();
      if (choose_all_reduce(n, call.bytes, net.edge_bandwidth(g[0], g[1]), net.latency(g[0], g[1])) ==
          AllReduceAlgorithm::tree)
        name = "tree";
    }
  }
  const AlgorithmInfo* algo = find_collective_algorithm(name);
  if (!algo) throw std::invalid_argument(fmt::format("unknown collective algorithm \"{}\"", name));
  if (std::find(algo->kinds.begin(), algo->kinds.end(), call.kind) == algo->kinds.end())
    algo = find_collective_algorithm("ring-pipelined");
  algo->run(net, call);
}

}  // namespace clustersim::sim

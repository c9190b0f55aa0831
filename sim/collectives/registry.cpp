// The name -> {description, kinds, function} table of collective algorithms, and the
// "auto" choice.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
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
       "ring inside one node as one activity: one representative edge flow per phase (per packed ring, capped at "
       "its share, on an NVLink mesh) plus the per-step latencies",
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
      {"tree",
       "double binary tree all-reduce: reduce up both trees, then broadcast down, B/2 per tree (across nodes: trees "
       "over the nodes, chains inside them)",
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

namespace {

// A node's members of a group as sorted local indices, for the mesh's ring table.
std::vector<int> local_indices(const Network& net, const std::vector<std::int64_t>& ranks) {
  std::vector<int> local;
  for (auto r : ranks) local.push_back(static_cast<int>(r % net.gpus_per_node()));
  std::sort(local.begin(), local.end());
  return local;
}

bool inside_one_node(const Network& net, const std::vector<std::int64_t>& g) {
  return std::all_of(g.begin(), g.end(), [&](std::int64_t r) { return net.node_of(r) == net.node_of(g.front()); });
}

}  // namespace

std::vector<std::vector<std::int64_t>> split_by_node(const Network& net, const std::vector<std::int64_t>& group) {
  std::vector<std::vector<std::int64_t>> by_node;
  for (auto r : group) {
    if (by_node.empty() || net.node_of(by_node.back().front()) != net.node_of(r)) by_node.push_back({});
    by_node.back().push_back(r);
  }
  return by_node;
}

std::vector<RingChannel> ring_channels(const Network& net, const std::vector<std::int64_t>& group) {
  const MeshWiring* mesh = net.mesh();
  std::vector<std::vector<std::int64_t>> by_node = split_by_node(net, group);
  const std::size_t local = by_node.front().size();
  const bool uniform = std::all_of(by_node.begin(), by_node.end(), [&](const auto& v) { return v.size() == local; });
  if (mesh && by_node.size() == 1 && local >= 2) {
    const std::int64_t base = net.node_of(group.front()) * net.gpus_per_node();
    const MeshRings& rings = hybrid_cube_mesh_rings(local_indices(net, group));
    std::vector<RingChannel> channels;
    for (std::size_t i = 0; i < rings.rings.size(); ++i) {
      RingChannel ch{{}, rings.share(i), rings.nvlink ? double(rings.rings[i].width) * mesh->link_bandwidth : 0.0};
      for (int g : rings.rings[i].order) ch.order.push_back(base + g);
      channels.push_back(std::move(ch));
    }
    return channels;
  }
  if (by_node.size() < 2 || local < 2 || !uniform) return {{group, 1.0, 0.0}};
  // Orders inside a node, as positions into each node's members: rank order, or on a
  // mesh whose nodes hold the same local GPUs, the rings packed on them.
  std::vector<std::pair<std::vector<std::size_t>, double>> node_rings;
  if (mesh) {
    const auto first = local_indices(net, by_node.front());
    const bool same = std::all_of(by_node.begin(), by_node.end(), [&](const auto& v) { return local_indices(net, v) == first; });
    if (same) {
      const MeshRings& rings = hybrid_cube_mesh_rings(first);
      for (std::size_t i = 0; i < rings.rings.size(); ++i) {
        std::vector<std::size_t> positions;
        for (int g : rings.rings[i].order)
          positions.push_back(static_cast<std::size_t>(std::find(first.begin(), first.end(), g) - first.begin()));
        node_rings.emplace_back(std::move(positions), rings.share(i));
      }
      for (auto& node : by_node) std::sort(node.begin(), node.end());
    }
  }
  if (node_rings.empty()) {
    std::vector<std::size_t> identity(local);
    for (std::size_t i = 0; i < local; ++i) identity[i] = i;
    node_rings.emplace_back(std::move(identity), 1.0);
  }
  std::vector<RingChannel> channels;
  for (const auto& [positions, share] : node_rings)
    for (std::size_t c = 0; c < local; ++c) {
      // Enter each node at ring position c+1, leave it from position c.
      RingChannel ch{{}, share / double(local), 0.0};
      for (const auto& node : by_node)
        for (std::size_t i = 0; i < local; ++i) ch.order.push_back(node[positions[(c + 1 + i) % local]]);
      channels.push_back(std::move(ch));
    }
  return channels;
}

// Shares as flow bytes (which the network rounds to whole bytes): a share of 1 is 2^40
// bytes, so the rounding is below 1e-12 of a share.
constexpr double kShareScale = 1099511627776.0;

RingRate ring_rate(Network& net, const CollectiveCall& call) {
  const auto& g = call.groups.front();
  const bool inside_nodes =
      std::all_of(call.groups.begin(), call.groups.end(), [&](const auto& group) { return inside_one_node(net, group); });
  // Inside one node: a switch gives every edge the same port bandwidth; a mesh node the
  // rings costmodel packs (ring_bandwidth, which collective_time uses too). Both cheap:
  // most calls are these.
  if (inside_nodes && net.mesh())
    return {clustersim::ring_bandwidth(*net.mesh(), hybrid_cube_mesh_rings(local_indices(net, g))), net.latency(g[0], g[1])};
  if (inside_nodes && net.switched_nodes()) return {net.edge_bandwidth(g[0], g[1]), net.latency(g[0], g[1])};
  // Otherwise from the rings themselves: every ring edge puts its channel's share of the
  // data on the links of its route (all groups of the call at once, as they run), and the
  // ring streams at the least link bandwidth / share: for rings across nodes the NICs,
  // and the route's latency the network's. Judging by the
  // first edge alone took a ring whose first two ranks share a node for an NVLink ring.
  // The edges go through the network as the flows would (net.link_bytes: with replica
  // symmetry, folded onto the representatives' links the way run() folds them).
  std::vector<Flow> edges;
  RingRate r;
  for (const auto& group : call.groups)
    for (const auto& ch : ring_channels(net, group))
      for (std::size_t i = 0; i < ch.order.size(); ++i) {
        const auto src = ch.order[i], dst = ch.order[(i + 1) % ch.order.size()];
        edges.push_back({src, dst, ch.share * kShareScale});
        r.latency = std::max(r.latency, net.latency(src, dst));
      }
  r.bandwidth = 1e300;
  for (const auto& [link, bytes] : net.link_bytes(edges))
    r.bandwidth = std::min(r.bandwidth, net.link_bandwidth(link) / (bytes / kShareScale));
  return r;
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
    const bool inside_nodes =
        std::all_of(call.groups.begin(), call.groups.end(), [&](const auto& g) { return inside_one_node(net, g); });
    name = inside_nodes && (net.switched_nodes() || net.mesh()) ? "node-aggregated" : "ring-pipelined";
    // Judged on the call's rings, where the tree is a candidate at all.
    if (call.kind == Collective::all_reduce && tree_all_reduce_considered(net.mesh() != nullptr, inside_nodes)) {
      const RingRate r = ring_rate(net, call);
      if (choose_all_reduce(n, call.bytes, r.bandwidth, r.latency) == AllReduceAlgorithm::tree) name = "tree";
    }
  }
  const AlgorithmInfo* algo = find_collective_algorithm(name);
  if (!algo) throw std::invalid_argument(fmt::format("unknown collective algorithm \"{}\"", name));
  if (std::find(algo->kinds.begin(), algo->kinds.end(), call.kind) == algo->kinds.end())
    algo = find_collective_algorithm("ring-pipelined");
  algo->run(net, call);
}

}  // namespace clustersim::sim

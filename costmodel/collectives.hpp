// Collective times on the cluster, NCCL-style (alpha-beta per link class):
//   ring all-reduce   2(n-1)/n B / bw + 2(n-1) alpha
//   all-gather, reduce-scatter   (n-1)/n B / bw + (n-1) alpha
//   double binary tree all-reduce   2 B / bw + 2 ceil(log2 n) alpha (NCCL picks the faster)
//   all-to-all   intra part over NVLink, inter part through the node's NICs
// A group spanning nodes is bound by the slower of its NVLink ring edges and the NIC
// bandwidth its node gives it: a ring crosses each node boundary once per channel.
// `bw` inside a node: the per-GPU bandwidth on a switch (nvswitch, pcie); on fabric
// nvlink-mesh the rings packed along the group's NVLinks (costmodel/nvlink_mesh.hpp),
// and all-to-all moves over the pairs' own NVLinks or through the host.
// `B` is the per-rank buffer: all-reduce in = out = B; all-gather out = B;
// reduce-scatter in = B; all-to-all: B sent by each rank in total.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "costmodel/cluster.hpp"

namespace clustersim {

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv };
std::string_view to_string(Collective);

struct Group {
  std::int64_t size = 1;      // ranks
  std::int64_t per_node = 1;  // ranks of the group on each node it spans
  // Local-rank distance between consecutive members on a node: 1 for Megatron's tensor-
  // parallel groups and the last axis of a logical mesh, tp for data-parallel groups.
  // Only fabric nvlink-mesh, whose GPU pairs differ, depends on it. 0: not known, priced
  // as the slower of the adjacent and the evenly strided placement (never optimistic).
  std::int64_t stride = 0;
  std::int64_t nodes() const { return (size + per_node - 1) / per_node; }
};

// The local GPU sets the groups of this shape occupy on a node of `gpus_per_node`:
// {o, o+s, ..., o+(per_node-1)s} for every start o of the tiling (o mod (per_node s) < s).
// stride 0 gives both the adjacent (s = 1) and the evenly strided (s = gpus_per_node /
// per_node) sets.
std::vector<std::vector<int>> node_placements(std::int64_t gpus_per_node, std::int64_t per_node, std::int64_t stride);

// Bandwidth of the group's ring inside a node (bytes/s per rank per direction, NCCL
// efficiency applied): the fabric's per-GPU bandwidth on a switch; on a mesh, the ring
// bandwidth of the slowest of its placements (groups of one shape run in lock-step).
BytesPerSecond intra_ring_bandwidth(const ClusterModel& c, const Group& g);

// NCCL's all-reduce algorithm choice, made once for the estimator and the simulator:
// the faster of the ring, 2(n-1)/n B/bw + 2(n-1) alpha, and the double binary tree,
// 2 B/bw + 2 ceil(log2 n) alpha. The tree wins when B/(n bw) < alpha (n - 1 - ceil(log2 n)).
enum class AllReduceAlgorithm { ring, tree };
AllReduceAlgorithm choose_all_reduce(std::int64_t ranks, Bytes bytes, double bandwidth, Seconds alpha);
// Whether the tree is a candidate at all: not inside one node of an NVLink mesh, where a
// binary tree's edges are not the NVLinks and NCCL's intra-node tree is a chain that pays
// the ring's 2(n-1) intra-node latencies (tuning.cc: 2 ((nRanks/nNodes-1) intraLat +
// log2(nNodes) interLat)), so its tuner never picks it there.
bool tree_all_reduce_considered(bool nvlink_mesh, bool one_node);
Seconds all_reduce_time(AllReduceAlgorithm a, std::int64_t ranks, Bytes bytes, double bandwidth, Seconds alpha);

// `node_share`: the fraction of a node's network bandwidth this group can use (groups
// that run at the same time on a node share its NICs), in (0, 1].
Seconds collective_time(const ClusterModel& c, Collective kind, Bytes bytes, Group g, double node_share);

}  // namespace clustersim

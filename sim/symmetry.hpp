// Replica symmetry: when the platform treats every data-parallel replica alike, the
// replay runs one representative per class of identical replicas and folds the traffic
// of the others onto it, so a 16,384-GPU iteration costs about what its first replicas
// cost (sim/README.md, "Speed").
//
// Why it is exact. Shifting every GPU by k replicas (rank (s, d, t) -> (s, d+k mod dp,
// t), k a multiple of `classes`) maps the plan to itself: replicas run the same
// programs, pipeline sends stay inside a replica, the data-parallel collectives and the
// expert all-to-all (inside blocks of ep replicas, classes = ep) map onto themselves.
// It maps the platform to itself when
//   - each tensor-parallel group fills whole nodes (tp a multiple of gpus_per_node) and
//     the plan fills the cluster, so the shift moves whole nodes onto whole nodes,
//     keeping every GPU's local index (its NVLink port, PCIe link and NIC);
//   - the network is a fat tree (a switch per node under one core, any
//     oversubscription) or rail-optimized (rail i joins NIC i of every node): every
//     permutation of the nodes is an automorphism of these graphs;
//   - the platform is built, not read from a file.
// (Leaf-spine is not: a shift can move a flow from inside a leaf to across leaves.)
// The replay is deterministic and max-min sharing has one solution, so from equal
// starts every replica of a class does the same thing at the same time, and a link
// carries what its image carries. The quotient keeps one copy of each orbit: the
// representatives' GPUs and links, flows whose source is a representative, each link
// of a node once (every copy carries the same load) and each link shared by all nodes
// (a rail's uplink to the spine) at 1/copies of its bandwidth (it carries copies times
// the representative's flows). A flow to a GPU of another copy goes to the
// representative of its class through the same kind of route: to another
// representative node, the ordinary route; to its own node, a "mirror" route that leaves
// through the node's NIC and comes back in through it, as the flows from and to the
// copies do (sim/platform.cpp).
//
// Flow sets that the shift does not map onto themselves (the double binary tree's root
// and leaves differ) are folded by their most loaded member: each class keeps the
// flows of the member that sends the most bytes (the lowest rank among equals, the
// representative itself for every shift-invariant set). Every non-root rank of the
// double binary tree sends two halves and receives at most two per phase, so in
// isolation this is exact too; under concurrent traffic it charges every replica the
// most loaded rank's share.
#pragma once
#include <cstdint>
#include <string>

#include "costmodel/cluster.hpp"

namespace clustersim::sim {

struct ReplicaSymmetry {
  std::int64_t dp = 1, tp = 1, pp = 1, gpus_per_node = 1;
  std::int64_t classes = 0;  // replicas simulated per stage (the representatives 0 ... classes-1); 0: off
  std::string reason;        // why it is off (empty when on)

  bool active() const { return classes > 0 && classes < dp; }
  std::int64_t copies() const { return active() ? dp / classes : 1; }  // replicas each representative stands for
  std::int64_t replica_of(std::int64_t rank) const { return rank / tp % dp; }
  std::int64_t stage_of(std::int64_t rank) const { return rank / (tp * dp); }
  // The rank `replicas` replicas further down (mod dp).
  std::int64_t shifted(std::int64_t rank, std::int64_t replicas) const {
    const std::int64_t d = replica_of(rank);
    return rank + ((d + replicas) % dp + dp) % dp * tp - d * tp;
  }
  // Shift that takes a rank to its representative (minus its replica's copy offset).
  std::int64_t offset(std::int64_t rank) const { return replica_of(rank) / classes * classes; }
  bool representative(std::int64_t rank) const { return replica_of(rank) < classes; }
  // Index of a representative's GPU in the reduced platform (stage-major, classes replicas).
  std::int64_t simulated_index(std::int64_t rank) const {
    return stage_of(rank) * classes * tp + replica_of(rank) % classes * tp + rank % tp;
  }
  std::int64_t rank_of_index(std::int64_t index) const {
    const std::int64_t s = index / (classes * tp), d = index / tp % classes, t = index % tp;
    return s * dp * tp + d * tp + t;
  }
  // Nodes between two copies of a representative's node.
  std::int64_t node_stride() const { return classes * tp / gpus_per_node; }
};

// Whether the replay of a plan with this layout may fold its replicas on this cluster
// (the conditions above); `reason` says why not. `classes` = ep: the expert all-to-all
// stays inside blocks of ep replicas. `built` is false for a platform file.
ReplicaSymmetry replica_symmetry(std::int64_t dp, std::int64_t tp, std::int64_t pp, std::int64_t ep,
                                 const ClusterModel& c, bool built);

}  // namespace clustersim::sim

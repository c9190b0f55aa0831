// The SimGrid platform of a scenario's cluster. One SimGrid host per GPU (named
// gpu-<rank>, rank = node * gpus_per_node + local index) and routers for switches and
// NICs, all in one Dijkstra-routed zone so that any topology is a plain graph:
//
//   intra-node   nvswitch: each GPU has its own split-duplex link to the node's
//                crossbar (up = what it sends, down = what it receives);
//                nvlink-mesh: as a DGX-1V is wired (costmodel/nvlink_mesh.hpp): one
//                split-duplex link per GPU pair with NVLinks (links x bandwidth / 6),
//                and for pairs without, a route through the host over each GPU's own
//                PCIe link (the profile's PCIe bandwidth, half the latency on each;
//                separate from the GPU's PCIe link to its NIC, as the pcie fabric's);
//                pcie: each GPU's split-duplex link to the node's PCIe switch.
//   GPU <-> NIC  a PCIe link (the GPU profile's PCIe bandwidth); GPU i uses NIC
//                i mod nics_per_node (the usual DGX pairing).
//   NIC          split-duplex link at the NIC bandwidth, to
//                fat-tree: the node's switch, whose uplink to the core carries
//                  nics x nic_bandwidth / oversubscription;
//                leaf-spine: a leaf of kLeafNodes nodes, leaf uplink to the spine
//                  carries its nodes' NIC bandwidth / oversubscription;
//                rail-optimized: rail switch i (NIC i of every node), rails joined by
//                  a spine whose per-rail uplink carries nodes x nic_bandwidth /
//                  oversubscription (cross-rail traffic only).
// Latency: a route's latency equals the scenario's: half on each GPU link inside a node
// (sender up + receiver down; all of it on a mesh pair's NVLink link), half on each NIC
// link across nodes.
// Bandwidths are scaled by the GPU profile's NCCL efficiencies (collective_nvlink for
// the intra-node fabric, collective_network for NICs), the same achievable fractions
// the analytical estimator uses, so that the two agree on contention-free cases.
// A GPU profile with a fitted NCCL section (costmodel/nccl_model.hpp) changes the node:
// its links carry no latency, since collectives there pay NCCL's measured latency once,
// as a delay (sim/collectives/nccl_fitted.cpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>
#include <vector>

#include "costmodel/cluster.hpp"
#include "costmodel/nvlink_mesh.hpp"
#include "sim/symmetry.hpp"

namespace simgrid::s4u {
class Host;
}

namespace clustersim::sim {

constexpr std::int64_t kLeafNodes = 8;

struct Platform {
  std::vector<simgrid::s4u::Host*> gpus;  // by global rank
  std::int64_t gpus_per_node = 1;
  std::int64_t links = 0;
  bool switched_nodes = true;  // nvswitch or pcie switch (not a direct mesh)
  // Built from fabric nvlink-mesh (gpus > 0): every node's wiring; ring collectives
  // inside a node follow the rings costmodel packs on it (hybrid_cube_mesh_rings).
  MeshWiring mesh;
  nlohmann::json description;  // what was built, for provenance
  // The cluster, when its GPU profile's NCCL fit prices the collectives inside a node
  // (sim/collectives/nccl_fitted.cpp); empty for platform files and unfitted profiles.
  std::optional<ClusterModel> nccl_fit;
  // Active: the reduced platform of the representative replicas (sim/symmetry.hpp).
  // `gpus` holds the representatives' GPUs by simulated index (named by their rank in
  // the cluster), `mirrors` the other end of a route that leaves GPU i's node through
  // i's NIC and comes back to GPU j of the node through j's NIC (mirror_routes: route
  // i -> mirrors[j], i and j of one node), and `link_node` every link's node (-1 for
  // the links all nodes share, a rail's uplink) so that link loads can name the copies.
  ReplicaSymmetry symmetry;
  std::vector<simgrid::s4u::Host*> mirrors;
  std::unordered_map<const void*, std::int64_t> link_node;  // lookup only, never iterated
};

// Builds the platform in the current SimGrid engine (call once, before running). With
// an active `symmetry`, the reduced platform of its representatives.
Platform build_platform(const ClusterModel& c, const ReplicaSymmetry& symmetry = {});

// Loads a SimGrid platform file (XML, or a C++ platform library) instead: it must
// declare hosts gpu-0 ... gpu-<N-1>, N the scenario's GPU count; node k holds ranks
// k*gpus_per_node ... (k+1)*gpus_per_node - 1. Throws std::invalid_argument naming a
// missing host. Intra-node collectives are aggregated only when `switched_nodes`.
Platform load_platform_file(const std::string& file, const ClusterModel& c, bool switched_nodes);

}  // namespace clustersim::sim

// Fabric nvlink-mesh: the NVLink wiring of a DGX-1 with V100 (also AWS p3.16xlarge,
// Alpa's testbed) and the rings NCCL lays along it. Written once here; the estimator
// (collective_time) prices a group's collectives on these rings and the simulator
// builds the same links and runs its ring channels along the same rings.
//
// The wiring (NVIDIA DGX-1 System Architecture whitepaper, "NVIDIA DGX-1 With Tesla
// V100 System Architecture", 2017): "a cube with GPUs at its corners and with all twelve
// edges connected through NVLink (some edges have two NVLink connections), and with two
// of the six faces having their diagonals connected as well ... three interwoven rings".
// `nvidia-smi topo -m` on a DGX-1V reads (NV1 one link, NV2 two, SYS no NVLink):
//         GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7
//   GPU0   X   NV1  NV1  NV2  NV2  SYS  SYS  SYS
//   GPU1  NV1   X   NV2  NV1  SYS  NV2  SYS  SYS
//   GPU2  NV1  NV2   X   NV2  SYS  SYS  NV1  SYS
//   GPU3  NV2  NV1  NV2   X   SYS  SYS  SYS  NV1
//   GPU4  NV2  SYS  SYS  SYS   X   NV1  NV1  NV2
//   GPU5  SYS  NV2  SYS  SYS  NV1   X   NV2  NV1
//   GPU6  SYS  SYS  NV1  SYS  NV1  NV2   X   NV2
//   GPU7  SYS  SYS  SYS  NV1  NV2  NV1  NV2   X
// Every V100 has 6 NVLink2 bricks of 25 GB/s per direction (the profile's 150 GB/s per
// GPU), and every GPU above has exactly 6 link ends (tested).
//
// Node sizes: a node of g <= 8 GPUs is the first g GPUs of that machine (what a job with
// CUDA_VISIBLE_DEVICES=0,...,g-1 gets on a p3.16xlarge, as Alpa's 1-, 2- and 4-GPU runs;
// GPUs 0-3 are also a p3.8xlarge). Larger nodes are an input error: the hybrid cube mesh
// does not define them (resolve_cluster says so). The wiring is DGX-1V's whatever the GPU
// profile: one link carries the per-GPU NVLink bandwidth / 6.
//
// Rings (NCCL lays several rings, "channels", along direct NVLinks: NVIDIA/nccl#299,
// "4 rings on DGX1"): directed Hamiltonian rings over the group's GPUs are packed on
// the directed link capacities (each NVLink is full duplex, so a ring and its reverse
// share a link), greedily: the ring with the largest bottleneck on the remaining
// capacity first (ties: the lexicographically first visiting order from the lowest
// GPU), its bottleneck subtracted along it, until no ring has capacity left. Greedy
// falls short on 9 of the 247 subsets of a DGX-1 (GPUs 0-6: 3 links where 4 fit), so
// an exact branch and bound over the group's NVLink rings (60 on all 8 GPUs) replaces
// its packing when it finds a wider one. The group's ring bandwidth is the sum of the
// rings' widths times one link's bandwidth; a collective's data is split over the
// rings in proportion to their widths. On all 8 GPUs the packing takes the ring of the
// doubled links both ways (0-3-2-1-5-6-7-4, width 2 each) and then the ring of the
// single links both ways (0-1-3-7-5-4-6-2, width 1 each): 6 links per GPU, the full
// 150 GB/s; on GPUs 0-3, four rings of width 1, 100 GB/s (GPUs 0 and 1 have only 4
// link ends there); on a pair, its links (NV2: 50 GB/s).
// A group with no NVLink ring (GPUs 0 and 5, or 0, 1, 2, 3, 4) runs one ring in rank
// order, each hop over its NVLinks where the pair has some and otherwise through the
// host over both GPUs' PCIe links (NCCL then uses PCIe or shared memory:
// NVIDIA/nccl#301); its bandwidth is its slowest hop's. The host's socket interconnect
// is not modelled (profiles have no figure for it).
#pragma once
#include <cstdint>
#include <vector>

#include "costmodel/cluster.hpp"

namespace clustersim {

// NVLinks between two GPUs of a node (local indices, a < b).
struct NvlinkPair {
  int a = 0, b = 0;
  int links = 0;
};

inline constexpr int kHybridCubeMeshGpus = 8;
inline constexpr int kHybridCubeMeshLinksPerGpu = 6;
// The DGX-1V table above, pairs with NVLinks only, sorted by (a, b).
const std::vector<NvlinkPair>& hybrid_cube_mesh();

// One node's wiring as the cluster resolves it.
struct MeshWiring {
  int gpus = 0;
  std::vector<NvlinkPair> pairs;      // the pairs with NVLinks among the node's GPUs
  BytesPerSecond link_bandwidth = 0;  // one NVLink, per direction, achievable (x collective_nvlink)
  BytesPerSecond host_bandwidth = 0;  // a GPU's PCIe link to the host, per direction, achievable
  int links(int a, int b) const;      // 0 for a pair without NVLink
};
// Requires c.fabric == nvlink_mesh and 1 <= gpus_per_node <= 8 (resolve_cluster checks);
// throws std::invalid_argument otherwise.
MeshWiring mesh_wiring(const ClusterModel& c);
// One NVLink's and one GPU's host link bandwidth (per direction, achievable) of a cluster,
// without building the wiring.
BytesPerSecond mesh_link_bandwidth(const ClusterModel& c);
BytesPerSecond mesh_host_bandwidth(const ClusterModel& c);

// A directed ring over local GPU indices: order[i] sends to order[i+1] (wrapping).
struct MeshRing {
  std::vector<int> order;
  int width = 0;  // NVLinks per direction it owns on each hop; 0 for the host fallback
};
struct MeshRings {
  std::vector<MeshRing> rings;  // empty for fewer than 2 GPUs
  bool nvlink = true;           // false: the single fallback ring (see above)
  int width() const;            // sum of the rings' widths
  // Fraction of a collective's data ring i carries.
  double share(std::size_t i) const;
};
// The packing on a link table (pure; `members` sorted ascending, distinct, at most 8).
MeshRings pack_rings(const std::vector<NvlinkPair>& pairs, const std::vector<int>& members);
// The packing on the hybrid cube mesh, computed once per process for every subset.
const MeshRings& hybrid_cube_mesh_rings(const std::vector<int>& members);
// Bytes per second each rank of the group streams to the next (per direction), the
// figure collective_time uses as a ring's bandwidth.
BytesPerSecond ring_bandwidth(const MeshWiring& w, const MeshRings& r);

// All-to-all inside a node: every member sends `per_peer` bytes to every other member
// at once, directly (over the pair's NVLinks, or through the host's PCIe links): the
// most loaded link's bytes over its bandwidth.
Seconds mesh_all_to_all_time(const MeshWiring& w, const std::vector<int>& members, Bytes per_peer);

// The same two figures in links, independent of any bandwidth, so that the estimator can
// keep them per group shape and scale them by a cluster's link and host bandwidths.
struct MeshLinks {
  // Ring: the packed rings' width, or for the host fallback (width 0) the fewest
  // NVLinks on its NVLink hops (0: none) and whether a hop goes through the host.
  int ring_width = 0, fallback_fewest_links = 0;
  bool fallback_host_hop = false;
  // All-to-all: the fewest NVLinks between two linked members (0: none), and the most
  // members one GPU reaches only through the host.
  int fewest_links = 0, most_host_peers = 0;
};
MeshLinks mesh_links(const std::vector<NvlinkPair>& pairs, const std::vector<int>& members, const MeshRings& rings);
BytesPerSecond ring_bandwidth(const MeshLinks& l, BytesPerSecond link_bandwidth, BytesPerSecond host_bandwidth);
Seconds mesh_all_to_all_time(const MeshLinks& l, BytesPerSecond link_bandwidth, BytesPerSecond host_bandwidth,
                             Bytes per_peer);

}  // namespace clustersim

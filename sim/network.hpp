// Flows on the platform: every byte the replay moves between GPUs goes through here,
// as a SimGrid communication between two GPU hosts, so that flows sharing a link share
// its bandwidth. Also keeps the accounting the results need: flows started, bytes per
// link (for utilisation), route latencies (cached per GPU pair).
// On the reduced platform of replica symmetry (sim/symmetry.hpp) callers still name
// GPUs by their rank in the cluster; flows are folded onto the representatives here.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "scenarios/units.hpp"
#include "sim/platform.hpp"
#include "sim/trace.hpp"

namespace clustersim::sim {

struct Flow {
  std::int64_t src = 0, dst = 0;  // global GPU ranks
  Bytes bytes = 0;
  double max_rate = 0;  // bytes/s the flow may not exceed (a ring's share of its links); 0: none
};

struct LinkLoad {
  std::string name;
  double bandwidth = 0;  // bytes/s
  Bytes bytes = 0;       // carried over the run
};

class Network {
 public:
  Network(const Platform& platform, Trace* trace) : platform_(platform), trace_(trace) {}

  // Starts all flows at once and blocks the calling actor until the last one ends. With
  // replica symmetry, of each class of GPUs only the most loaded member's flows run,
  // moved onto the representative (sim/symmetry.hpp); the others are their copies.
  void run(const std::vector<Flow>& flows, const std::string& label);
  // Bytes each link (index for link_bandwidth) carries when these flows run together:
  // what run() would put on the platform's links.
  std::map<int, double> link_bytes(const std::vector<Flow>& flows);
  // Latency of the route between two GPUs (sum of its links').
  Seconds latency(std::int64_t src, std::int64_t dst);
  // Bandwidth of the narrowest link on that route (bytes/s).
  double edge_bandwidth(std::int64_t src, std::int64_t dst);
  // The links of that route (indices for link_bandwidth) and a link's bandwidth (bytes/s).
  const std::vector<int>& route_links(std::int64_t src, std::int64_t dst) { return route(src, dst).links; }
  double link_bandwidth(int link) const { return loads_[static_cast<std::size_t>(link)].bandwidth; }

  // The host of a GPU (of its representative with replica symmetry).
  simgrid::s4u::Host* host(std::int64_t rank) const { return platform_.gpus[static_cast<std::size_t>(index(rank))]; }
  const ReplicaSymmetry& symmetry() const { return platform_.symmetry; }
  std::int64_t gpus_per_node() const { return platform_.gpus_per_node; }
  std::int64_t node_of(std::int64_t rank) const { return rank / platform_.gpus_per_node; }
  // Whether GPUs inside a node reach each other through a switch (own port per GPU).
  bool switched_nodes() const { return platform_.switched_nodes; }
  // The nodes' NVLink wiring when the platform was built from fabric nvlink-mesh, else null.
  const MeshWiring* mesh() const { return platform_.mesh.gpus > 0 ? &platform_.mesh : nullptr; }
  bool tracing() const { return trace_ != nullptr; }
  std::int64_t flows_started() const { return flows_; }  // simulated flows (not their copies)
  Bytes bytes_sent() const { return bytes_; }            // of the whole cluster, copies included
  // Every link of the cluster that carried traffic, sorted by name (with replica
  // symmetry, the copies of the representatives' links, each with the same load).
  std::vector<LinkLoad> link_loads() const;
  // The cluster when its profile's NCCL fit prices collectives inside a node, else null.
  const ClusterModel* nccl_fit() const { return platform_.nccl_fit ? &*platform_.nccl_fit : nullptr; }

 private:
  struct Route {
    std::vector<int> links;  // indices into loads_
    Seconds latency = 0;
    double bandwidth = 0;  // narrowest link
  };
  const Route& route(std::int64_t src, std::int64_t dst);
  // The route between a simulated GPU (index into platform_.gpus) and an endpoint: a
  // simulated GPU's index, or gpus.size() + index for that GPU's mirror.
  const Route& placed_route(std::int64_t src, std::int64_t endpoint);
  // Where a flow between two ranks runs: (source index, destination endpoint), moved by
  // the shift that takes the source to its representative.
  std::pair<std::int64_t, std::int64_t> place(std::int64_t src, std::int64_t dst) const;
  std::int64_t index(std::int64_t rank) const {
    return platform_.symmetry.active() ? platform_.symmetry.simulated_index(rank) : rank;
  }
  // The flows that run (see run()) and the bytes of the whole cluster they stand for.
  std::vector<const Flow*> fold(const std::vector<Flow>& flows, Bytes* represented) const;

  const Platform& platform_;
  Trace* trace_;
  std::unordered_map<std::uint64_t, Route> routes_;  // lookup only, never iterated
  std::unordered_map<const void*, int> link_index_;  // lookup only, never iterated
  std::vector<LinkLoad> loads_;
  std::vector<std::int64_t> load_node_;  // per link: its node in the cluster, -1 if shared by all (symmetry)
  std::int64_t flows_ = 0;
  Bytes bytes_ = 0;
};

}  // namespace clustersim::sim

// The cluster as the cost model sees it: the GPU profile plus resolved link figures.
// Fields left out of the scenario take the GPU profile's values.
#pragma once
#include <cstdint>

#include "costmodel/hardware.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

struct ClusterModel {
  GpuProfile gpu;
  std::int64_t nodes = 1, gpus_per_node = 1;
  Fabric fabric = Fabric::nvswitch;
  BytesPerSecond intra_bandwidth = 0;  // per GPU per direction
  Seconds intra_latency = 0;
  Topology topology = Topology::fat_tree;
  std::int64_t nics_per_node = 0;
  BytesPerSecond nic_bandwidth = 0;  // per NIC per direction
  Seconds inter_latency = 0;
  double oversubscription = 1;

  std::int64_t total_gpus() const { return nodes * gpus_per_node; }
  // What one node can push into the network, after the core's oversubscription.
  BytesPerSecond node_network_bandwidth() const;
};

// Resolves the GPU profile and link defaults; problems go to `diag` at /cluster/...
ClusterModel resolve_cluster(const ClusterSpec& spec, Diagnostics& diag);

}  // namespace clustersim

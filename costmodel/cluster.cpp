#include "costmodel/cluster.hpp"

#include <fmt/format.h>

#include "costmodel/nvlink_mesh.hpp"
#include "scenarios/json_reader.hpp"

namespace clustersim {

BytesPerSecond ClusterModel::node_network_bandwidth() const {
  return double(nics_per_node) * nic_bandwidth / oversubscription;
}

ClusterModel resolve_cluster(const ClusterSpec& spec, Diagnostics& diag) {
  ClusterModel c;
  std::optional<GpuProfile> profile;
  try {
    profile = find_gpu_profile(spec.gpu);
  } catch (const InputError& e) {
    for (const auto& p : e.problems()) diag.error("/cluster/gpu", fmt::format("profile {}: {}", spec.gpu, p.to_string()));
    return c;
  }
  if (!profile) {
    const auto names = builtin_gpu_names();
    std::vector<std::string_view> views(names.begin(), names.end());
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : " | ") + n;
    const auto guess = nearest(spec.gpu, views);
    diag.error("/cluster/gpu", fmt::format("unknown GPU \"{}\": expected one of {} or a profile file{}", spec.gpu, list,
                                           guess.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", guess)));
    return c;
  }
  c.gpu = *profile;
  c.nodes = spec.nodes;
  c.gpus_per_node = spec.gpus_per_node;
  c.fabric = spec.intra_node.fabric;
  const BytesPerSecond fabric_default =
      c.fabric == Fabric::pcie ? c.gpu.pcie_bandwidth : c.gpu.nvlink_bandwidth;
  c.intra_bandwidth = spec.intra_node.bandwidth.value_or(fabric_default);
  c.intra_latency = spec.intra_node.latency.value_or(c.gpu.nvlink_latency);
  if (spec.inter_node) {
    c.topology = spec.inter_node->topology;
    c.nics_per_node = spec.inter_node->nics_per_node;
    c.nic_bandwidth = spec.inter_node->nic_bandwidth;
    c.inter_latency = spec.inter_node->latency;
    c.oversubscription = spec.inter_node->oversubscription;
  }
  if (c.intra_bandwidth <= 0 && c.gpus_per_node > 1)
    diag.error("/cluster/intra_node/bandwidth", "no intra-node bandwidth: give one (the GPU profile has none)");
  if (c.fabric == Fabric::nvlink_mesh) {
    // The wiring is DGX-1V's hybrid cube mesh (costmodel/nvlink_mesh.hpp), which has 8 GPUs.
    if (c.gpus_per_node > kHybridCubeMeshGpus)
      diag.error("/cluster/gpus_per_node",
                 fmt::format("fabric nvlink-mesh is the DGX-1 hybrid cube mesh of {} GPUs: expected at most {} GPUs per "
                             "node, got {} (use fabric nvswitch for larger nodes)",
                             kHybridCubeMeshGpus, kHybridCubeMeshGpus, c.gpus_per_node));
    else if (c.gpu.pcie_bandwidth <= 0 && mesh_wiring(c).pairs.size() * 2 < std::size_t(c.gpus_per_node * (c.gpus_per_node - 1)))
      diag.error("/cluster/gpu", fmt::format("profile {} has no PCIe bandwidth, which fabric nvlink-mesh needs for the GPU "
                                             "pairs of a {}-GPU node without NVLink",
                                             c.gpu.name, c.gpus_per_node));
  }
  return c;
}

}  // namespace clustersim

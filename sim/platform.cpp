#include "sim/platform.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <unordered_map>
#include <stdexcept>
#include <simgrid/s4u.hpp>

#include "costmodel/nccl_model.hpp"

namespace sg4 = simgrid::s4u;

namespace clustersim::sim {
namespace {

using i64 = std::int64_t;
using NetPoint = simgrid::kernel::routing::NetPoint;

struct Builder {
  sg4::NetZone* zone;
  std::unordered_map<const void*, i64>* link_node = nullptr;  // reduced platform: each link's node
  i64 node = -1;  // node of the links created now (-1: shared by all nodes)
  i64 links = 0, shared_links = 0;

  sg4::Link* created(sg4::Link* l, double lat) {
    ++links;
    if (node < 0) ++shared_links;
    if (link_node) link_node->emplace(l, node);
    l->set_latency(lat);
    l->seal();
    return l;
  }
  sg4::Link* duplex(const std::string& name, double bw, double lat) {
    auto* l = zone->create_split_duplex_link(name, bw);
    if (link_node) {  // routes name the two directions
      link_node->emplace(l->get_link_up(), node);
      link_node->emplace(l->get_link_down(), node);
    }
    return created(l, lat);
  }
  sg4::Link* shared(const std::string& name, double bw, double lat) { return created(zone->create_link(name, bw), lat); }
  // a -> b uses the link's UP direction, b -> a its DOWN direction.
  void connect(NetPoint* a, NetPoint* b, sg4::Link* l) {
    const bool duplex_link = dynamic_cast<sg4::SplitDuplexLink*>(l) != nullptr;
    zone->add_route(a, b, nullptr, nullptr,
                    {duplex_link ? sg4::LinkInRoute(l, sg4::LinkInRoute::Direction::UP) : sg4::LinkInRoute(l)}, true);
  }
};

}  // namespace

Platform build_platform(const ClusterModel& cluster, const ReplicaSymmetry& symmetry) {
  // With the profile's NCCL fit, collectives inside a node pay NCCL's measured latency
  // once (run_collective): the links there would count it twice.
  ClusterModel c = cluster;
  if (nvlink_fit_applies(cluster)) c.intra_latency = 0;
  // The reduced platform: the representatives' nodes only, named as in the cluster. A
  // rail's uplink then gets nodes/copies NICs' worth, 1/copies of its bandwidth: the
  // representatives' share (sim/symmetry.hpp).
  const bool folded = symmetry.active();
  if (folded) c.nodes = cluster.nodes / symmetry.copies();
  const auto rank_name = [&](i64 r) { return folded ? symmetry.rank_of_index(r) : r; };
  const auto node_name = [&](i64 n) { return rank_name(n * c.gpus_per_node) / c.gpus_per_node; };
  Platform p;
  if (folded) p.symmetry = symmetry;
  if (nvlink_fit_applies(cluster)) p.nccl_fit = cluster;
  p.gpus_per_node = c.gpus_per_node;
  p.switched_nodes = c.fabric != Fabric::nvlink_mesh;
  if (c.fabric == Fabric::nvlink_mesh && c.gpus_per_node > 1) p.mesh = mesh_wiring(c);
  auto* zone = sg4::create_dijkstra_zone("cluster", true);
  Builder b{zone, folded ? &p.link_node : nullptr};
  const i64 gpn = c.gpus_per_node;
  const double intra_bw = c.intra_bandwidth * c.gpu.efficiency.collective_nvlink;
  const double nic_bw = c.nic_bandwidth * c.gpu.efficiency.collective_network;
  const double pcie_bw = c.gpu.pcie_bandwidth > 0 ? c.gpu.pcie_bandwidth : nic_bw;
  const bool network = cluster.nodes > 1 && c.nics_per_node > 0;
  const i64 nics = std::max<i64>(1, c.nics_per_node);

  // Switches shared by all nodes.
  NetPoint* core = nullptr;
  std::vector<NetPoint*> rails, leaves;
  std::vector<sg4::Link*> rail_uplinks;
  if (network) {
    core = zone->create_router("core");
    if (c.topology == Topology::rail_optimized) {
      for (i64 r = 0; r < nics; ++r) {
        rails.push_back(zone->create_router(fmt::format("rail{}", r)));
        rail_uplinks.push_back(
            b.duplex(fmt::format("rail{}-uplink", r), double(c.nodes) * nic_bw / c.oversubscription, 0));
        b.connect(rails.back(), core, rail_uplinks.back());
      }
    } else if (c.topology == Topology::leaf_spine) {
      for (i64 l = 0; l * kLeafNodes < c.nodes; ++l) {
        const i64 in_leaf = std::min(kLeafNodes, c.nodes - l * kLeafNodes);
        leaves.push_back(zone->create_router(fmt::format("leaf{}", l)));
        b.connect(leaves.back(), core,
                  b.duplex(fmt::format("leaf{}-uplink", l), double(in_leaf * nics) * nic_bw / c.oversubscription, 0));
      }
    }
  }

  for (i64 n0 = 0; n0 < c.nodes; ++n0) {
    const i64 n = node_name(n0);
    b.node = n;
    std::vector<NetPoint*> gpu_points;
    for (i64 g = 0; g < gpn; ++g) {
      auto* h = zone->create_host(fmt::format("gpu-{}", rank_name(n0 * gpn + g)), 1.0);
      h->seal();
      p.gpus.push_back(h);
      gpu_points.push_back(h->get_netpoint());
    }
    // Inside the node.
    if (gpn > 1) {
      if (c.fabric == Fabric::nvlink_mesh) {
        // As wired: one link per pair with NVLinks (count x one link's bandwidth), and
        // each GPU's PCIe link to the host for the pairs without. A pair without NVLink
        // gets a direct route over both PCIe links: Dijkstra keeps the first route of
        // least cost it finds from the source, so it is never a detour through a third
        // GPU's NVLinks (also two links).
        const MeshWiring& w = p.mesh;
        for (const auto& pair : w.pairs)
          b.connect(gpu_points[static_cast<std::size_t>(pair.a)], gpu_points[static_cast<std::size_t>(pair.b)],
                    b.duplex(fmt::format("n{}-nvlink{}-{}", n, pair.a, pair.b), double(pair.links) * w.link_bandwidth,
                             c.intra_latency));
        std::vector<sg4::Link*> host;
        for (i64 g = 0; g < gpn; ++g)
          host.push_back(b.duplex(fmt::format("n{}-gpu{}-pcie-host", n, g), w.host_bandwidth, c.intra_latency / 2));
        for (int a = 0; a < w.gpus; ++a)
          for (int z = a + 1; z < w.gpus; ++z)
            if (w.links(a, z) == 0)
              zone->add_route(gpu_points[static_cast<std::size_t>(a)], gpu_points[static_cast<std::size_t>(z)], nullptr,
                              nullptr,
                              {sg4::LinkInRoute(host[static_cast<std::size_t>(a)], sg4::LinkInRoute::Direction::UP),
                               sg4::LinkInRoute(host[static_cast<std::size_t>(z)], sg4::LinkInRoute::Direction::DOWN)},
                              true);
      } else {
        const char* kind = c.fabric == Fabric::pcie ? "pcie-switch" : "nvswitch";
        auto* sw = zone->create_router(fmt::format("n{}-{}", n, kind));
        for (i64 g = 0; g < gpn; ++g)
          b.connect(gpu_points[g], sw, b.duplex(fmt::format("n{}-gpu{}-{}", n, g, c.fabric == Fabric::pcie ? "pcie" : "nvlink"),
                                                intra_bw, c.intra_latency / 2));
      }
    }
    if (!network) continue;
    // NICs and the node's way into the network.
    NetPoint* node_switch = nullptr;
    sg4::Link* uplink = nullptr;
    if (c.topology == Topology::fat_tree) {
      node_switch = zone->create_router(fmt::format("n{}-tor", n));
      uplink = b.duplex(fmt::format("n{}-uplink", n), double(nics) * nic_bw / c.oversubscription, 0);
      b.connect(node_switch, core, uplink);
    } else if (c.topology == Topology::leaf_spine) {
      node_switch = leaves[static_cast<std::size_t>(n / kLeafNodes)];
    }
    std::vector<NetPoint*> nic_points;
    std::vector<sg4::Link*> nic_links, pcie_links;
    for (i64 k = 0; k < nics; ++k) {
      nic_points.push_back(zone->create_router(fmt::format("n{}-nic{}", n, k)));
      NetPoint* up = c.topology == Topology::rail_optimized ? rails[static_cast<std::size_t>(k)] : node_switch;
      nic_links.push_back(b.duplex(fmt::format("n{}-nic{}-link", n, k), nic_bw, c.inter_latency / 2));
      b.connect(nic_points.back(), up, nic_links.back());
    }
    for (i64 g = 0; g < gpn; ++g) {
      pcie_links.push_back(b.duplex(fmt::format("n{}-gpu{}-pcie-nic", n, g), pcie_bw, 0));
      b.connect(gpu_points[g], nic_points[static_cast<std::size_t>(g % nics)], pcie_links.back());
    }
    if (!folded) continue;
    // Mirror routes: GPU i out through its NIC into the network, back in through GPU j's
    // NIC, the links a flow from GPU i here to GPU j of a copy of this node crosses
    // (fat tree: through the node's uplink both ways; rail-optimized: the rails' uplinks
    // when the NICs differ).
    using Dir = sg4::LinkInRoute::Direction;
    std::vector<sg4::Host*> mirrors;
    for (i64 j = 0; j < gpn; ++j) {
      mirrors.push_back(zone->create_host(fmt::format("gpu-{}-mirror", rank_name(n0 * gpn + j)), 1.0));
      mirrors.back()->seal();
      p.mirrors.push_back(mirrors.back());
    }
    for (i64 i = 0; i < gpn; ++i)
      for (i64 j = 0; j < gpn; ++j) {
        const auto ki = static_cast<std::size_t>(i % nics), kj = static_cast<std::size_t>(j % nics);
        std::vector<sg4::LinkInRoute> route{{pcie_links[static_cast<std::size_t>(i)], Dir::UP}, {nic_links[ki], Dir::UP}};
        if (uplink) {
          route.emplace_back(uplink, Dir::UP);
          route.emplace_back(uplink, Dir::DOWN);
        } else if (ki != kj) {
          route.emplace_back(rail_uplinks[ki], Dir::UP);
          route.emplace_back(rail_uplinks[kj], Dir::DOWN);
        }
        route.emplace_back(nic_links[kj], Dir::DOWN);
        route.emplace_back(pcie_links[static_cast<std::size_t>(j)], Dir::DOWN);
        zone->add_route(gpu_points[static_cast<std::size_t>(i)], mirrors[static_cast<std::size_t>(j)]->get_netpoint(),
                        nullptr, nullptr, route, false);
      }
  }
  zone->seal();
  // Counts of the whole cluster: the reduced platform's node links stand for copies each.
  const i64 copies = folded ? symmetry.copies() : 1;
  p.links = (b.links - b.shared_links) * copies + b.shared_links;
  p.description = {{"hosts", cluster.total_gpus()},
                   {"links", p.links},
                   {"routing", "dijkstra (cached)"},
                   {"intra_node", to_string(c.fabric)},
                   {"intra_link_bandwidth_Bps", intra_bw},
                   {"topology", network ? std::string(to_string(c.topology)) : std::string("none")},
                   {"nic_link_bandwidth_Bps", network ? nic_bw : 0.0},
                   {"pcie_link_bandwidth_Bps", network ? pcie_bw : 0.0},
                   {"oversubscription", c.oversubscription},
                   {"bandwidth_efficiency", {{"intra_node", c.gpu.efficiency.collective_nvlink},
                                             {"network", c.gpu.efficiency.collective_network}}}};
  if (p.mesh.gpus > 0) {
    const MeshWiring& w = p.mesh;
    auto pairs = nlohmann::json::array();
    for (const auto& pair : w.pairs) pairs.push_back({pair.a, pair.b, pair.links});
    p.description["nvlink_pairs"] = pairs;  // [a, b, links] per node, local indices
    p.description["intra_link_bandwidth_Bps"] = w.link_bandwidth;  // one NVLink
    p.description["host_link_bandwidth_Bps"] = w.host_bandwidth;
  }
  if (folded)
    p.description["replica_symmetry"] = {{"replicas", symmetry.dp},
                                         {"simulated_replicas", symmetry.classes},
                                         {"simulated_hosts", p.gpus.size()},
                                         {"simulated_links", b.links}};
  return p;
}

Platform load_platform_file(const std::string& file, const ClusterModel& c, bool switched_nodes) {
  // SimGrid reports a missing or malformed file as its own exception, which would read
  // as an internal error: the file is the user's, so say which one and why.
  if (!std::ifstream(file)) throw InputError(file, "", "cannot open the platform file (does it exist and is it readable?)");
  try {
    sg4::Engine::get_instance()->load_platform(file);
  } catch (const std::exception& e) {
    throw InputError(file, "", fmt::format("not a valid SimGrid platform file: {}", e.what()));
  }
  Platform p;
  p.gpus_per_node = c.gpus_per_node;
  p.switched_nodes = switched_nodes;
  for (i64 r = 0; r < c.total_gpus(); ++r) {
    auto* h = sg4::Host::by_name_or_null(fmt::format("gpu-{}", r));
    if (!h)
      throw InputError(file, "--platform", fmt::format("no host named gpu-{}: the scenario has {} GPUs, named gpu-0 ... gpu-{}", r,
                                             c.total_gpus(), c.total_gpus() - 1));
    p.gpus.push_back(h);
  }
  p.links = static_cast<i64>(sg4::Engine::get_instance()->get_link_count());
  p.description = {{"file", file}, {"hosts", p.gpus.size()}, {"links", p.links}};
  return p;
}

}  // namespace clustersim::sim

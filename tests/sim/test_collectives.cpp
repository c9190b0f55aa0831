// Collective algorithms on the SimGrid platform against their closed forms, and the
// contention case the analytical estimator cannot see.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "costmodel/collectives.hpp"
#include "sim/simulate.hpp"

using namespace clustersim;

namespace {

ClusterModel cluster(std::int64_t nodes, std::int64_t gpus_per_node, std::int64_t nics_per_node) {
  ClusterSpec spec;
  spec.gpu = "a100-sxm4-80gb";
  spec.nodes = nodes;
  spec.gpus_per_node = gpus_per_node;
  spec.intra_node.bandwidth = 300e9;
  spec.intra_node.latency = 3e-6;
  if (nodes > 1) spec.inter_node = InterNodeSpec{Topology::fat_tree, nics_per_node, 25e9, 5e-6, 1.0};
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  c.gpu.nccl = NcclCalibration{};  // the closed forms below are the constant-efficiency model's
  c.gpu.efficiency.collective_nvlink = 0.70;  // with the NCCL efficiency they state
  return c;
}

std::vector<std::int64_t> ranks(std::int64_t first, std::int64_t count, std::int64_t stride = 1) {
  std::vector<std::int64_t> r;
  for (std::int64_t i = 0; i < count; ++i) r.push_back(first + i * stride);
  return r;
}

}  // namespace

TEST_CASE("ring all-reduce takes 2(n-1)/n B/bw + 2(n-1) latency", "[sim][collectives]") {
  const double B = 256e6;
  SECTION("8 GPUs of one NVSwitch node") {
    const ClusterModel c = cluster(1, 8, 0);
    const double n = 8, bw = c.intra_bandwidth * c.gpu.efficiency.collective_nvlink, lat = c.intra_latency;
    const double expected = 2 * (n - 1) / n * B / bw + 2 * (n - 1) * lat;
    for (const char* algo : {"ring", "ring-pipelined", "node-aggregated", "auto"}) {
      const double t = sim::time_collectives(c, {{algo, Collective::all_reduce, B, {ranks(0, 8)}}}).at(0);
      std::printf("ring all-reduce %-16s n=8 NVSwitch: expected %.6f s, simulated %.6f s\n", algo, expected, t);
      CHECK(t == Approx(expected).epsilon(0.01));
    }
  }
  SECTION("16 GPUs, one per node, across the fat tree") {
    const ClusterModel c = cluster(16, 1, 1);
    const double n = 16, bw = c.nic_bandwidth * c.gpu.efficiency.collective_network, lat = c.inter_latency;
    const double expected = 2 * (n - 1) / n * B / bw + 2 * (n - 1) * lat;
    for (const char* algo : {"ring", "ring-pipelined"}) {
      const double t = sim::time_collectives(c, {{algo, Collective::all_reduce, B, {ranks(0, 16)}}}).at(0);
      std::printf("ring all-reduce %-16s n=16 over NICs: expected %.6f s, simulated %.6f s\n", algo, expected, t);
      CHECK(t == Approx(expected).epsilon(0.01));
    }
  }
  SECTION("a small buffer is latency-bound: the step-by-step ring pays 2(n-1) latencies") {
    const ClusterModel c = cluster(1, 8, 0);
    const double small = 8e3, n = 8, bw = c.intra_bandwidth * c.gpu.efficiency.collective_nvlink;
    const double expected = 2 * (n - 1) / n * small / bw + 2 * (n - 1) * c.intra_latency;
    const double t = sim::time_collectives(c, {{"ring", Collective::all_reduce, small, {ranks(0, 8)}}}).at(0);
    std::printf("ring all-reduce of 8 kB: expected %.3e s, simulated %.3e s\n", expected, t);
    CHECK(t == Approx(expected).epsilon(0.01));
  }
}

TEST_CASE("all-gather, tree and hierarchical all-reduce match their closed forms", "[sim][collectives]") {
  const double B = 256e6;
  const ClusterModel c = cluster(1, 8, 0);
  const double n = 8, bw = c.intra_bandwidth * c.gpu.efficiency.collective_nvlink, lat = c.intra_latency;
  const double ag = (n - 1) / n * B / bw + (n - 1) * lat;
  const double t_ag = sim::time_collectives(c, {{"ring", Collective::all_gather, B, {ranks(0, 8)}}}).at(0);
  std::printf("ring all-gather n=8: expected %.6f s, simulated %.6f s\n", ag, t_ag);
  CHECK(t_ag == Approx(ag).epsilon(0.01));
  // Double binary tree: each rank moves B in and B out per phase.
  const double tree = 2 * B / bw + 2 * std::ceil(std::log2(n)) * lat;
  const double t_tree = sim::time_collectives(c, {{"tree", Collective::all_reduce, B, {ranks(0, 8)}}}).at(0);
  std::printf("tree all-reduce n=8: expected %.6f s, simulated %.6f s\n", tree, t_tree);
  CHECK(t_tree == Approx(tree).epsilon(0.02));
  // Hierarchical over 4 nodes x 4 GPUs (4 NICs each): intra reduce-scatter, inter
  // all-reduce of B/4 per local rank on its own NIC, intra all-gather.
  const ClusterModel c4 = cluster(4, 4, 4);
  const double nic = c4.nic_bandwidth * c4.gpu.efficiency.collective_network;
  const double intra = c4.intra_bandwidth * c4.gpu.efficiency.collective_nvlink;
  const double h = 2 * (3.0 / 4 * B / intra + 3 * c4.intra_latency) + 2 * 3.0 / 4 * (B / 4) / nic + 6 * c4.inter_latency;
  const double t_h = sim::time_collectives(c4, {{"hierarchical", Collective::all_reduce, B, {ranks(0, 16)}}}).at(0);
  std::printf("hierarchical all-reduce 4x4: expected %.6f s, simulated %.6f s\n", h, t_h);
  CHECK(t_h == Approx(h).epsilon(0.01));
}

TEST_CASE("two all-reduces sharing one NIC take twice as long, the estimator misses it", "[sim][contention]") {
  // Two nodes of 2 GPUs with a single NIC each. Group A = GPU 0 of each node, group B =
  // GPU 1 of each node: both rings cross the network through the same two NICs.
  const ClusterModel c = cluster(2, 2, 1);
  const double B = 512e6;
  const sim::CollectiveProbe a{"ring-pipelined", Collective::all_reduce, B, {{0, 2}}};
  const sim::CollectiveProbe b{"ring-pipelined", Collective::all_reduce, B, {{1, 3}}};
  const double alone = sim::time_collectives(c, {a}).at(0);
  const auto both = sim::time_collectives(c, {a, b});
  // The estimator prices each collective on its own; it has no notion of the other one.
  const double estimated = collective_time(c, Collective::all_reduce, B, Group{2, 1}, 1.0);
  std::printf("all-reduce of %.0f MB over one shared NIC: alone %.6f s, with a second one %.6f s and %.6f s "
              "(expected 2x = %.6f s); estimator %.6f s in both cases\n",
              B / 1e6, alone, both[0], both[1], 2 * alone, estimated);
  CHECK(both[0] == Approx(2 * alone).epsilon(0.02));
  CHECK(both[1] == Approx(2 * alone).epsilon(0.02));
  CHECK(estimated == Approx(alone).epsilon(0.02));
  CHECK(both[0] > 1.9 * estimated);
}

namespace {
ClusterModel dgx1(std::int64_t gpus_per_node) {
  ClusterSpec spec;
  spec.gpu = "v100-sxm2-16gb";
  spec.gpus_per_node = gpus_per_node;
  spec.intra_node.fabric = Fabric::nvlink_mesh;
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  c.gpu.nccl = NcclCalibration{};  // the closed forms below are the constant-efficiency model's
  c.gpu.efficiency.collective_nvlink = 0.70;  // with the NCCL efficiency they state
  return c;
}
}  // namespace

TEST_CASE("nvlink-mesh: ring collectives run along the packed rings at the estimator's time", "[sim][collectives][mesh]") {
  // DGX-1V: one NVLink 25 GB/s per direction, x 0.70 NCCL efficiency; the rings costmodel
  // packs give all 8 GPUs 6 links, GPUs 0-3 4, the pair 0-3 its 2 (hand-derived in
  // tests/core/test_nvlink_mesh.cpp).
  const double B = 256e6, link = 25e9 * 0.70;
  struct Case {
    std::int64_t node_gpus;
    std::vector<std::int64_t> group;
    double links;
    std::int64_t stride;  // of the Group the estimator prices (its slowest placement), 0: not this group alone
  };
  // {0, 3} alone is not a placement of pairs (stride 3 also places {1, 4}, without NVLink).
  const Case cases[] = {
      {8, ranks(0, 8), 6, 1}, {4, ranks(0, 4), 4, 1}, {8, {0, 3}, 2, 0}, {8, {0, 1}, 1, 1}, {8, {0, 2, 4, 6}, 2, 2}};
  for (const auto& c : cases) {
    const ClusterModel m = dgx1(c.node_gpus);
    const double n = double(c.group.size()), lat = m.intra_latency;
    const double expected = 2 * (n - 1) / n * B / (c.links * link) + 2 * (n - 1) * lat;
    const auto size = static_cast<std::int64_t>(c.group.size());
    const double estimated =
        c.stride > 0 ? collective_time(m, Collective::all_reduce, B, Group{size, size, c.stride}, 1.0) : expected;
    for (const char* algo : {"ring", "ring-pipelined", "node-aggregated", "auto"}) {
      const double t = sim::time_collectives(m, {{algo, Collective::all_reduce, B, {c.group}}}).at(0);
      std::printf("all-reduce over %zu GPUs (from %lld) %-15s: expected %.6f s, estimated %.6f s, simulated %.6f s\n",
                  c.group.size(), static_cast<long long>(c.group[0]), algo, expected, estimated, t);
      CHECK(t == Approx(expected).epsilon(0.01));
    }
    CHECK(estimated == Approx(expected).epsilon(1e-9));
  }
}

TEST_CASE("nvlink-mesh: pairs without NVLink go through the host over each GPU's PCIe link", "[sim][collectives][mesh]") {
  const ClusterModel m = dgx1(8);
  const double B = 64e6, pcie = 16e9 * 0.70, lat = m.intra_latency;
  const auto p2p_time = [&](const std::vector<std::vector<std::int64_t>>& pairs) {
    return sim::time_collectives(m, {{"p2p", Collective::send_recv, B, pairs}}).at(0);
  };
  // 0 -> 5 has no NVLink: PCIe, not a detour over NVLinks 0-1-5 (17.5 GB/s).
  const double alone = p2p_time({{0, 5}});
  std::printf("send 0 -> 5 (SYS): expected %.6f s, simulated %.6f s\n", B / pcie + lat, alone);
  CHECK(alone == Approx(B / pcie + lat).epsilon(0.01));
  // GPU 0's three host-routed sends share its PCIe link.
  const double three = p2p_time({{0, 5}, {0, 6}, {0, 7}});
  std::printf("sends 0 -> 5, 6, 7 at once: expected %.6f s, simulated %.6f s\n", 3 * B / pcie + lat, three);
  CHECK(three == Approx(3 * B / pcie + lat).epsilon(0.01));
  // 0 -> 3 over its two NVLinks.
  CHECK(p2p_time({{0, 3}}) == Approx(B / (2 * 25e9 * 0.70) + lat).epsilon(0.01));
  // An all-reduce over a pair without NVLink: the estimator's fallback.
  const double est = collective_time(m, Collective::all_reduce, B, Group{2, 2, 5}, 1.0);
  const double t = sim::time_collectives(m, {{"auto", Collective::all_reduce, B, {{0, 5}}}}).at(0);
  std::printf("all-reduce over {0, 5}: estimated %.6f s, simulated %.6f s\n", est, t);
  CHECK(t == Approx(est).epsilon(0.01));
  // All-to-all over the node: the PCIe links carry 3 pieces each way, the estimator's
  // bottleneck.
  const double a2a_est = collective_time(m, Collective::all_to_all, B, Group{8, 8}, 1.0);
  const double a2a = sim::time_collectives(m, {{"auto", Collective::all_to_all, B, {ranks(0, 8)}}}).at(0);
  std::printf("all-to-all over 8 GPUs: estimated %.6f s, simulated %.6f s\n", a2a_est, a2a);
  CHECK(a2a == Approx(a2a_est).epsilon(0.02));
}

TEST_CASE("tree all-reduce across nodes with several GPUs each: trees over the nodes, chains inside", "[sim][collectives]") {
  // 8 nodes of 8 GPUs, one NIC each: NCCL's double binary tree puts about B per phase and
  // direction on a node's NIC (2 B / bw in all, the estimator's tree); a binary tree over
  // the 64 ranks in rank order put up to 16 tree edges on one NIC (8x slower).
  const ClusterModel c = cluster(8, 8, 1);
  const double B = 80e6, nic = c.nic_bandwidth * c.gpu.efficiency.collective_network;
  const double expected = all_reduce_time(AllReduceAlgorithm::tree, 64, B, nic, c.inter_latency);
  const double t = sim::time_collectives(c, {{"tree", Collective::all_reduce, B, {ranks(0, 64)}}}).at(0);
  std::printf("tree all-reduce 8 nodes x 8 GPUs, one NIC each: expected %.6f s, simulated %.6f s\n", expected, t);
  CHECK(t == Approx(expected).epsilon(0.02));
}

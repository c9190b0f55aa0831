// The platform: routes inside a node use the GPU's own NVSwitch port, routes across
// nodes the GPU's NIC; a SimGrid platform file can replace the built platform.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {
Scenario two_gpus() {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"]["layers"] = 2;
  doc["training"]["global_batch"] = 8;
  doc["cluster"] = {{"gpu", "a100-sxm4-80gb"}, {"nodes", 1}, {"gpus_per_node", 2}};
  doc["plan"] = {{"dp", 2}, {"tp", 1}, {"pp", 1}, {"zero", 0}, {"overlap_grad_reduce", false}};
  Diagnostics diag("<test>");
  Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  return s;
}
}  // namespace

TEST_CASE("a SimGrid platform file replaces the built platform", "[sim][platform]") {
  const Scenario s = two_gpus();
  const auto file = (clustersim::test::temp_dir() / "clustersim-test-platform.xml").string();
  // Slow links between the two GPUs, one per direction: the gradient all-reduce (a ring
  // of two, each edge carrying the whole buffer) must take B/bw + 2 latencies on them.
  std::ofstream(file) << R"(<?xml version='1.0'?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <zone id="world" routing="Full">
    <host id="gpu-0" speed="1f"/>
    <host id="gpu-1" speed="1f"/>
    <link id="slow-0-1" bandwidth="1GBps" latency="10us"/>
    <link id="slow-1-0" bandwidth="1GBps" latency="10us"/>
    <route src="gpu-0" dst="gpu-1" symmetrical="NO"><link_ctn id="slow-0-1"/></route>
    <route src="gpu-1" dst="gpu-0" symmetrical="NO"><link_ctn id="slow-1-0"/></route>
  </zone>
</platform>
)";
  sim::SimulateOptions o;
  o.platform_file = file;
  const json built = sim::to_json(sim::simulate(s));
  const json loaded = sim::to_json(sim::simulate(s, o));
  const double grad_bytes = loaded["stages"][0]["params_per_gpu"].get<double>() * 4;
  const double expected = grad_bytes / 1e9 + 2 * 10e-6;
  const double got = loaded["breakdown"]["dp_comm_exposed_s"].get<double>();
  std::printf("all-reduce of %.0f MB on the file's 1 GB/s link: expected %.5f s, simulated %.5f s (built platform %.5f s)\n",
              grad_bytes / 1e6, expected, got, built["breakdown"]["dp_comm_exposed_s"].get<double>());
  CHECK(got == Approx(expected).epsilon(0.01));
  CHECK(loaded["simulator"]["platform"]["file"] == file);
  // The same file named in the scenario ("simulation": {"platform": ...}).
  Scenario named = s;
  named.simulation.platform = file;
  CHECK(sim::to_json(sim::simulate(named))["breakdown"]["dp_comm_exposed_s"].get<double>() == Approx(got).epsilon(1e-12));
  // A file without enough GPUs is an input error naming the missing host.
  Scenario bigger = s;
  bigger.cluster.gpus_per_node = 4;
  bigger.plan.dp = 4;
  bigger.training.global_batch = 16;
  CHECK_THROWS_AS(sim::to_json(sim::simulate(bigger, o)), InputError);
  std::filesystem::remove(file);
}

namespace {
ClusterModel network(Topology topo, std::int64_t nodes, double oversubscription) {
  ClusterSpec spec;
  spec.gpu = "a100-sxm4-80gb";
  spec.nodes = nodes;
  spec.gpus_per_node = 8;
  spec.inter_node = InterNodeSpec{topo, 8, 25e9, 5e-6, oversubscription};
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  return c;
}

// Simulated time of p2p flows of B bytes between the given pairs, all at once.
double p2p(const ClusterModel& c, const std::vector<std::pair<std::int64_t, std::int64_t>>& pairs, double B) {
  sim::CollectiveProbe probe{"p2p", Collective::send_recv, B, {}};
  for (auto [a, b] : pairs) probe.groups.push_back({a, b});
  return sim::time_collectives(c, {probe}).at(0);
}
}  // namespace

TEST_CASE("topologies: oversubscription slows only the traffic that crosses it", "[sim][platform]") {
  const double B = 100e6;
  SECTION("fat tree: the node's uplink carries nics x nic_bandwidth / oversubscription") {
    std::vector<std::pair<std::int64_t, std::int64_t>> all;  // 8 GPUs of node 0 to node 1
    for (std::int64_t g = 0; g < 8; ++g) all.push_back({g, 8 + g});
    const ClusterModel full = network(Topology::fat_tree, 2, 1.0), half = network(Topology::fat_tree, 2, 2.0);
    const double nic = full.nic_bandwidth * full.gpu.efficiency.collective_network;
    const double t1 = p2p(full, all, B), t2 = p2p(half, all, B);
    std::printf("fat tree, 8 flows node 0 -> 1: oversubscription 1 %.6f s (expected %.6f), 2: %.6f s (expected %.6f)\n",
                t1, B / nic + full.inter_latency, t2, 2 * B / nic + full.inter_latency);
    CHECK(t1 == Approx(B / nic + full.inter_latency).epsilon(0.01));
    CHECK(t2 == Approx(2 * B / nic + full.inter_latency).epsilon(0.01));
  }
  SECTION("leaf-spine: traffic inside a leaf never touches the oversubscribed uplink") {
    const ClusterModel c = network(Topology::leaf_spine, 16, 2.0);
    const double nic = c.nic_bandwidth * c.gpu.efficiency.collective_network;
    std::vector<std::pair<std::int64_t, std::int64_t>> inside, across;
    for (std::int64_t r = 0; r < 32; ++r) inside.push_back({r, r + 32});  // nodes 0-3 -> 4-7 (leaf 0)
    for (std::int64_t r = 0; r < 64; ++r) across.push_back({r, r + 64});  // leaf 0 -> leaf 1
    const double t_in = p2p(c, inside, B), t_across = p2p(c, across, B);
    std::printf("leaf-spine, oversubscription 2: inside a leaf %.6f s, across leaves %.6f s (expected %.6f and %.6f)\n",
                t_in, t_across, B / nic + c.inter_latency, 2 * B / nic + c.inter_latency);
    CHECK(t_in == Approx(B / nic + c.inter_latency).epsilon(0.01));
    CHECK(t_across == Approx(2 * B / nic + c.inter_latency).epsilon(0.01));
  }
  SECTION("rail-optimized: the same rail needs no spine") {
    const ClusterModel c = network(Topology::rail_optimized, 4, 4.0);
    const double nic = c.nic_bandwidth * c.gpu.efficiency.collective_network;
    std::vector<std::pair<std::int64_t, std::int64_t>> rail;
    for (std::int64_t g = 0; g < 8; ++g) rail.push_back({g, 8 + g});  // GPU g of node 0 -> GPU g of node 1
    const double t = p2p(c, rail, B);
    std::printf("rail-optimized, oversubscription 4, same rail: %.6f s (expected %.6f)\n", t, B / nic + c.inter_latency);
    CHECK(t == Approx(B / nic + c.inter_latency).epsilon(0.01));
  }
}

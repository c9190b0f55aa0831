// The platform: routes inside a node use the GPU's own NVSwitch port, routes across
// nodes the GPU's NIC; a SimGrid platform file can replace the built platform.
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
  const auto file = (std::filesystem::temp_directory_path() / "clustersim-test-platform.xml").string();
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
  const json built = sim::simulate(s);
  const json loaded = sim::simulate(s, o);
  const double grad_bytes = loaded["stages"][0]["params_per_gpu"].get<double>() * 4;
  const double expected = grad_bytes / 1e9 + 2 * 10e-6;
  const double got = loaded["breakdown"]["dp_comm_exposed_s"].get<double>();
  std::printf("all-reduce of %.0f MB on the file's 1 GB/s link: expected %.5f s, simulated %.5f s (built platform %.5f s)\n",
              grad_bytes / 1e6, expected, got, built["breakdown"]["dp_comm_exposed_s"].get<double>());
  CHECK(got == Approx(expected).epsilon(0.01));
  CHECK(loaded["simulator"]["platform"]["file"] == file);
  // A file without enough GPUs is an input error naming the missing host.
  Scenario bigger = s;
  bigger.cluster.gpus_per_node = 4;
  bigger.plan.dp = 4;
  bigger.training.global_batch = 16;
  CHECK_THROWS_AS(sim::simulate(bigger, o), InputError);
  std::filesystem::remove(file);
}

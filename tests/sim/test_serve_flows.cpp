// Disaggregated serving's KV-cache transfers as SimGrid flows (sim/serve): one transfer
// takes the closed form (latency + bytes / bandwidth) of its route, two started together
// through one NIC take twice as long (contention emerges from the shared link), the same
// inputs give the same bytes, and several disaggregated runs work in one process (each
// in its own child).
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "scenarios/json_reader.hpp"
#include "sim/serve.hpp"
#include "strategies/serving_batch.hpp"

using namespace clustersim;
namespace fs = std::filesystem;

namespace {
// Prefill instances on node 0, decode replicas on node 1, one NIC per node: every KV
// transfer crosses the network through the two nodes' only NICs.
nlohmann::json disagg_doc(int instances, const std::string& trace) {
  nlohmann::json doc = nlohmann::json::parse(R"({
    "name": "kv-flows",
    "model": {"family": "llama", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
              "vocab": 128256, "seq_len": 8192, "tie_embeddings": false},
    "cluster": {"gpu": "h100-sxm5-80gb", "nodes": 2,
                "inter_node": {"nics_per_node": 1, "nic_bandwidth": "400Gbps", "latency": "5us"}},
    "serving": {"engine": {"launch": "cuda-graphs"}, "tp": 1, "scheduler": {"policy": "vllm"},
                "router": "round-robin"},
    "workload": {"arrival": "trace"}
  })");
  doc["cluster"]["gpus_per_node"] = instances;  // the prefill instances fill node 0, the decode replicas node 1
  doc["serving"]["replicas"] = instances;
  doc["serving"]["disaggregation"] = {{"prefill_replicas", instances}, {"tp", 1}};
  doc["workload"]["trace"] = trace;
  return doc;
}

fs::path trace_file(const std::string& name, int requests) {
  const fs::path p = test::temp_dir() / ("clustersim-kv-flows-" + name + ".csv");
  std::ofstream out(p);
  out << "arrival_time,prompt_tokens,output_tokens\n";
  for (int i = 0; i < requests; ++i) out << "0,4096,4\n";
  return p;
}

sim::ServeResult run(int instances, int requests, const std::string& name) {
  Diagnostics diag("<test>");
  const ServingScenario s = parse_serving_scenario(disagg_doc(instances, trace_file(name, requests).string()), diag);
  INFO((diag.ok() ? std::string() : diag.problems()[0].to_string()));
  REQUIRE(diag.ok());
  const ClusterModel c = resolve_cluster(s.cluster, diag);
  REQUIRE(diag.ok());
  return sim::simulate_serving(s, c);
}

// What one prompt's KV cache is and what moving it alone costs: the route's latency plus
// the bytes over its narrowest link, the NIC at NCCL's achievable share (sim/platform).
struct Route {
  double bytes = 0, latency = 0, bandwidth = 0;
  double time(int sharing) const { return latency + sharing * bytes / bandwidth; }
};
Route closed_form() {
  Diagnostics diag("<test>");
  const ServingScenario s = parse_serving_scenario(disagg_doc(1, "t.csv"), diag);
  const ClusterModel c = resolve_cluster(s.cluster, diag);
  REQUIRE(diag.ok());
  const BatchTimeModel m(s.model, c, s.engine, 1, 1);
  Route r{m.kv_bytes_of_request(4096), c.inter_latency, c.nic_bandwidth * c.gpu.efficiency.collective_network};
  REQUIRE(c.gpu.pcie_bandwidth > r.bandwidth);  // the NIC is the narrowest link
  return r;
}
}  // namespace

TEST_CASE("serve: one disaggregated KV transfer takes latency + bytes / bandwidth on the platform", "[serving]") {
  const Route route = closed_form();
  const double expected = route.time(1), bytes = route.bytes;
  const sim::ServeResult r = run(1, 1, "one");
  REQUIRE(r.records.size() == 1);
  const double simulated = r.records[0].kv_transfer;
  std::printf("one transfer of %.0f bytes: expected %.6f ms, simulated %.6f ms\n", bytes, expected * 1e3,
              simulated * 1e3);
  CHECK(simulated == Approx(expected).epsilon(1e-6));
  CHECK(r.records[0].tokens == 4);
  CHECK(r.records[0].prefill_replica == 0);
  CHECK(r.records[0].replica == 1);
}

TEST_CASE("serve: two KV transfers through one NIC take twice as long as one", "[serving]") {
  const Route route = closed_form();
  const double alone = route.time(1);
  // Two prefill instances on node 0 finish together and send to two decode replicas on
  // node 1: both flows cross node 0's NIC (and node 1's) at once.
  const sim::ServeResult r = run(2, 2, "two");
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].prefill_replica != r.records[1].prefill_replica);
  CHECK(r.records[0].first_token == r.records[1].first_token);
  const double shared = route.time(2);
  for (const auto& rec : r.records) {
    std::printf("request %lld: expected %.6f ms (each flow gets half the NIC), simulated %.6f ms, alone %.6f ms\n",
                (long long)rec.id, shared * 1e3, rec.kv_transfer * 1e3, alone * 1e3);
    CHECK(rec.kv_transfer == Approx(shared).epsilon(1e-6));
    CHECK(rec.kv_transfer / alone == Approx(2.0).epsilon(0.01));
  }
}

TEST_CASE("serve: disaggregated runs are deterministic, and several run in one process", "[serving]") {
  const fs::path trace = test::temp_dir() / "clustersim-kv-flows-many.csv";
  {
    std::ofstream out(trace);
    out << "arrival_time,prompt_tokens,output_tokens\n";
    for (int i = 0; i < 60; ++i) out << 0.05 * i << ',' << 256 + (i * 97) % 3000 << ',' << 8 + (i * 13) % 64 << '\n';
  }
  Diagnostics diag("<test>");
  const ServingScenario s = parse_serving_scenario(disagg_doc(2, trace.string()), diag);
  const ClusterModel c = resolve_cluster(s.cluster, diag);
  REQUIRE(diag.ok());
  const sim::ServeResult a = sim::simulate_serving(s, c), b = sim::simulate_serving(s, c);
  CHECK(sim::requests_csv(a) == sim::requests_csv(b));
  CHECK(sim::to_json(a.summary).dump() == sim::to_json(b.summary).dump());
  CHECK(a.summary.requests == 60);
  std::int64_t tokens = 0;
  for (const auto& rec : a.records) {
    tokens += rec.tokens;
    CHECK(rec.tokens == rec.output);
    if (rec.output > 1) CHECK(rec.kv_transfer > 0);
  }
  std::printf("60 requests, mean KV transfer %.3f ms, TTFT p50 %.1f ms\n", a.summary.kv_transfer_mean * 1e3,
              a.summary.ttft.p50 * 1e3);
}

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
#include <fmt/format.h>
#include <fstream>

#include "scenarios/json_reader.hpp"
#include "sim/serve.hpp"
#include "sim/simulate.hpp"
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

// Pipeline-parallel replicas whose stages sit on different nodes: the stage-to-stage
// activation sends run as flows (the training replay's point-to-point collective).
namespace {
nlohmann::json pp_doc(int gpus_per_node, int nics_per_node, int tp, const std::string& trace) {
  nlohmann::json doc = nlohmann::json::parse(R"({
    "name": "pp-flows",
    "model": {"family": "llama", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
              "vocab": 128256, "seq_len": 8192, "tie_embeddings": false},
    "cluster": {"gpu": "h100-sxm5-80gb", "nodes": 2,
                "inter_node": {"nic_bandwidth": "400Gbps", "latency": "5us"}},
    "serving": {"engine": {"launch": "cuda-graphs"}, "replicas": 1, "pp": 2, "scheduler": {"policy": "vllm"},
                "router": "round-robin"},
    "workload": {"arrival": "trace"}
  })");
  doc["cluster"]["gpus_per_node"] = gpus_per_node;
  doc["cluster"]["inter_node"]["nics_per_node"] = nics_per_node;
  doc["serving"]["tp"] = tp;
  doc["workload"]["trace"] = trace;
  return doc;
}

fs::path lines_file(const std::string& name, const std::string& lines) {
  const fs::path p = test::temp_dir() / ("clustersim-pp-flows-" + name + ".csv");
  std::ofstream out(p);
  out << "arrival_time,prompt_tokens,output_tokens\n" << lines;
  return p;
}

struct Parsed {
  ServingScenario s;
  ClusterModel c;
};
Parsed parse(const nlohmann::json& doc) {
  Diagnostics diag("<test>");
  Parsed p{parse_serving_scenario(doc, diag), {}};
  INFO((diag.ok() ? std::string() : diag.problems()[0].to_string()));
  REQUIRE(diag.ok());
  p.c = resolve_cluster(p.s.cluster, diag);
  REQUIRE(diag.ok());
  return p;
}
}  // namespace

TEST_CASE("serve: a pipeline replica across two nodes alone takes the closed form with its sends as flows",
          "[serving]") {
  // One GPU per node (tp 1), and two GPUs per node with a NIC each (tp 2): every
  // stage-to-stage send leaves node 0 through the sending GPU's own NIC. A prompt of
  // 4096 tokens with one output token: its TTFT is exactly one prefill iteration.
  for (const int tp : {1, 2}) {
    const Parsed p = parse(pp_doc(tp, tp, tp, lines_file(fmt::format("alone{}", tp), "0,4096,1\n").string()));
    const BatchTimeModel m(p.s.model, p.c, p.s.engine, tp, 2);
    const BatchTime closed = m.prefill(1, 4096);
    REQUIRE(closed.pp_send > 0);
    sim::ServeOptions opt;
    opt.keep_iterations = true;
    const sim::ServeResult r = sim::simulate_serving(p.s, p.c, opt);
    REQUIRE(r.records.size() == 1);
    REQUIRE(r.iterations.size() == 1);
    std::printf("tp %d pp 2 across two nodes, prefill of 4096 tokens: closed form %.6f ms (sends %.6f ms), "
                "with the sends as flows %.6f ms (iteration %.6f ms)\n",
                tp, closed.total * 1e3, closed.pp_send * 1e3, r.records[0].ttft() * 1e3, r.iterations[0].duration * 1e3);
    CHECK(r.records[0].ttft() == Approx(closed.total).epsilon(1e-9));
    CHECK(r.iterations[0].duration == Approx(closed.total).epsilon(1e-9));
  }
}

TEST_CASE("serve: a pipeline send sharing a NIC with a KV transfer is slowed by it", "[serving]") {
  // Disaggregated, one GPU and one NIC per node: the prefill instance is tp 1 x pp 2 on
  // nodes 0 and 1, the decode replica on node 2. Request 0 (4096 tokens) prefills first;
  // its KV cache then leaves node 0 through the NIC while request 1 (16 tokens, arrived
  // during request 0's prefill) prefills: request 1's activation send from stage 0 (node
  // 0) to stage 1 (node 1) crosses the same NIC during the transfer and gets half its
  // bandwidth, so request 1's iteration takes its closed form plus its bytes over the NIC
  // once more. Without request 0's transfer (one output token: nothing to move) it takes
  // the closed form.
  const auto doc = [](const std::string& name, int first_output) {
    nlohmann::json d = pp_doc(1, 1, 1, lines_file(name, fmt::format("0,4096,{}\n0.001,16,1\n", first_output)).string());
    d["cluster"]["nodes"] = 3;
    d["serving"]["pp"] = 1;
    d["serving"]["disaggregation"] = {{"prefill_replicas", 1}, {"tp", 1}, {"pp", 2}};
    return d;
  };
  const Parsed shared = parse(doc("nic-shared", 8)), alone = parse(doc("nic-alone", 1));
  const BatchTimeModel m(shared.s.model, shared.c, shared.s.engine, 1, 2);
  const BatchTime closed = m.prefill(1, 16);
  const double nic = shared.c.nic_bandwidth * shared.c.gpu.efficiency.collective_network;
  REQUIRE(shared.c.gpu.pcie_bandwidth > nic);  // the NIC is the narrowest link
  const double expected_shared = closed.total + closed.pp_send_bytes / nic;
  sim::ServeOptions opt;
  opt.keep_iterations = true;
  const sim::ServeResult a = sim::simulate_serving(alone.s, alone.c, opt);
  const sim::ServeResult b = sim::simulate_serving(shared.s, shared.c, opt);
  REQUIRE(a.iterations.size() >= 2);
  REQUIRE(b.iterations.size() >= 2);
  // The prefill instance's second iteration is request 1's prefill.
  const auto second = [](const sim::ServeResult& r) {
    int seen = 0;
    for (const auto& it : r.iterations)
      if (it.replica == 0 && ++seen == 2) return it;
    FAIL("no second prefill iteration");
    return sim::ServeIteration{};
  };
  const sim::ServeIteration ia = second(a), ib = second(b);
  REQUIRE(ia.prefill_tokens == 16);
  REQUIRE(ib.prefill_tokens == 16);
  // The transfer outlasts the send (the premise of the expectation).
  REQUIRE(b.records[0].kv_transfer > closed.total);
  std::printf("16-token prefill on tp 1 x pp 2 across nodes: closed form %.6f ms, alone %.6f ms; beside a KV transfer "
              "through the same NIC: expected %.6f ms, simulated %.6f ms (transfer %.3f ms)\n",
              closed.total * 1e3, ia.duration * 1e3, expected_shared * 1e3, ib.duration * 1e3,
              b.records[0].kv_transfer * 1e3);
  CHECK(ia.duration == Approx(closed.total).epsilon(1e-9));
  CHECK(ib.duration == Approx(expected_shared).epsilon(1e-6));
  CHECK(ib.duration > ia.duration);
}

TEST_CASE("serve: pipeline replicas with flows are deterministic and lose no token", "[serving]") {
  std::string lines;
  for (int i = 0; i < 40; ++i) lines += fmt::format("{},{},{}\n", 0.02 * i, 128 + (i * 97) % 2000, 4 + (i * 13) % 40);
  nlohmann::json doc = pp_doc(2, 1, 2, lines_file("many", lines).string());
  doc["cluster"]["nodes"] = 4;
  doc["serving"]["replicas"] = 2;
  const Parsed p = parse(doc);
  const sim::ServeResult a = sim::simulate_serving(p.s, p.c), b = sim::simulate_serving(p.s, p.c);
  CHECK(sim::requests_csv(a) == sim::requests_csv(b));
  CHECK(sim::to_json(a.summary).dump() == sim::to_json(b.summary).dump());
  for (const auto& rec : a.records) CHECK(rec.tokens == rec.output);
  std::printf("40 requests on 2 replicas of tp 2 x pp 2 (each across two nodes): TTFT p50 %.2f ms, E2E p50 %.1f ms\n",
              a.summary.ttft.p50 * 1e3, a.summary.e2e.p50 * 1e3);
}

TEST_CASE("serve: a tp all-reduce inside one NVSwitch node takes its closed form as flows, so it stays closed",
          "[serving]") {
  // The serving batch model's row-parallel all-reduce (tokens x hidden x 2 B over the tp
  // group, costmodel/collectives) against the same all-reduce run as flows by the training
  // replay's collectives on the platform of the same 8-GPU NVSwitch node: what keeps the
  // tensor-parallel traffic a closed form (docs/serving.md, "Pipeline and tensor-parallel traffic as flows").
  nlohmann::json doc = pp_doc(8, 8, 8, "t.csv");
  doc["cluster"]["nodes"] = 1;
  doc["serving"]["pp"] = 1;
  const Parsed p = parse(doc);
  for (const std::int64_t tp : {2, 4, 8})
    for (const std::int64_t tokens : {1, 64, 2048}) {
      const double bytes = double(tokens) * 4096 * 2;
      const double closed = collective_time(p.c, Collective::all_reduce, bytes, Group{tp, tp, 1}, 1.0);
      std::vector<std::int64_t> group;
      for (std::int64_t k = 0; k < tp; ++k) group.push_back(k);
      const double flows = sim::time_collectives(p.c, {{"auto", Collective::all_reduce, bytes, {group}}}).at(0);
      std::printf("tp %lld all-reduce of %lld tokens (%.0f B): closed form %.3f us, flows %.3f us\n", (long long)tp,
                  (long long)tokens, bytes, closed * 1e6, flows * 1e6);
      CHECK(flows == Approx(closed).epsilon(0.01));
    }
}

TEST_CASE("serve: a KV cache moves from the GPUs that hold each layer's heads to those that will", "[serving]") {
  // One NIC per GPU; a 4096-token prompt whose cache is B bytes. Alone through one NIC it
  // takes latency + B / bandwidth.
  const Route route = closed_form();
  const auto run_layout = [&](const std::string& name, int gpus_per_node, int nodes, int ptp, int ppp, int dtp,
                              int dpp) {
    nlohmann::json d = pp_doc(gpus_per_node, gpus_per_node, dtp, lines_file(name, "0,4096,4\n").string());
    d["cluster"]["nodes"] = nodes;
    d["serving"]["pp"] = dpp;
    d["serving"]["disaggregation"] = {{"prefill_replicas", 1}, {"tp", ptp}, {"pp", ppp}};
    const Parsed p = parse(d);
    const sim::ServeResult r = sim::simulate_serving(p.s, p.c);
    REQUIRE(r.records.size() == 1);
    CHECK(r.records[0].tokens == 4);
    return r.records[0].kv_transfer;
  };
  // pp 2 -> pp 2, a stage per node: each stage's half of the layers crosses its own pair
  // of NICs at once, half the bytes each.
  const double staged = run_layout("kv-pp", 1, 4, 1, 2, 1, 2), staged_expected = route.latency + route.bytes / 2 / route.bandwidth;
  // tp 2 on node 0 -> tp 1 on node 1: both halves of the heads go to the one decode GPU, so
  // they share its NIC: the whole cache's time.
  const double merged = run_layout("kv-tp", 2, 2, 2, 1, 1, 1), merged_expected = route.time(1);
  std::printf("KV cache of %.0f B: pp 2 -> pp 2 across 4 nodes expected %.6f ms, simulated %.6f ms; tp 2 -> tp 1 "
              "expected %.6f ms, simulated %.6f ms\n",
              route.bytes, staged_expected * 1e3, staged * 1e3, merged_expected * 1e3, merged * 1e3);
  CHECK(staged == Approx(staged_expected).epsilon(1e-6));
  CHECK(merged == Approx(merged_expected).epsilon(1e-6));
}

TEST_CASE("serve: a tp group that straddles two nodes runs its collectives as flows through the NICs", "[serving]") {
  // Three GPUs per node sharing one NIC (with a NIC per GPU the closed form would give the
  // lone rank per node all three NICs, where NCCL's ring, and the replay's, runs one channel
  // per local rank), three tp 2 replicas in order: replica 0 on GPUs 0-1
  // (node 0), replica 1 on GPUs 2-3 (nodes 0 and 1). Two prompts of 4096 tokens at once,
  // one to each replica (round robin), one output token: each TTFT is one iteration.
  // Replica 0 takes the closed form; replica 1's tp collectives cross the network, so it
  // takes the closed form with each collective priced over a group of one GPU per node.
  nlohmann::json d = pp_doc(3, 1, 2, lines_file("tp-straddle", "0,4096,1\n0,4096,1\n").string());
  d["serving"]["pp"] = 1;
  d["serving"]["replicas"] = 3;
  const Parsed p = parse(d);
  const BatchTimeModel m(p.s.model, p.c, p.s.engine, 2, 1);
  const BatchTime closed = m.prefill(1, 4096);
  BatchShape shape;
  shape.prefills.push_back({4096, 0});
  shape.sampled = 1;
  double across = 0;
  for (const TpCollective& c : m.tp_collectives(shape))
    across += (c.place == TpCollective::Place::every_layer ? double(p.s.model.layers) : 1.0) *
              collective_time(p.c, c.kind, c.bytes, Group{2, 1, 1}, 1.0);
  REQUIRE(closed.tp_comm > 0);
  const double expected = m.finish_with_gpu(closed, closed.gpu - closed.tp_comm + across);
  const sim::ServeResult r = sim::simulate_serving(p.s, p.c);
  REQUIRE(r.records.size() == 2);
  REQUIRE(r.records[1].replica == 1);
  std::printf("tp 2 prefill of 4096 tokens: inside a node closed form %.6f ms, simulated %.6f ms; straddling two nodes "
              "expected %.6f ms (tp collectives %.3f ms -> %.3f ms), simulated %.6f ms\n",
              closed.total * 1e3, r.records[0].ttft() * 1e3, expected * 1e3, closed.tp_comm * 1e3, across * 1e3,
              r.records[1].ttft() * 1e3);
  CHECK(r.records[0].ttft() == Approx(closed.total).epsilon(1e-12));
  CHECK(r.records[1].ttft() == Approx(expected).epsilon(0.01));
  CHECK(r.records[1].ttft() > r.records[0].ttft());
}

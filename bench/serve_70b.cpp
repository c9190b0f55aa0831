// The serving simulator's speed goal (issue 15): a one-hour trace at 50 requests/s on
// 8 replicas of a 70B model (180,000 requests) in at most 30 s on one core. Not run by
// ctest: `build/bench/bench-serve [policy]` prints the wall time and the key figures.
// `bench-serve disagg`: the same load on 4 prefill + 4 decode instances (tp 8 each, one
// node each), every KV cache crossing the network as SimGrid flows (sim/serve.hpp).
// `bench-serve pp`: 4 replicas of tp 8 x pp 2, each stage a node of its own, so every
// iteration's activation send crosses the network as 8 flows (one per tp rank).
#include <chrono>
#include <cstdio>
#include <string>

#include "scenarios/serving.hpp"
#include "sim/serve.hpp"

using namespace clustersim;

int main(int argc, char** argv) {
  const std::string policy = argc > 1 ? argv[1] : "sarathi";
  auto doc = nlohmann::json::parse(R"({
    "name": "bench-llama2-70b-8x-tp8",
    "model": {"family": "llama", "hidden": 8192, "layers": 80, "heads": 64, "kv_heads": 8, "ffn_hidden": 28672,
              "vocab": 32000, "seq_len": 4096, "tie_embeddings": false},
    "cluster": {"gpu": "h100-sxm5-80gb", "nodes": 8, "gpus_per_node": 8,
                "inter_node": {"nics_per_node": 8, "nic_bandwidth": "400Gbps", "latency": "5us"}},
    "serving": {"engine": {"launch": "cuda-graphs"}, "replicas": 8, "tp": 8,
                "scheduler": {"policy": "sarathi", "max_batch_size": 256, "max_batched_tokens": 2048},
                "router": "least-outstanding-tokens"},
    "workload": {"arrival": "poisson", "rate": 50, "duration": "3600s", "seed": 1,
                 "prompt": {"dist": "uniform", "min": 64, "max": 2048},
                 "output": {"dist": "uniform", "min": 16, "max": 512}},
    "slo": {"ttft": "1s", "tpot": "100ms"}
  })");
  if (policy == "pp") {
    doc["serving"]["replicas"] = 4;
    doc["serving"]["pp"] = 2;
  } else if (policy == "disagg") {
    doc["serving"]["replicas"] = 4;
    doc["serving"]["disaggregation"] = {{"prefill_replicas", 4}, {"tp", 8}};
  } else {
    doc["serving"]["scheduler"]["policy"] = policy;
    if (policy != "sarathi") doc["serving"]["scheduler"]["max_batched_tokens"] = 8192;
  }
  Diagnostics diag("<bench>");
  const ServingScenario s = parse_serving_scenario(doc, diag);
  diag.throw_if_errors();
  const ClusterModel c = resolve_cluster(s.cluster, diag);
  diag.throw_if_errors();
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = sim::simulate_serving(s, c);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& m = r.summary;
  std::printf("%s: %lld requests, %lld iterations in %.2f s wall (goal 30 s); TTFT p50 %.0f ms p99 %.0f ms, "
              "TPOT p50 %.1f ms, %.1f req/s, %lld preemptions, KV transfer mean %.2f ms\n",
              policy.c_str(), (long long)m.requests, (long long)m.iterations, wall, m.ttft.p50 * 1e3, m.ttft.p99 * 1e3,
              m.tpot.p50 * 1e3, m.throughput_rps, (long long)m.preemptions, m.kv_transfer_mean * 1e3);
  return 0;
}

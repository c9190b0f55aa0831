// Every kind of manual plan replays to completion (no deadlock between the actors'
// barriers, sends and buckets) and lands near the estimator: schedules, tensor and
// sequence parallelism, expert parallelism, ZeRO 1/2/3, overlap on and off. The two
// differ by design where the replay sees what the estimator approximates (pipeline
// tails overlapping, the last gradient bucket), hence 15% here; the contention-free
// Megatron rows are held to 3% in test_megatron.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

TEST_CASE("every kind of manual plan replays and lands near the estimator", "[sim][plans]") {
  const json base = parse_json_text(default_scenario_text(), "<test>");
  const json moe = {{"family", "moe"}, {"hidden", 1024}, {"layers", 4}, {"heads", 16}, {"seq_len", 1024},
                    {"vocab", 32000}, {"experts", 8}, {"top_k", 2}};
  json gpt26 = base["model"];
  gpt26["layers"] = 26;  // (26 + 2) / (2 x 2): 6, 7, 7, 6 layers per virtual stage
  struct Case {
    const char* name;
    json model, plan;
  };
  const std::vector<Case> cases{
      {"gpt tp2 sp zero1 overlap (default)", base["model"], base["plan"]},
      {"gpt gpipe pp4 tp2", base["model"],
       {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"schedule", "gpipe"}, {"overlap_grad_reduce", false}}},
      {"gpt 1f1b pp2 tp4 zero2", base["model"], {{"dp", 2}, {"tp", 4}, {"pp", 2}, {"zero", 2}}},
      {"gpt zero3 dp16 (prefetched gathers)", base["model"], {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 3}}},
      {"gpt zero3 dp8 tp2 no overlap", base["model"],
       {{"dp", 8}, {"tp", 2}, {"pp", 1}, {"zero", 3}, {"overlap_grad_reduce", false}}},
      {"gpt 1f1b pp4 listed 5-7-7-5", base["model"],
       {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"layers_per_stage", {5, 7, 7, 5}}, {"overlap_grad_reduce", false}}},
      {"gpt 26 layers interleaved pp2 v2 lighten-ends", gpt26,
       {{"dp", 8}, {"tp", 1}, {"pp", 2}, {"schedule", "interleaved"}, {"virtual_stages", 2}, {"layers_per_stage", "lighten-ends"}}},
      {"gpt zb-h1 pp4", base["model"], {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"schedule", "zb-h1"}}},
      {"gpt interleaved pp4 v2 one group of 8 micro-batches", base["model"],
       {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"schedule", "interleaved"}, {"virtual_stages", 2}, {"microbatch_group_size", 8},
        {"overlap_grad_reduce", false}}},
      {"gpt interleaved pp4 v2", base["model"],
       {{"dp", 4}, {"tp", 1}, {"pp", 4}, {"schedule", "interleaved"}, {"virtual_stages", 2}}},
      {"moe ep4 tp2 zero1 overlap", moe, {{"dp", 8}, {"tp", 2}, {"pp", 1}, {"ep", 4}, {"zero", 1}}},
      {"gpt dualpipe pp4", base["model"], {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"schedule", "dualpipe"}}},
      {"moe dualpipe pp2 ep2 (pairs overlap the all-to-all)", moe,
       {{"dp", 4}, {"tp", 2}, {"pp", 2}, {"ep", 2}, {"schedule", "dualpipe"}}},
      {"moe gpipe pp2 ep2", moe,
       {{"dp", 4}, {"tp", 2}, {"pp", 2}, {"ep", 2}, {"schedule", "gpipe"}, {"overlap_grad_reduce", false}}},
  };
  for (const auto& c : cases) {
    json doc = base;
    doc["model"] = c.model;
    doc["plan"] = c.plan;
    if (c.model["family"] == "moe") doc["training"]["micro_batch"] = 2;
    doc["training"]["global_batch"] = 64;
    Diagnostics diag("<test>");
    const Scenario s = parse_scenario(doc, diag);
    INFO(c.name);
    REQUIRE(diag.ok());
    const Prediction e = make_estimator(s).estimate(s.plan);
    const json r = sim::to_json(sim::simulate(s));
    const double t = r["iteration_time_s"].get<double>();
    std::printf("%-36s estimator %.5f s, simulated %.5f s (%+.1f%%)\n", c.name, e.iteration_time, t,
                100 * (t - e.iteration_time) / e.iteration_time);
    // DualPipe with expert parallelism: the estimator times a pair as compute plus the
    // communication beyond it, slowed by the GPU's measured overlap interference; the
    // replay overlaps segment by segment and has no interference (sim/README.md), so it
    // comes out faster (-17% here, 2 ranks of 4 layers: few pairs, much all-to-all).
    const double tolerance = c.plan.value("schedule", "1f1b") == "dualpipe" && c.plan.value("ep", 1) > 1 ? 0.20 : 0.15;
    CHECK(std::fabs(t - e.iteration_time) <= tolerance * e.iteration_time);
    // Uneven stages: each stage's memory from its own layers, the same rule in both. With
    // interleaving the estimator's rule counts in-flight chunk forwards at 1/v of the
    // stage's activations each, which uneven chunks (6 + embedding and 7 layers on stage
    // 0 here) break: the replay counts each chunk's own, 1.5% less here.
    if (c.plan.contains("layers_per_stage")) {
      const double sim_memory = r["memory_per_gpu_bytes"].get<double>();
      std::printf("  memory per GPU: estimator %.0f B, simulated %.0f B\n", e.memory_per_gpu, sim_memory);
      if (c.plan.value("schedule", "1f1b") == "interleaved") CHECK(sim_memory == Approx(e.memory_per_gpu).epsilon(0.03));
      else CHECK(sim_memory == Approx(e.memory_per_gpu).epsilon(1e-9));
    }
  }
}

// Activation offload in the replay: each offloaded layer's copy runs on the GPU's copy
// engine beside the next layer's compute (D2H in forward, the H2D prefetch in backward),
// and the compute waits for it where the copy is longer. The replay lands on the
// estimator's closed form (the same rule, rules.hpp activation_offload) and keeps the same
// activations alive.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

TEST_CASE("activation offload: the replay's waits for the copies agree with the estimator", "[sim][offload]") {
  struct Case {
    const char* name;
    std::int64_t hidden, offload;
  };
  // hidden 2048: a layer's copy (34 s b h bytes at 55 GB/s) far outlasts its compute;
  // hidden 8192: the compute (24 s b h^2 FLOP) nearly hides it.
  for (const Case c : {Case{"gpt h2048, 3 of 4 layers per stage", 2048, 3}, Case{"gpt h8192, 2 of 4 layers per stage", 8192, 2},
                       Case{"gpt h2048, no offload", 2048, 0}}) {
    INFO(c.name);
    json doc = parse_json_text(default_scenario_text(), "<test>");
    doc["model"] = {{"family", "gpt"}, {"hidden", c.hidden}, {"layers", 8}, {"heads", 32}, {"seq_len", 2048}, {"vocab", 51200}};
    doc["training"] = {{"global_batch", 8}, {"micro_batch", 1}, {"precision", "mixed-bf16"}, {"recompute", "selective"}};
    if (c.offload > 0) doc["training"]["activation_offload_layers"] = c.offload;
    doc["cluster"] = {{"gpu", "h100-sxm5-80gb"}, {"nodes", 1}, {"gpus_per_node", 2}, {"intra_node", {{"fabric", "nvswitch"}}}};
    doc["plan"] = {{"dp", 1}, {"tp", 1}, {"pp", 2}, {"schedule", "1f1b"}};
    Diagnostics diag("<test>");
    const Scenario s = parse_scenario(doc, diag);
    REQUIRE(diag.ok());
    const Prediction e = make_estimator(s).estimate(s.plan);
    const json r = sim::to_json(sim::simulate(s));
    const double t = r["iteration_time_s"].get<double>();
    const double off = r["breakdown"]["offload_exposed_s"].get<double>();
    const double mem = r["memory_per_gpu_bytes"].get<double>();
    std::printf("%-40s iteration: estimator %.5f s, simulated %.5f s (%+.2f%%); offload exposed: estimator %.5f s, "
                "simulated %.5f s; memory %.3f / %.3f GB\n",
                c.name, e.iteration_time, t, 100 * (t - e.iteration_time) / e.iteration_time, e.breakdown.offload_exposed,
                off, e.memory_per_gpu / 1e9, mem / 1e9);
    CHECK(std::fabs(t - e.iteration_time) <= 0.02 * e.iteration_time);
    CHECK(off == Approx(e.breakdown.offload_exposed).epsilon(0.02).margin(1e-6));
    CHECK(mem == Approx(e.memory_per_gpu).epsilon(1e-9));
    if (c.offload == 0) CHECK(off == 0);
  }
}

// Tensor-parallel communication overlap (training.framework.tp_comm_overlap) in the replay:
// an overlapped collective runs on the tp stream for the time the rule leaves exposed
// (op_timing.hpp overlap_tp_comm, the estimator's numbers), its GEMM with the chunked and
// slowed time. The replay's tensor-parallel time and its step land on the estimator's,
// with the knob and without it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

TEST_CASE("tp overlap: the replay's exposed tensor-parallel time is the estimator's", "[sim][tp_overlap]") {
  for (const bool overlap : {false, true}) {
    json doc = parse_json_text(default_scenario_text(), "<test>");
    doc["model"] = {{"family", "llama"}, {"hidden", 8192},  {"layers", 2},     {"heads", 64},          {"kv_heads", 8},
                    {"seq_len", 8192},   {"vocab", 128256}, {"ffn_hidden", 28672}, {"attention", "flash"}};
    doc["training"] = {{"global_batch", 8},
                       {"micro_batch", 1},
                       {"precision", "mixed-fp8"},
                       {"recompute", "none"},
                       {"framework", {{"name", "megatron"}, {"tp_comm_overlap", overlap}}}};
    doc["cluster"] = {{"gpu", "h100-sxm5-80gb"}, {"nodes", 1}, {"gpus_per_node", 8}, {"intra_node", {{"fabric", "nvswitch"}}}};
    doc["plan"] = {{"dp", 2}, {"tp", 4}, {"pp", 1}, {"zero", 1}, {"sequence_parallel", true}};
    Diagnostics diag("<test>");
    const Scenario s = parse_scenario(doc, diag);
    REQUIRE(diag.ok());
    const Prediction e = make_estimator(s).estimate(s.plan);
    const json r = sim::to_json(sim::simulate(s));
    const double t = r["iteration_time_s"].get<double>(), tp = r["breakdown"]["tp_comm_exposed_s"].get<double>();
    std::printf("tp_comm_overlap %-5s step: estimator %.5f s, simulated %.5f s (%+.1f%%); tp exposed: estimator %.5f s, "
                "simulated %.5f s\n",
                overlap ? "true" : "false", e.iteration_time, t, 100 * (t - e.iteration_time) / e.iteration_time,
                e.breakdown.tp_comm_exposed, tp);
    CHECK(std::fabs(t - e.iteration_time) <= 0.05 * e.iteration_time);
    // The replay's tp stream runs 3-4 % above the estimator's tp share with the knob and
    // without it alike (0.02917 against 0.02811 s without, 0.00877 against 0.00842 s with, on
    // 2026-11-27): the overlapped collectives add no disagreement of their own.
    CHECK(tp == Approx(e.breakdown.tp_comm_exposed).epsilon(0.05));
  }
}

// Gradient buckets all-reduced during the last micro-batch's backward: the reduction
// hides behind compute except for what is left when backward ends. Printed beside
// the estimator's overlap model.
#include <catch2/catch.hpp>
#include <cstdio>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

TEST_CASE("bucketed gradient all-reduce overlaps backward", "[sim][overlap]") {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"]["layers"] = 8;
  doc["training"]["global_batch"] = 64;
  doc["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 0}};
  json times;
  for (bool overlap : {false, true}) {
    doc["plan"]["overlap_grad_reduce"] = overlap;
    Diagnostics diag("<test>");
    const Scenario s = parse_scenario(doc, diag);
    REQUIRE(diag.ok());
    const Prediction e = make_estimator(s).estimate(s.plan);
    const json r = sim::to_json(sim::simulate(s));
    const double exposed = r["breakdown"]["dp_comm_exposed_s"].get<double>();
    std::printf("overlap %-5s: iteration %.5f s (estimator %.5f s), gradient reduction exposed %.5f s "
                "(estimator %.5f s)\n",
                overlap ? "on" : "off", r["iteration_time_s"].get<double>(), e.iteration_time, exposed,
                e.breakdown.dp_comm_exposed);
    times[overlap ? "on" : "off"] = {{"iteration", r["iteration_time_s"]}, {"exposed", exposed}};
  }
  const double off = times["off"]["exposed"].get<double>(), on = times["on"]["exposed"].get<double>();
  CHECK(off > 0);
  CHECK(on > 0);        // the last bucket cannot hide
  CHECK(on < 0.8 * off);  // most of it does
  CHECK(times["off"]["iteration"].get<double>() - times["on"]["iteration"].get<double>() ==
        Approx(off - on).epsilon(1e-6));
}

namespace {

ClusterModel two_gpus() {
  ClusterSpec spec;
  spec.gpu = "a100-sxm4-80gb";
  spec.gpus_per_node = 2;
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  return c;
}

// Two data-parallel replicas, one micro-batch: forward f, then a backward segment that
// completes one gradient bucket (its all-reduce starts on the communication stream), then
// `beside` seconds of backward compute that the all-reduce overlaps.
sim::ReplayPlan bucket_beside_compute(double f, double b, double beside, const OverlapInterference& factors) {
  sim::ReplayPlan plan;
  plan.dp = 2;
  plan.overlap_grad_reduce = true;
  plan.interference = factors;
  const double bucket = gradient_bucket_elements(plan.framework, plan.precision);
  sim::StageProgram st;
  sim::ChunkProgram chunk;
  chunk.forward.push_back({sim::Work::forward, f, {}, 0, 0, {{"layer", f}}});
  chunk.backward.push_back({sim::Work::backward, b, {}, bucket, 0, {{"layer", b}}});
  chunk.backward.push_back({sim::Work::backward, beside, {}, 0, 0, {{"embedding", beside}}});
  st.chunks.push_back(chunk);
  st.params = bucket;
  plan.stages.push_back(st);
  return plan;
}

}  // namespace

TEST_CASE("a collective beside one compute segment: the closed form with the interference factors",
          "[sim][overlap][interference]") {
  const ClusterModel c = two_gpus();
  const sim::ReplayPlan probe = bucket_beside_compute(0, 0, 0, {});
  const Bytes bytes = gradient_sync(probe.stages[0].params, 0, probe.precision, 0, 2).reduce_bytes;
  const double T = sim::time_collectives(c, {{probe.collectives, Collective::all_reduce, bytes, {{0, 1}}}}).at(0);
  const OverlapInterference measured{1.4, 1.5, "test factors"};
  const double f = 2e-3, b = 1e-3;
  // The collective ends first (3T of compute), the compute ends first (T/2), nothing
  // overlaps it (0), and free overlap (factors 1).
  for (double share : {3.0, 0.5, 0.0})
    for (const OverlapInterference& factors : {measured, OverlapInterference{}}) {
      const double beside = share * T;
      const auto r = sim::simulate_plan(bucket_beside_compute(f, b, beside, factors), c);
      const double simulated = r["iteration_time_s"].get<double>();
      const double expected = f + b + beside + overlap_exposed(beside, T, factors);
      std::printf("all-reduce %.6f s beside %.6f s of compute, factors %.1f/%.1f: expected %.6f s, simulated %.6f s\n",
                  T, beside, factors.compute, factors.comm, expected, simulated);
      CHECK(simulated == Approx(expected).epsilon(1e-6));
      // Same inputs, same result.
      CHECK(sim::simulate_plan(bucket_beside_compute(f, b, beside, factors), c)["groups"] == r["groups"]);
    }
}

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

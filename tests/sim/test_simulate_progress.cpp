// simulate's progress: the forked replay reports its simulated clock to the parent
// through a pipe while it runs, and the result is the same with or without reports.
#include <catch2/catch.hpp>
#include <vector>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {
Scenario pipeline_scenario() {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"]["layers"] = 8;
  doc["training"]["global_batch"] = 64;
  doc["plan"] = {{"dp", 4}, {"tp", 2}, {"pp", 2}, {"schedule", "1f1b"}, {"zero", 1}};
  Diagnostics diag("<test>");
  Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  return s;
}

json without_wall_clock(json j) {
  for (const char* k : {"wall_time_s", "cpu_time_s", "events_per_s", "events_per_cpu_s"}) j["simulator"].erase(k);
  return j;
}
}  // namespace

TEST_CASE("the replay reports its simulated clock while it runs, and the result does not change", "[sim][progress]") {
  const Scenario s = pipeline_scenario();
  const sim::SimulationResult plain = sim::simulate(s);

  struct Report {
    double simulated, expected;
  };
  std::vector<Report> reports;
  sim::SimulateOptions o;
  o.progress = [&](double simulated_s, double expected_s) { reports.push_back({simulated_s, expected_s}); };
  o.progress_interval_s = 0;  // every 64th advance of the clock: reports however fast the machine is
  const sim::SimulationResult reported = sim::simulate(s, o);

  const double T = reported.prediction.iteration_time;
  const double estimate = reported.simulator["estimator_iteration_time_s"].get<double>();
  INFO("reports " << reports.size() << ", iteration " << T << " s simulated, estimate " << estimate << " s");
  REQUIRE(!reports.empty());
  for (std::size_t i = 0; i < reports.size(); ++i) {
    INFO("report " << i << ": " << reports[i].simulated << " s of about " << reports[i].expected << " s");
    CHECK(reports[i].simulated > 0);
    CHECK(reports[i].simulated <= T);
    CHECK(reports[i].expected == estimate);
    if (i > 0) CHECK(reports[i].simulated >= reports[i - 1].simulated);
  }
  CHECK(without_wall_clock(sim::to_json(reported)) == without_wall_clock(sim::to_json(plain)));
}

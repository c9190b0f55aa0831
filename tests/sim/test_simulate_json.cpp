// The simulator's result: the keys of the estimator's JSON (so `simulate --json` and
// `run --json` compare key by key), the provenance of the network model, determinism,
// and the Perfetto trace.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {
// The built-in default with overlap and a pipeline, small enough for a quick replay.
Scenario small_scenario() {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"]["layers"] = 4;
  doc["training"]["global_batch"] = 32;
  doc["plan"] = {{"dp", 4}, {"tp", 2}, {"pp", 2}, {"schedule", "1f1b"}, {"zero", 1}, {"sequence_parallel", true}};
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

TEST_CASE("simulate --json has every key of run --json", "[sim][json]") {
  const Scenario s = small_scenario();
  const Prediction e = make_estimator(s).estimate(s.plan);
  const json est = to_json(e);
  const json sim = sim::to_json(sim::simulate(s));
  for (const auto& [k, v] : est.items()) {
    INFO("key " << k);
    CHECK(sim.contains(k));
    if (v.is_object())
      for (const auto& [k2, v2] : v.items()) {
        INFO("key " << k << "/" << k2);
        CHECK(sim[k].contains(k2));
      }
  }
  // The breakdown adds up to the iteration time, as the estimator's does.
  double sum = 0;
  for (const auto& [k, v] : sim["breakdown"].items()) sum += v.get<double>();
  CHECK(sum == Approx(sim["iteration_time_s"].get<double>()).epsilon(1e-9));
  // Provenance: the network model as configured, SimGrid's version.
  const auto& nm = sim["simulator"]["network_model"];
  CHECK(nm["model"] == "CM02");
  CHECK(nm["latency_factor"] == 1.0);
  CHECK(nm["bandwidth_factor"] == 1.0);
  CHECK(nm["crosstraffic"] == false);
  CHECK(sim["simulator"]["simgrid_version"].get<std::string>().rfind("3.", 0) == 0);
  CHECK(sim["simulator"]["gpus"].size() == 16);
  CHECK(sim["simulator"]["busiest_links"].size() > 0);
  std::printf("small scenario: estimator %.4f s, simulated %.4f s\n", e.iteration_time,
              sim["iteration_time_s"].get<double>());
}

TEST_CASE("the same scenario simulates to the same result", "[sim][json]") {
  const Scenario s = small_scenario();
  CHECK(without_wall_clock(sim::to_json(sim::simulate(s))).dump() == without_wall_clock(sim::to_json(sim::simulate(s))).dump());
}

TEST_CASE("a trace file is a Perfetto trace with one track per GPU stream", "[sim][trace]") {
  const Scenario s = small_scenario();
  const std::string file = (clustersim::test::temp_dir() / "clustersim-test-trace.json").string();
  sim::SimulateOptions o;
  o.trace_file = file;
  const json r = sim::to_json(sim::simulate(s, o));
  const json t = read_json_file(file);
  std::filesystem::remove(file);
  std::set<std::pair<std::int64_t, int>> tracks;
  std::map<int, int> slices_per_stream;
  for (const auto& ev : t.at("traceEvents")) {
    if (ev["ph"] != "X") continue;
    tracks.insert({ev["pid"].get<std::int64_t>(), ev["tid"].get<int>()});
    ++slices_per_stream[ev["tid"].get<int>()];
    CHECK(ev["dur"].get<double>() >= 0);
  }
  // Every GPU has compute, tensor-parallel and pipeline tracks; transfers appear too.
  for (std::int64_t gpu = 0; gpu < 16; ++gpu)
    for (int stream : {0, 1, 2}) CHECK(tracks.count({gpu, stream}) == 1);
  CHECK(slices_per_stream[3] > 0);  // data-parallel reduction
  CHECK(slices_per_stream[5] > 0);  // individual transfers
  CHECK(r["simulator"]["trace_slices"].get<std::size_t>() == t["traceEvents"].size() - 16 - tracks.size());
}

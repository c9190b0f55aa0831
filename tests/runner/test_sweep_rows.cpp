// A sweep writes each point's scenario and prediction straight to text and reads the
// row's columns from that text; `simulate --db`, `run --db` and the other commands store
// the same run from its JSON trees. Both must give the same row, column for column, or
// a sweep's rows would differ from a single run's (and the two paths drift).
#include <catch2/catch.hpp>

#include "runner/provenance.hpp"
#include "runner/store.hpp"
#include "runner/sweep_engine.hpp"
#include "strategies/estimator.hpp"
#include "strategies/resolved_plan.hpp"

using namespace clustersim;

TEST_CASE("a sweep point's row from text equals the row of the same run's trees", "[runner][sweep]") {
  Diagnostics diag("<test>");
  const SweepSpec spec = parse_sweep(nlohmann::json::parse(R"({"name": "rows", "base": "default", "axes": [
      {"field": "/training/micro_batch", "values": [1, 4]},
      {"field": "/plan", "values": [{"dp": 16, "tp": 1, "pp": 1, "zero": 3}, {"dp": 2, "tp": 2, "pp": 4, "zero": 1},
                                    {"dp": 2, "tp": 4, "pp": 2, "schedule": "interleaved", "virtual_stages": 2}]}]})"),
                                     "<test>", diag);
  REQUIRE(diag.ok());
  runner::detail::Worker worker(spec);
  std::size_t compared = 0;
  for (std::size_t i = 0; i < spec.point_count(); ++i) {
    INFO("point " << i);
    const runner::detail::Outcome o = runner::detail::evaluate(spec, i, {}, worker);
    if (o.kind != runner::detail::Outcome::Kind::stored) continue;
    const SweepPoint p = sweep_point(spec, i);
    Diagnostics d("<test>");
    const Scenario s = parse_scenario(p.doc, d);
    REQUIRE(d.ok());
    // The tree path, as the sweep built it before it wrote text.
    const Estimator est = make_estimator(s);
    nlohmann::json result = to_json(est.estimate(s.plan));
    result["tool"] = runner::tool_json("analytical");
    result["tool"]["gpu_profile"] = est.cluster().gpu.name;
    result["tool"]["gpu_profile_status"] = est.cluster().gpu.status;
    results::RunRecord record = runner::make_run_record(s, to_json(s), result, "analytical");
    record.point_index = static_cast<std::int64_t>(i);
    record.axes = p.axes;
    const results::RunRow tree = results::run_row(record);
    const results::RunRow& text = *o.row;
    CHECK(text.scenario_json == tree.scenario_json);
    CHECK(text.scenario_hash == tree.scenario_hash);
    CHECK(text.scenario_hash == results::scenario_hash(to_json(s)));
    CHECK(text.result_json == tree.result_json);
    CHECK(text.result_json == result.dump());
    CHECK(text.plan_json == tree.plan_json);
    CHECK(text.scenario_name == tree.scenario_name);
    CHECK(text.model_family == tree.model_family);
    CHECK(text.gpu == tree.gpu);
    CHECK(text.gpus == tree.gpus);
    CHECK(text.hardware_name == tree.hardware_name);
    CHECK(text.hardware_status == tree.hardware_status);
    CHECK(text.hardware_provenance_json == tree.hardware_provenance_json);
    CHECK(text.axes_json == tree.axes_json);
    CHECK(text.point_index == tree.point_index);
    CHECK(text.fits == tree.fits);
    for (std::size_t k = 0; k < tree.figures.size(); ++k) {
      INFO(results::RunRow::figure_keys[k]);
      REQUIRE(tree.figures[k].has_value());
      CHECK(text.figures[k] == tree.figures[k]);  // bit for bit: the text is the shortest round-trip form
    }
    CHECK(text.tool_version == tree.tool_version);
    CHECK(text.git_revision == tree.git_revision);
    CHECK(text.simgrid_version == tree.simgrid_version);
    ++compared;
  }
  std::printf("rows compared: %zu of %zu points\n", compared, spec.point_count());
  CHECK(compared >= 4);
}

// Sweep files: grids, lists, zipped lists and ranges expand to the documents expected,
// and mistakes are reported with the sweep file's JSON path.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "scenarios/scenario.hpp"
#include "scenarios/sweep.hpp"

using clustersim::Diagnostics;
using clustersim::parse_sweep;
using clustersim::sweep_point;
using nlohmann::json;

namespace {
clustersim::SweepSpec parse_ok(const json& doc) {
  Diagnostics diag("sweep.json");
  auto spec = parse_sweep(doc, "sweep.json", diag);
  for (const auto& p : diag.problems()) INFO(p.to_string());
  REQUIRE(diag.ok());
  return spec;
}
std::vector<std::string> problems(const json& doc) {
  Diagnostics diag("sweep.json");
  (void)parse_sweep(doc, "sweep.json", diag);
  std::vector<std::string> out;
  for (const auto& p : diag.problems()) out.push_back(p.to_string());
  return out;
}
}  // namespace

TEST_CASE("a grid of a list, a range and a zipped pair expands last axis fastest", "[sweep]") {
  const auto spec = parse_ok(json::parse(R"({"name": "g", "base": "default", "axes": [
      {"field": "/plan/zero", "values": [0, 1]},
      {"field": "/training/micro_batch", "range": {"from": 1, "to": 8, "factor": 2}},
      {"zip": [{"field": "/plan/dp", "values": [8, 4]}, {"field": "/plan/tp", "values": [2, 4]}]}]})"));
  REQUIRE(spec.axes.size() == 3);
  CHECK(spec.axes[1].values[0] == std::vector<json>{1, 2, 4, 8});
  const std::size_t expected = 2 * 4 * 2;
  INFO("expected " << expected << " points, got " << spec.point_count());
  CHECK(spec.point_count() == expected);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < spec.point_count(); ++i) {
    const auto p = sweep_point(spec, i);
    // Mixed radix (2, 4, 2), last fastest.
    CHECK(p.doc["plan"]["zero"] == static_cast<int>(i / 8));
    CHECK(p.doc["training"]["micro_batch"] == (1 << ((i / 2) % 4)));
    CHECK(p.doc["plan"]["dp"] == (i % 2 == 0 ? 8 : 4));
    CHECK(p.doc["plan"]["tp"] == (i % 2 == 0 ? 2 : 4));
    CHECK(p.axes.size() == 4);
    seen.insert(p.doc.dump());
  }
  CHECK(seen.size() == expected);
  // The points are real scenarios: dp x tp stays 16 so each parses.
  Diagnostics diag("point");
  (void)clustersim::parse_scenario(sweep_point(spec, 3).doc, diag);
  CHECK(diag.ok());
}

TEST_CASE("arithmetic ranges keep integers, fractional steps give numbers", "[sweep]") {
  const auto a = parse_ok(json::parse(R"({"base": "default", "axes": [
      {"field": "/training/global_batch", "range": {"from": 128, "to": 512, "step": 128}}]})"));
  CHECK(a.axes[0].values[0] == std::vector<json>{128, 256, 384, 512});
  CHECK(a.axes[0].values[0][1].is_number_integer());
  const auto b = parse_ok(json::parse(R"({"base": "default", "axes": [
      {"field": "/model/dropout", "range": {"from": 0, "to": 0.3, "step": 0.1}}]})"));
  REQUIRE(b.axes[0].values[0].size() == 4);
  CHECK(b.axes[0].values[0][3].get<double>() == Approx(0.3));
}

TEST_CASE("units are swept as strings, and the base may be a file next to the sweep", "[sweep]") {
  namespace fs = std::filesystem;
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-sweep-base";
  fs::create_directories(dir);
  std::ofstream(dir / "base.json") << clustersim::default_scenario_text();
  std::ofstream(dir / "s.json") << R"({"base": "base.json", "axes": [
      {"field": "/cluster/intra_node/bandwidth", "values": ["150GBps", "300GBps"]}]})";
  const auto spec = clustersim::load_sweep((dir / "s.json").string());
  CHECK(spec.name == "s");
  CHECK(spec.base_file == (dir / "base.json").string());
  const auto p = sweep_point(spec, 0);
  Diagnostics diag("point");
  const auto s = clustersim::parse_scenario(p.doc, diag);
  REQUIRE(diag.ok());
  CHECK(*s.cluster.intra_node.bandwidth == Approx(150e9));
  CHECK(p.doc["name"] == "s [bandwidth=150GBps]");
}

TEST_CASE("sweep mistakes name the sweep file's JSON path", "[sweep]") {
  auto has = [](const std::vector<std::string>& ps, const std::string& text) {
    for (const auto& p : ps)
      if (p.find(text) != std::string::npos) return true;
    INFO("problems: " << ps.size());
    for (const auto& p : ps) INFO(p);
    return false;
  };
  CHECK(has(problems(json::parse(R"({"base": "default", "axes": [{"field": "/plan/tpp", "values": [1]}]})")),
            "sweep.json: /axes/0: field \"/plan/tpp\": unknown key \"tpp\"; did you mean \"tp\"?"));
  CHECK(has(problems(json::parse(R"({"base": "default", "axes": [{"field": "plan.tp", "values": [1]}]})")),
            "/axes/0/field: expected a JSON pointer"));
  CHECK(has(problems(json::parse(R"({"base": "default", "axes": [{"zip": [
            {"field": "/plan/dp", "values": [1, 2]}, {"field": "/plan/tp", "values": [1]}]}]})")),
            "/axes/0/zip/1: zipped fields need lists of one length"));
  CHECK(has(problems(json::parse(R"({"base": "default", "axes": [{"field": "/plan/tp",
            "range": {"from": 4, "to": 1, "step": 1}}]})")),
            "/axes/0/range/to: expected a value >= from"));
  CHECK(has(problems(json::parse(R"({"axes": []})")), "/base: missing"));
  CHECK(has(problems(json::parse(R"({"base": "default", "axes": [], "skip_invalid": true})")),
            "/axes: expected a non-empty list"));
  CHECK(has(problems(json::parse(R"({"base": "default", "axis": []})")), "unknown key \"axis\"; did you mean \"axes\"?"));
}

namespace {
// Every point of `spec` two ways: parse_scenario of the whole document (sweep_point) and
// sweep_scenario (the base parsed once, the edited sections again). Same canonical
// scenario, same axes, same problems with the same paths and messages.
std::size_t check_points_parse_alike(const clustersim::SweepSpec& spec) {
  std::size_t invalid = 0;
  for (std::size_t i = 0; i < spec.point_count(); ++i) {
    Diagnostics whole("sweep.json (point)"), sections("sweep.json (point)");
    const auto p = sweep_point(spec, i);
    const auto expected = clustersim::parse_scenario(p.doc, whole);
    json axes;
    const auto got = clustersim::sweep_scenario(spec, i, axes, sections);
    std::vector<std::string> want, have;
    for (const auto& x : whole.problems()) want.push_back(x.to_string());
    for (const auto& x : sections.problems()) have.push_back(x.to_string());
    INFO("point " << i << ": " << p.axes.dump());
    CHECK(have == want);
    CHECK(axes == p.axes);
    if (whole.ok()) CHECK(clustersim::to_json_text(got) == clustersim::to_json_text(expected));
    else ++invalid;
  }
  return invalid;
}
}  // namespace

TEST_CASE("a point parsed section by section equals the point's whole document parsed", "[sweep]") {
  // Valid and invalid points in every edited section: a bandwidth with and without its
  // unit, a plan that does not tile the cluster, a batch that does not split, ZeRO
  // stages that change the default framework of an fp32 base, and a simulation section
  // the base does not have.
  json base = json::parse(clustersim::default_scenario_text());
  base["training"]["precision"] = "fp32";
  base.erase("simulation");
  const auto spec = parse_ok(json{{"name", "s"}, {"base", base}, {"axes", json::parse(R"([
      {"field": "/cluster/intra_node/bandwidth", "values": ["300GBps", 300]},
      {"field": "/training/micro_batch", "values": [1, 3, -2]},
      {"zip": [{"field": "/plan/dp", "values": [16, 8, 5]}, {"field": "/plan/tp", "values": [1, 2, 2]}]},
      {"field": "/plan/zero", "values": [0, 2, 3]},
      {"field": "/simulation/seed", "values": [7]}])")}});
  REQUIRE(spec.base_scenario);
  const std::size_t invalid = check_points_parse_alike(spec);
  const std::size_t valid_points = 1 * 1 * 2 * 3 * 1;  // 300GBps, micro-batch 1, dp 16 or 8
  INFO("expected " << spec.point_count() - valid_points << " invalid points, got " << invalid);
  CHECK(invalid == spec.point_count() - valid_points);
  // The default framework follows the edited plan: fp32 with ZeRO 2 or 3 is FSDP.
  Diagnostics diag("point");
  json axes;
  CHECK(clustersim::sweep_scenario(spec, 1, axes, diag).training.framework.name ==
        clustersim::Framework::pytorch_fsdp);
  CHECK(clustersim::sweep_scenario(spec, 0, axes, diag).training.framework.name == clustersim::Framework::pytorch_ddp);
}

TEST_CASE("axes over a name or a whole section, or a base with a problem, parse the whole document", "[sweep]") {
  const auto named = parse_ok(json::parse(R"({"name": "n", "base": "default", "axes": [
      {"field": "/name", "values": ["a", "b"]}, {"field": "/plan/zero", "values": [0, 1]}]})"));
  CHECK_FALSE(named.base_scenario);
  CHECK(check_points_parse_alike(named) == 0);
  const auto whole_plan = parse_ok(json::parse(R"({"name": "p", "base": "default", "axes": [
      {"field": "/plan", "values": [{"search": "alpa"}, {"dp": 16, "tp": 1, "pp": 1}, 3]}]})"));
  CHECK_FALSE(whole_plan.base_scenario);
  CHECK(check_points_parse_alike(whole_plan) == 1);
  // A base whose plan does not tile the cluster: the points that fix it are valid.
  json base = json::parse(clustersim::default_scenario_text());
  base["plan"]["dp"] = 3;
  const auto fixed = parse_ok(json{{"name", "f"}, {"base", base}, {"axes", json::parse(R"([
      {"zip": [{"field": "/plan/dp", "values": [3, 16]}, {"field": "/plan/tp", "values": [1, 1]}]},
      {"field": "/plan/zero", "values": [0, 1]}])")}});
  CHECK_FALSE(fixed.base_scenario);
  CHECK(check_points_parse_alike(fixed) == 2);
}

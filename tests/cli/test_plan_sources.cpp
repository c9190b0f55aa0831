// A scenario whose plan is {"search": ...} or {"file": ...}: simulate resolves it (it
// used to evaluate dp = tp = pp = 1 silently), a manual plan is replayed with its own
// knobs, an Alpa-style plan and a missing plan file are bad input naming /plan/...
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cli/run_cli.hpp"

using clustersim::test::run_cli;
using clustersim::test::write_temp;

namespace {
std::string scenario(const std::string& plan) {
  return R"({"name": "plan-sources",
  "model": {"family": "gpt", "hidden": 512, "layers": 4, "heads": 8, "seq_len": 256, "vocab": 1024},
  "training": {"global_batch": 32, "micro_batch": 1},
  "cluster": {"gpu": "a100-sxm4-80gb", "nodes": 1, "gpus_per_node": 4},
  "plan": )" + plan + "}";
}
}  // namespace

TEST_CASE("simulate replays the manual plan a search finds, with its knobs", "[cli][plan]") {
  const auto file = write_temp("plan-sources-manual.json", scenario(R"({"search": "manual"})"));
  const auto r = run_cli("simulate " + file.string() + " --json", false);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.output);
  CHECK(j["method"] == "simulated");
  // The manual baseline on 4 GPUs: not the single-GPU fallback (dp = tp = pp = 1 on 4 GPUs
  // would leave 3 GPUs idle and the scenario inconsistent).
  const auto& gpus = j["simulator"]["gpus"];
  CHECK(gpus.size() == 4);
}

TEST_CASE("simulate refuses an Alpa-style plan and a missing plan file, naming the field", "[cli][plan]") {
  const auto alpa = write_temp("plan-sources-alpa.json", scenario(R"({"search": "alpa"})"));
  const auto a = run_cli("simulate " + alpa.string());
  CHECK(a.code == 1);
  CHECK_THAT(a.output, Catch::Contains(alpa.string() + ": /plan/search:") && Catch::Contains("Alpa-style"));
  const auto missing = write_temp("plan-sources-missing.json", scenario(R"({"file": "no-such.plan.json"})"));
  const auto m = run_cli("simulate " + missing.string());
  CHECK(m.code == 1);
  CHECK_THAT(m.output, Catch::Contains(missing.string() + ": /plan/file:") && Catch::Contains("no-such.plan.json"));
}

TEST_CASE("a sweep over a scenario whose plan is a search stores the found plan's prediction", "[cli][plan][sweep-cli]") {
  // The plan object is replaced wholesale by {"search": "manual"}: every point is
  // searched, then estimated with the knobs found (not dp = tp = pp = 1 on 4 GPUs).
  const auto base = write_temp("plan-sources-sweep-base.json", scenario(R"({"search": "manual"})"));
  const auto sweep = write_temp("plan-sources-sweep.json", R"({"name": "searched-plans", "base": ")" + base.string() +
                                                               R"(", "axes": [{"field": "/training/global_batch", "values": [32, 64]}]})");
  const auto db = clustersim::test::temp_dir() / "clustersim-plan-sources.db";
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + s);
  const auto r = run_cli("sweep " + sweep.string() + " --db " + db.string() + " --jobs 1 --quiet");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("2 stored, 0 failed"));
  const auto e = run_cli("db export --db " + db.string() + " --json", false);
  INFO(e.output);
  REQUIRE(e.code == 0);
  const auto rows = nlohmann::json::parse(e.output);
  REQUIRE(rows.size() == 2);
  // The sweep's global-batch-32 point is the base scenario itself: its stored time is the
  // estimate of the plan the simulator resolves from the same {"search": "manual"}.
  const auto sim = run_cli("simulate " + base.string() + " --json", false);
  REQUIRE(sim.code == 0);
  const double estimated = nlohmann::json::parse(sim.output)["simulator"]["estimator_iteration_time_s"].get<double>();
  std::printf("sweep point (global batch 32): %.9g s, simulate's estimate of the resolved plan: %.9g s\n",
              rows[0]["iteration_time_s"].get<double>(), estimated);
  CHECK(rows[0]["iteration_time_s"].get<double>() == Approx(estimated).epsilon(1e-12));
  CHECK(rows[1]["iteration_time_s"].get<double>() > rows[0]["iteration_time_s"].get<double>());
}

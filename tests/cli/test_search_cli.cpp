// `clustersim search` and `clustersim run --plan` end to end on a small scenario: the
// plan file written by search re-evaluates to the same iteration time, and a broken
// plan file is a bad-input error (exit 1) naming the field.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;

namespace {
using Result = clustersim::test::CliResult;

Result run_binary(const std::string& args) { return clustersim::test::run_cli(args); }

const char* kScenario = R"({
  "name": "search-cli-test",
  "model": {"family": "gpt", "hidden": 512, "layers": 4, "heads": 8, "seq_len": 256, "vocab": 1024},
  "training": {"global_batch": 32, "micro_batch": 1},
  "cluster": {"gpu": "a100-sxm4-80gb", "nodes": 1, "gpus_per_node": 4},
  "plan": {"dp": 4, "tp": 1, "pp": 1}
})";
}  // namespace

TEST_CASE("search writes a plan that run --plan evaluates to the same time", "[cli][search]") {
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-search-cli";
  fs::create_directories(dir);
  const fs::path scenario = dir / "s.json", plan = dir / "s.plan.json";
  std::ofstream(scenario) << kScenario;
  const auto s = run_binary("search " + scenario.string() + " -o " + plan.string() + " --clusters 3 --micro-batches 4 8");
  INFO(s.output);
  REQUIRE(s.code == 0);
  CHECK_THAT(s.output, Catch::Contains("Alpa-style plan") && Catch::Contains("Best manual plan") &&
                           Catch::Contains("Speed-up") && Catch::Contains("Search time: clustering"));
  const auto searched = nlohmann::json::parse(std::ifstream(plan));
  const auto r = run_binary("run " + scenario.string() + " --plan " + plan.string() + " --json");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto evaluated = nlohmann::json::parse(r.output);
  CHECK(evaluated["iteration_time_s"].get<double>() ==
        Approx(searched["iteration_time_s"].get<double>()).epsilon(1e-12));

  auto broken = searched;
  broken["stages"][0]["ops"][0]["op"] = "no-such-op";
  std::ofstream(dir / "bad.plan.json") << broken.dump();
  const auto b = run_binary("run " + scenario.string() + " --plan " + (dir / "bad.plan.json").string());
  CHECK(b.code == 1);
  CHECK_THAT(b.output, Catch::Contains("bad.plan.json: /stages/0/ops/0/op") && Catch::Contains("no-such-op"));
}

TEST_CASE("run follows a scenario plan that asks for the search or names a plan file", "[cli][search]") {
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-search-cli-2";
  fs::create_directories(dir);
  auto doc = nlohmann::json::parse(kScenario);
  doc["plan"] = {{"search", "manual"}};
  std::ofstream(dir / "manual.json") << doc.dump();
  const auto m = run_binary("run " + (dir / "manual.json").string());
  INFO(m.output);
  REQUIRE(m.code == 0);
  CHECK_THAT(m.output, Catch::Contains("manual plan search") && Catch::Contains("stage 0"));

  // A plan file next to the scenario, referenced by a relative path.
  doc["plan"] = nlohmann::json{{"dp", 4}, {"tp", 1}, {"pp", 1}};
  std::ofstream(dir / "base.json") << doc.dump();
  const auto s = run_binary("search " + (dir / "base.json").string() + " -o " + (dir / "found.plan.json").string() +
                            " --clusters 3 --micro-batches 4 --no-manual");
  REQUIRE(s.code == 0);
  doc["plan"] = {{"file", "found.plan.json"}};
  std::ofstream(dir / "with-file.json") << doc.dump();
  const auto f = run_binary("run " + (dir / "with-file.json").string() + " --json");
  INFO(f.output);
  REQUIRE(f.code == 0);
  const auto found = nlohmann::json::parse(std::ifstream(dir / "found.plan.json"));
  CHECK(nlohmann::json::parse(f.output)["iteration_time_s"].get<double>() ==
        Approx(found["iteration_time_s"].get<double>()).epsilon(1e-12));
}

TEST_CASE("search finds the same plan with the frontier DP and with CBC", "[cli][search]") {
  // Both solve every intra-op ILP exactly, so the plan files agree byte for byte; the
  // scenario is tight enough on memory (16 GB, fp16 Adam) that stages are constrained.
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-search-solvers";
  fs::create_directories(dir);
  const fs::path scenario = dir / "s.json";
  std::ofstream(scenario) << R"({
  "name": "search-solvers-test",
  "model": {"family": "gpt", "hidden": 2048, "layers": 4, "heads": 16, "seq_len": 1024, "vocab": 8192},
  "training": {"global_batch": 64, "micro_batch": 1, "precision": "mixed-fp16"},
  "cluster": {"gpu": "v100-sxm2-16gb", "nodes": 1, "gpus_per_node": 4, "intra_node": {"fabric": "nvlink-mesh"}},
  "plan": {"dp": 4, "tp": 1, "pp": 1}
})";
  const auto dp = run_binary("search " + scenario.string() + " -o " + (dir / "dp.json").string() + " --solver dp --clusters 3");
  const auto cbc = run_binary("search " + scenario.string() + " -o " + (dir / "cbc.json").string() + " --solver cbc --clusters 3");
  INFO(dp.output << cbc.output);
  REQUIRE(dp.code == 0);
  REQUIRE(cbc.code == 0);
  CHECK_THAT(dp.output, Catch::Contains(", 0 of them by CBC"));
  CHECK_THAT(cbc.output, !Catch::Contains(", 0 of them by CBC"));
  std::ifstream a(dir / "dp.json"), b(dir / "cbc.json");
  const std::string da((std::istreambuf_iterator<char>(a)), {}), db((std::istreambuf_iterator<char>(b)), {});
  CHECK(da == db);
  const auto bad = run_binary("search " + scenario.string() + " --solver simplex");
  CHECK(bad.code == 2);
}

TEST_CASE("search --json, run --plan and run on a searched plan print run --json's keys", "[cli][search]") {
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-search-cli-keys";
  fs::create_directories(dir);
  const fs::path scenario = dir / "s.json", plan = dir / "s.plan.json";
  std::ofstream(scenario) << kScenario;
  const auto run = run_binary("run " + scenario.string() + " --json");
  REQUIRE(run.code == 0);
  const auto reference = nlohmann::json::parse(run.output);
  auto check_keys = [&](const std::string& what, const nlohmann::json& j, const char* method = "search") {
    INFO(what);
    for (const auto& [key, value] : reference.items()) {
      INFO(key);
      REQUIRE(j.contains(key));
      CHECK(j[key].type() == value.type());
    }
    for (const auto& [key, value] : reference["breakdown"].items()) CHECK(j["breakdown"].contains(key));
    for (const auto& [key, value] : reference["memory"].items()) CHECK(j["memory"].contains(key));
    CHECK(j["method"] == method);
    CHECK(j["tflops_per_gpu"].get<double>() > 0);
    CHECK(j["memory_per_gpu_bytes"].get<double>() > 0);
    CHECK(j.contains("plan"));
  };
  const auto s = run_binary("search " + scenario.string() + " -o " + plan.string() + " --clusters 3 --micro-batches 4 8 --json");
  INFO(s.output);
  REQUIRE(s.code == 0);
  const auto searched = nlohmann::json::parse(s.output);
  check_keys("search --json", searched);
  check_keys("search --json, the manual plan", searched["search"]["manual"]);
  const auto p = run_binary("run " + scenario.string() + " --plan " + plan.string() + " --json");
  REQUIRE(p.code == 0);
  const auto evaluated = nlohmann::json::parse(p.output);
  check_keys("run --plan --json", evaluated);
  // The same plan, the same prediction.
  CHECK(evaluated["iteration_time_s"].get<double>() == Approx(searched["iteration_time_s"].get<double>()).epsilon(1e-12));
  CHECK(evaluated["memory_per_gpu_bytes"].get<double>() == Approx(searched["memory_per_gpu_bytes"].get<double>()).epsilon(1e-12));
  auto doc = nlohmann::json::parse(kScenario);
  doc["plan"] = {{"search", "manual"}};
  std::ofstream(dir / "manual.json") << doc.dump();
  const auto m = run_binary("run " + (dir / "manual.json").string() + " --json");
  REQUIRE(m.code == 0);
  // A manual plan resolves to knobs, which run estimates as for any manual scenario (the
  // same number simulate and sweep start from).
  check_keys("run on {\"search\": \"manual\"} --json", nlohmann::json::parse(m.output), "analytical");
}

// The uncertainty table is regenerated from the validation sets byte for byte, and the
// intervals reach the output of run, simulate and search, and db compare's coverage.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run_cli.hpp"

using clustersim::test::run_cli;
namespace fs = std::filesystem;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("calibrate uncertainty regenerates data/uncertainty.json byte for byte", "[cli][uncertainty]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const fs::path out = clustersim::test::temp_dir() / "clustersim-test-uncertainty.json";
  const auto r = run_cli("calibrate uncertainty --root " + root + " --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("calibrated/one-node/analytical"));
  CHECK(slurp(out) == slurp(root + "/data/uncertainty.json"));
  fs::remove(out);
}

TEST_CASE("run, simulate and search print the interval, and run --json carries it", "[cli][uncertainty]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const std::string scenario = root + "/data/scenarios/measured-h100/gpt-125m-s1024-mb16.json";
  const auto run = run_cli("run " + scenario);
  INFO(run.output);
  CHECK_THAT(run.output, Catch::Contains("likely range") && Catch::Contains("calibrated/one-gpu/analytical"));
  const auto sim = run_cli("simulate " + scenario);
  INFO(sim.output);
  CHECK_THAT(sim.output, Catch::Contains("likely range") && Catch::Contains("calibrated/one-gpu/simulated"));
  const fs::path plan = clustersim::test::temp_dir() / "clustersim-test-uncertainty.plan.json";
  const auto search = run_cli("search " + scenario + " --micro-batches 1 -o " + plan.string());
  INFO(search.output);
  CHECK_THAT(search.output, Catch::Contains("likely range"));
  fs::remove(plan);
  const auto json = run_cli("run --json " + scenario, false);
  const auto j = nlohmann::json::parse(json.output);
  const double t = j.at("iteration_time_s"), lo = j.at("interval").at("low_s"), hi = j.at("interval").at("high_s");
  CHECK(lo <= hi);
  CHECK(lo < t * 1.5);
  CHECK(hi > t * 0.5);
  CHECK(j.at("interval").at("confidence").get<double>() > 0.8);
}

TEST_CASE("db compare reports how many measured runs fall inside their interval", "[cli][uncertainty]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-coverage-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "c.db").string();
  REQUIRE(run_cli("db import-measured " + root + "/calibration/data/h100-sxm5-80gb/measured-runs-2026-11-26.json --db " +
                  db).code == 0);
  for (const auto& e : fs::directory_iterator(root + "/data/scenarios/measured-h100"))
    REQUIRE(run_cli("run " + e.path().string() + " --db " + db).code == 0);
  const auto text = run_cli("db compare --db " + db);
  INFO(text.output);
  CHECK_THAT(text.output, Catch::Contains("coverage: ") && Catch::Contains("of 10 measured runs inside"));
  const auto j = nlohmann::json::parse(run_cli("db compare --json --db " + db, false).output);
  CHECK(j.at("coverage").at("runs") == 10);
  CHECK(j.at("coverage").at("inside").get<int>() <= 10);
  CHECK(j.at("coverage").at("stated").get<double>() > 0.8);
  fs::remove_all(dir);
}

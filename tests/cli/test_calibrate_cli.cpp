// calibrate import / fit --db end to end: samples go into the database once, and a fit
// from the database is the fit from the files.
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
int run(const std::string& args, std::string* out = nullptr) {
  const auto r = clustersim::test::run_cli(args);
  if (out) *out = r.output;
  return r.code;
}
nlohmann::json without_sources(nlohmann::json p) {
  p.erase("sources");
  p["calibration"].erase("source");
  p["calibration"]["attention"].erase("source");
  return p;
}
}  // namespace

TEST_CASE("calibrate import stores samples once, fit --db equals fit from the files", "[cli][calibration]") {
  const std::string data = std::string(CLUSTERSIM_SOURCE_DIR) + "/calibration/data/h100-sxm5-80gb/";
  const std::string files = data + "microbench-2026-11-26.json --attention " + data + "sdpa-flash-2026-11-26.json" +
                            " --attention " + data + "sdpa-cudnn-2026-11-27.json";
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-calibrate-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "cal.db").string();
  std::string out;
  REQUIRE(run("calibrate import " + files + " --profile h100-sxm5-80gb --db " + db, &out) == 0);
  INFO(out);
  // 385 GEMMs + 99 memory-bound kernels + 1 launch gap + 30 FlashAttention-2 and 34 cuDNN
  // attention shapes.
  CHECK_THAT(out, Catch::Contains("stored 549 calibration samples") && Catch::Contains("0 already there"));
  REQUIRE(run("calibrate import " + files + " --profile h100-sxm5-80gb --db " + db, &out) == 0);
  CHECK_THAT(out, Catch::Contains("stored 0 calibration samples") && Catch::Contains("549 already there"));

  const std::string a = (dir / "from-files.json").string(), b = (dir / "from-db.json").string();
  REQUIRE(run("calibrate fit " + files + " --name x --out " + a, &out) == 0);
  REQUIRE(run("calibrate fit --db " + db + " --hardware h100-sxm5-80gb --name x --out " + b, &out) == 0);
  const auto pa = nlohmann::json::parse(std::ifstream(a)), pb = nlohmann::json::parse(std::ifstream(b));
  CHECK(without_sources(pa).dump() == without_sources(pb).dump());
  CHECK(pb.at("calibration").contains("attention_cudnn"));

  CHECK(run("calibrate fit --db " + db + " --hardware a100-sxm4-80gb", &out) == 1);
  CHECK_THAT(out, Catch::Contains("no complete microbenchmark samples"));
  fs::remove_all(dir);
}

TEST_CASE("the H100 measured runs import and compare with the analytical estimates", "[cli][calibration]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-measured-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "m.db").string();
  std::string out;
  REQUIRE(run("db import-measured " + root + "/calibration/data/h100-sxm5-80gb/measured-runs-2026-11-26.json --db " + db,
              &out) == 0);
  INFO(out);
  for (const auto& e : fs::directory_iterator(root + "/data/scenarios/measured-h100"))
    REQUIRE(run("run " + e.path().string() + " --db " + db, &out) == 0);
  REQUIRE(run("db compare --db " + db, &out) == 0);
  // Every one of the 10 measured runs finds its estimate through the scenario hash: the
  // summary's "all" row counts 10 runs.
  const auto all = out.find("\nall ");
  REQUIRE(all != std::string::npos);
  const std::string row = out.substr(all + 1, out.find('\n', all + 1) - all - 1);
  INFO(row);
  CHECK(std::stoi(row.substr(3)) == 10);
  fs::remove_all(dir);
}

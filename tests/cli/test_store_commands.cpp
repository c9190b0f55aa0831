// run, simulate and search each store what they compute when given --db.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/wait.h>

#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;

namespace {
int run_binary(const std::string& args, std::string* out) {
  const auto r = clustersim::test::run_cli(args);
  if (out) *out = r.output;
  return r.code;
}
}  // namespace

TEST_CASE("run, simulate and search store their results with --db", "[cli][db]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const fs::path dir = clustersim::test::temp_dir() / "clustersim-store-commands";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "r.db").string();
  std::string out;
  REQUIRE(run_binary("run " + root + "/data/scenarios/default.json --db " + db, &out) == 0);
  REQUIRE(run_binary("simulate " + root + "/data/scenarios/default.json --timeline 2 --db " + db, &out) == 0);
  // A one-GPU Alpa case searches in well under a second.
  REQUIRE(run_binary("search " + root + "/data/scenarios/alpa/gpt-350m.json -o " + (dir / "p.json").string() + " --db " + db,
                     &out) == 0);
  REQUIRE(run_binary("db list --db " + db, &out) == 0);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("analytical") && Catch::Contains("simulated") && Catch::Contains("search"));
  REQUIRE(run_binary("db check --db " + db, &out) == 0);
  // The simulated run (id 2) carries its timeline: a Gantt chart of its first two GPUs.
  const std::string svg = (dir / "timeline.svg").string();
  REQUIRE(run_binary("db plot timeline 2 --db " + db + " --out " + svg, &out) == 0);
  std::ifstream in(svg);
  const std::string chart((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(chart, Catch::Contains("<svg") && Catch::Contains("compute") && Catch::Contains("GPU 1"));
  fs::remove_all(dir);
}

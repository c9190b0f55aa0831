// run, simulate and search each store what they compute when given --db.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
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
  const fs::path dir = fs::temp_directory_path() / "clustersim-store-commands";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "r.db").string();
  std::string out;
  REQUIRE(run_binary("run " + root + "/scenarios/default.json --db " + db, &out) == 0);
  REQUIRE(run_binary("simulate " + root + "/scenarios/default.json --db " + db, &out) == 0);
  // A one-GPU Alpa case searches in well under a second.
  REQUIRE(run_binary("search " + root + "/scenarios/alpa/gpt-350m.json -o " + (dir / "p.json").string() + " --db " + db,
                     &out) == 0);
  REQUIRE(run_binary("db list --db " + db, &out) == 0);
  INFO(out);
  CHECK_THAT(out, Catch::Contains("analytical") && Catch::Contains("simulated") && Catch::Contains("search"));
  REQUIRE(run_binary("db check --db " + db, &out) == 0);
  fs::remove_all(dir);
}

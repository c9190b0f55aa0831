// One convention per quantity across commands: memory in binary units (GiB, as
// format_bytes writes it), bandwidth in decimal ones (GB/s). run, simulate and search
// print a scenario's memory per GPU as the same string.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include "run_cli.hpp"

using clustersim::test::run_cli;

namespace {
// "13.2 GiB of 72.5 GiB" after "memory per GPU".
std::string memory_text(const std::string& out) {
  std::smatch m;
  static const std::regex re(R"(memory per GPU\s+([0-9.]+ [KMGT]?i?B) of ([0-9.]+ [KMGT]?i?B))");
  if (!std::regex_search(out, m, re)) return "";
  return m[1].str() + " of " + m[2].str();
}
}  // namespace

TEST_CASE("run, simulate and search print memory per GPU in the same binary units", "[cli][units]") {
  const std::string scenario = std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/measured-h100/gpt-125m-s1024-mb16.json";
  const auto run = run_cli("run " + scenario);
  const auto sim = run_cli("simulate " + scenario);
  const auto plan = clustersim::test::temp_dir() / "clustersim-test-units.plan.json";
  const auto search = run_cli("search " + scenario + " --micro-batches 1 -o " + plan.string());
  std::filesystem::remove(plan);
  INFO(run.output << "\n" << sim.output << "\n" << search.output);
  const std::string r = memory_text(run.output), s = memory_text(sim.output), q = memory_text(search.output);
  CHECK_THAT(r, Catch::Contains("GiB"));
  CHECK(r == s);
  CHECK(r == q);
}

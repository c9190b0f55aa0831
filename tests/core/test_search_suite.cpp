// Alpa's benchmark suites (data/scenarios/alpa) through the full search with default
// options: on every case the Alpa-style plan is at least as fast as the best manual plan
// under the same cost model (and fits whenever a manual plan fits), and every intra-op
// ILP is proven optimal. One test case per suite so CTest can run them side by side;
// tagged [slow] (CTest label "slow"): 40 to 70 s each on the 2-core build machine.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "strategies/search/search.hpp"

using namespace clustersim;
using namespace clustersim::search;

namespace {

void check_suite(const std::string& prefix) {
  const std::filesystem::path dir = std::filesystem::path(CLUSTERSIM_SOURCE_DIR) / "data" / "scenarios" / "alpa";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json" && e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 6);
  for (const auto& f : files) {
    const Scenario s = load_scenario(f.string());
    const SearchReport r = run_search(s);
    INFO(s.name << ": Alpa-style " << (r.alpa.feasible ? std::to_string(r.alpa.iteration_time) : "none") << " s, manual "
                << (r.manual.feasible ? std::to_string(r.manual.iteration_time) : "none") << " s");
    CHECK(r.timings.unproven == 0);
    if (r.manual.feasible) {
      REQUIRE(r.alpa.feasible);
      // No tolerance: a manual plan lies in the Alpa space wherever the clustering cuts
      // where it does, and elsewhere (alpa-moe-70b's 16-stage manual plan) the Alpa-style
      // plan wins by a margin on this suite. alpa-moe-1_3b once trailed by 0.5%
      // because the manual stage's memory sharded expert weights over dp (it only seemed
      // to fit); rules::stage_memory now shards them over their dp / ep replicas.
      CHECK(r.alpa.iteration_time <= r.manual.iteration_time * (1 + 1e-9));
    }
    if (r.alpa.feasible) {
      // The plan re-evaluates to the searched time under the same cost model.
      const SearchPlan again = evaluate_plan(s, plan_from_json(to_json(r.alpa, r.block_names), "<plan>"), "<plan>");
      CHECK(again.iteration_time == Approx(r.alpa.iteration_time).epsilon(1e-9));
      CHECK(again.feasible);
    }
  }
}

}  // namespace

TEST_CASE("search suite: GPT (Alpa's 350M on 1 GPU ... 39B on 64)", "[search][suite][slow]") { check_suite("gpt-"); }
TEST_CASE("search suite: MoE (Alpa's 380M on 1 GPU ... 70B on 64)", "[search][suite][slow]") { check_suite("moe-"); }
TEST_CASE("search suite: Wide-ResNet (Alpa's 250M on 1 GPU ... 13B on 64)", "[search][suite][slow]") { check_suite("wresnet-"); }

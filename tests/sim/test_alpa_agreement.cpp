// `run` and `simulate` agree on Alpa's benchmark scenarios, whose nodes are DGX-1-style
// NVLink meshes (fabric nvlink-mesh): both price the mesh as wired, on the same rings
// (costmodel/nvlink_mesh.hpp). Before, the estimator priced it like a switch and the
// simulator gave each GPU pair bandwidth/(g-1): 126.2 s simulated against 52.8 s
// estimated on gpt-2.6B. Each scenario prints estimator and simulator side by side.
//
// Tolerance 5%, except for pipelines across nodes (GPT 6.7B, 15B, 39B), where the
// simulated time is 4.6-5.8% lower on any fabric: the estimator charges both pipeline
// sends of every micro-batch (activation forward, gradient backward, over the 25 Gb/s
// NIC) to the critical path, and its pipeline-send exposure is twice the replay's; in the
// replay part of those sends overlaps other stages' work (the pipeline rule is
// strategies/'s). For those the mesh must add nothing: the simulated/estimated ratio is
// the same as with the nodes switched to nvswitch, within 1%, and within 7% overall.
// Slow (about four minutes on the shared 2-core build machine, most of it the 64-GPU
// MoE), hence [slow].
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
namespace fs = std::filesystem;

namespace {

fs::path alpa_dir() {
  const fs::path root = CLUSTERSIM_SOURCE_DIR;
  for (const char* dir : {"scenarios/alpa", "data/scenarios/alpa"})
    if (fs::exists(root / dir)) return root / dir;
  FAIL("no scenarios/alpa or data/scenarios/alpa under " << root.string());
  return {};
}

std::vector<fs::path> scenarios(const std::string& prefix) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(alpa_dir()))
    if (e.path().extension() == ".json" && e.path().filename().string().rfind(prefix, 0) == 0) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

struct Pair {
  double estimated = 0, simulated = 0, tp_est = 0, tp_sim = 0, ep_est = 0, ep_sim = 0;
  double ratio() const { return simulated / estimated; }
};

Pair run_both(const Scenario& s) {
  const Prediction e = make_estimator(s).estimate(s.plan);
  const Prediction r = sim::simulate(s).prediction;
  return {e.iteration_time,           r.iteration_time,           e.breakdown.tp_comm_exposed,
          r.breakdown.tp_comm_exposed, e.breakdown.ep_comm_exposed, r.breakdown.ep_comm_exposed};
}

void check_suite(const std::string& prefix) {
  const auto files = scenarios(prefix);
  REQUIRE(files.size() >= 7);
  std::printf("\n%-16s %5s %12s %12s %8s %20s %20s\n", "scenario", "GPUs", "estimated s", "simulated s", "diff",
              "TP comm est/sim s", "EP comm est/sim s");
  for (const auto& f : files) {
    const Scenario s = load_scenario(f.string());
    REQUIRE(s.cluster.intra_node.fabric == Fabric::nvlink_mesh);
    const Pair p = run_both(s);
    std::printf("%-16s %5lld %12.3f %12.3f %+7.2f%% %9.3f / %-9.3f %9.3f / %-9.3f\n", f.stem().string().c_str(),
                static_cast<long long>(s.cluster.total_gpus()), p.estimated, p.simulated, 100 * (p.ratio() - 1),
                p.tp_est, p.tp_sim, p.ep_est, p.ep_sim);
    INFO(f.filename().string() << ": estimated " << p.estimated << " s, simulated " << p.simulated << " s");
    const bool pipeline_across_nodes = s.plan.pp > 1 && s.plan.dp * s.plan.tp >= s.cluster.gpus_per_node;
    if (!pipeline_across_nodes) {
      CHECK(p.simulated == Approx(p.estimated).epsilon(0.05));
      continue;
    }
    Scenario switched = s;
    switched.cluster.intra_node.fabric = Fabric::nvswitch;
    const Pair q = run_both(switched);
    std::printf("%-16s %5s %12.3f %12.3f %+7.2f%% (the same nodes on nvswitch)\n", "", "", q.estimated, q.simulated,
                100 * (q.ratio() - 1));
    CHECK(p.simulated == Approx(p.estimated).epsilon(0.07));
    CHECK(p.ratio() == Approx(q.ratio()).margin(0.01));
  }
}

}  // namespace

TEST_CASE("run and simulate agree on Alpa's GPT scenarios on the NVLink mesh", "[sim][mesh][slow]") {
  check_suite("gpt-");
}

TEST_CASE("run and simulate agree on Alpa's MoE scenarios on the NVLink mesh", "[sim][mesh][slow]") {
  check_suite("moe-");
}

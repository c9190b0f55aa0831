// Simulator against the analytical estimator on Megatron-LM's Table 1 scenarios
// (overlap_grad_reduce is off in all of them). Contention-free by construction (every
// tensor-parallel group has its own NVSwitch ports, every data-parallel ring its own
// NIC), so the two must agree within 3%. The rows above 512 GPUs take tens of seconds
// each and are left to the benchmark (bench-simulate --table).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;

TEST_CASE("Megatron Table 1 rows: simulator and estimator agree within 3%", "[sim][megatron][slow]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  // Published TFLOP/s per GPU (Narayanan et al., SC'21, Table 1), by scenario.
  std::map<std::string, double> published;
  const nlohmann::json table = read_json_file(root + "/data/published/megatron-sc21-table1.json");
  for (const auto& r : table.at("rows"))
    published[r.at("scenario").get<std::string>()] = r.at("tflops_per_gpu").get<double>();
  std::printf("\n%-8s %5s %3s %3s %12s %12s %8s %10s %10s %8s\n", "model", "GPUs", "TP", "PP", "estimator s",
              "simulated s", "diff", "published", "simulated", "wall s");
  for (const char* row : {"gpt-1_7b", "gpt-3_6b", "gpt-7_5b", "gpt-18_4b", "gpt-39_1b"}) {
    const std::string file = std::string("data/scenarios/megatron-table1/") + row + ".json";
    const Scenario s = load_scenario(root + "/" + file);
    REQUIRE_FALSE(s.plan.overlap_grad_reduce);
    const Prediction e = make_estimator(s).estimate(s.plan);
    const auto r = sim::to_json(sim::simulate(s));
    const double t = r["iteration_time_s"].get<double>();
    const double diff = (t - e.iteration_time) / e.iteration_time;
    const double pub = published.at(file), simulated = r["tflops_per_gpu"].get<double>();
    std::printf("%-8s %5lld %3lld %3lld %12.4f %12.4f %+7.2f%% %10.0f %10.1f %8.2f\n", row,
                static_cast<long long>(s.cluster.total_gpus()), static_cast<long long>(s.plan.tp),
                static_cast<long long>(s.plan.pp), e.iteration_time, t, 100 * diff, pub, simulated,
                r["simulator"]["wall_time_s"].get<double>());
    INFO(row);
    CHECK(std::fabs(diff) <= 0.03);
    // The simulated throughput against the published one (these rows have no
    // replicated non-matmul work, so the graph's FLOPs are the paper's): within 13%.
    // On the A100 profile transferred from the H100 (published matmul ratio included)
    // the 1.7B row is 12% fast; the estimator's table test holds the mean error to 10%.
    CHECK(std::fabs(simulated - pub) / pub <= 0.13);
    CHECK(r["fits"].get<bool>() == e.fits);
  }
}

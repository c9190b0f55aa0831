// The simulator against real training steps: the 10 H100 runs of
// calibration/data/h100-sxm5-80gb/measured-runs-*.json (one GPU each, so the replay's
// job is the op sequence and the memory peak, not the network).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "scenarios/json_reader.hpp"
#include "sim/simulate.hpp"

using namespace clustersim;

TEST_CASE("simulated H100 training steps: median step-time and memory error <= 10%", "[sim][accuracy][measured]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto runs = read_json_file(root + "/calibration/data/h100-sxm5-80gb/measured-runs-2026-11-26.json");
  std::vector<double> time_err, mem_err;
  std::printf("\n%-24s %10s %10s %7s %9s %9s %7s\n", "run", "step ms", "simulated", "error", "peak GiB", "simulated", "error");
  for (const auto& run : runs.at("runs")) {
    const std::string name = run.at("name");
    const Scenario s = load_scenario(root + "/data/scenarios/measured-h100/" + name + ".json");
    const auto out = sim::to_json(sim::simulate(s, {}));
    const auto& m = run.at("measured");
    const double step = m.at("step_time_s").get<double>(), mem = m.at("peak_memory_bytes").get<double>();
    const double t = out.at("iteration_time_s").get<double>(), b = out.at("memory_per_gpu_bytes").get<double>();
    std::printf("%-24s %10.1f %10.1f %+6.1f%% %9.2f %9.2f %+6.1f%%\n", name.c_str(), step * 1e3, t * 1e3,
                100 * (t - step) / step, mem / (1 << 30), b / (1 << 30), 100 * (b - mem) / mem);
    time_err.push_back(std::fabs(t - step) / step);
    mem_err.push_back(std::fabs(b - mem) / mem);
  }
  std::sort(time_err.begin(), time_err.end());
  std::sort(mem_err.begin(), mem_err.end());
  const auto median = [](const std::vector<double>& v) { return 0.5 * (v[(v.size() - 1) / 2] + v[v.size() / 2]); };
  std::printf("median |error|: step time %.1f%%, peak memory %.1f%% over %zu runs (limit 10%%)\n",
              100 * median(time_err), 100 * median(mem_err), time_err.size());
  REQUIRE(time_err.size() >= 6);
  CHECK(median(time_err) <= 0.10);
  CHECK(median(mem_err) <= 0.10);
}

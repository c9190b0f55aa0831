// The simulator against the measured multi-GPU runs (the same files and scenarios as
// tests/core/test_measured_parallel.cpp), beside the estimator: the replay shares the
// estimator's rules, and its timeline (host clock per rank, collectives as flows) must
// stay as close to the measurements. Checks hold today's figures (goal: median 5%;
// 8.6% before the replay slowed overlapped compute and collectives, 5.5% after).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "tests/measured_parallel.hpp"

using namespace clustersim;

TEST_CASE("measured multi-GPU steps: simulated beside estimated", "[accuracy][measured][parallel][sim]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  std::vector<double> err, mem_err;
  std::printf("\n%-36s %9s %9s %9s %7s %8s %8s %7s\n", "run", "step ms", "estimated", "simulated", "error", "mem GiB",
              "simulated", "error");
  for (const auto& file : test::measured_parallel_files(root)) {
    const auto doc = read_json_file(file);
    for (const auto& run : doc.at("runs")) {
      const Scenario s = test::scenario_of(run);
      const Prediction e = make_estimator(s).estimate(s.plan);
      const Prediction p = sim::simulate(s).prediction;
      const double step = run.at("measured").at("step_time_s").get<double>();
      const double mem = run.at("measured").at("peak_memory_bytes").get<double>();
      const double te = (p.iteration_time - step) / step, me = (p.memory_per_gpu - mem) / mem;
      std::printf("%-36s %9.1f %9.1f %9.1f %+6.1f%% %8.2f %8.2f %+6.1f%%\n", run.at("name").get<std::string>().c_str(),
                  step * 1e3, e.iteration_time * 1e3, p.iteration_time * 1e3, 100 * te, mem / (1 << 30),
                  p.memory_per_gpu / (1 << 30), 100 * me);
      err.push_back(std::fabs(te));
      mem_err.push_back(std::fabs(me));
      // Same rules: the replay's time stays near the closed form's on these small plans.
      // Where data-parallel traffic overlaps compute both slow the two sides by the
      // measured interference (rules.hpp overlap_slowdown), the replay over the actual
      // overlap intervals: where a backward waits for its host, the slower kernels fill
      // the host's gaps instead of adding to them as in the estimator's sum (ddp2 gpt-350m
      // mb4: 2.6% faster simulated); elsewhere they differ by up to 2% (ddp4 gpt-1.3b,
      // 1.9% slower simulated).
      CHECK(std::fabs(p.iteration_time - e.iteration_time) <= 0.05 * e.iteration_time);
    }
  }
  REQUIRE(err.size() >= 20);
  const double m = test::median(err), mm = test::median(mem_err);
  std::printf("simulated: median |step-time error| %.1f%%, median |memory error| %.1f%% over %zu runs (goal 5%%, 5%%)\n",
              100 * m, 100 * mm, err.size());
  const double worst = *std::max_element(err.begin(), err.end());
  std::printf("simulated: worst |step-time error| %.1f%% (goal 15%%)\n", 100 * worst);
  // After DTensor's separate projections and per-module host cost: median 2.6%, worst 25.2%
  // (the DTensor GPT runs, under), memory 4.3% (5.3% before); with DTensor biases' host
  // cost 16.1%, with the optimizer step's DTensor dispatch 15.3%, with the loss_parallel
  // cross entropy's handlers 14.4%. The eager kernels' fixed time timed from CUDA graphs:
  // median 3.2% (calibration/README.md, "Eager kernels from CUDA graphs").
  CHECK(m <= 0.04);
  CHECK(worst <= 0.15);
  CHECK(mm <= 0.045);
}

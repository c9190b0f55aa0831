// Accuracy against measured multi-GPU training steps (calibration/training/measure_parallel.py
// under torchrun on 2 and 4 H100s: DDP, FSDP1/FSDP2, DTensor and hand-written tensor
// parallelism, 1F1B pipelines, dp x tp, tp x pp). Every "measured-parallel-*.json" file
// under calibration/data/ is read (to_scenarios.py writes them from the script's runs):
// each run's own scenario block (model, training with its framework, cluster, plan)
// becomes a scenario, the estimator predicts it, and the table gives the errors.
// The goal is a median step-time error of 5% (worst 15%) and memory 5%; the
// checks hold today's figures so that a change that makes them worse fails.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "tests/measured_parallel.hpp"

using namespace clustersim;
using nlohmann::json;

using clustersim::test::measured_parallel_files;
using clustersim::test::median;
using clustersim::test::scenario_of;

TEST_CASE("measured multi-GPU steps: step time and memory against the estimator", "[accuracy][measured][parallel]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  std::vector<double> err, mem_err;
  std::size_t multi_gpu = 0;
  std::printf("\n%-36s %-13s %4s %3s %3s %3s %9s %9s %7s %8s %8s %7s\n", "run", "framework", "gpus", "dp", "tp", "pp",
              "step ms", "predicted", "error", "mem GiB", "predicted", "error");
  for (const auto& file : measured_parallel_files(root)) {
    const json doc = read_json_file(file);
    REQUIRE(doc.at("format") == "clustersim-measured-runs/1");
    for (const auto& run : doc.at("runs")) {
      const Scenario s = scenario_of(run);
      const Prediction e = make_estimator(s).estimate(s.plan);
      const double step = run.at("measured").at("step_time_s").get<double>();
      const double mem = run.at("measured").at("peak_memory_bytes").get<double>();
      const double te = (e.iteration_time - step) / step, me = (e.memory_per_gpu - mem) / mem;
      const auto gpus = run["scenario"]["cluster"]["gpus_per_node"].get<std::int64_t>();
      std::printf("%-36s %-13s %4lld %3lld %3lld %3lld %9.1f %9.1f %+6.1f%% %8.2f %8.2f %+6.1f%%\n",
                  run.at("name").get<std::string>().c_str(), std::string(to_string(s.training.framework.name)).c_str(),
                  static_cast<long long>(gpus), static_cast<long long>(s.plan.dp), static_cast<long long>(s.plan.tp),
                  static_cast<long long>(s.plan.pp), step * 1e3, e.iteration_time * 1e3, 100 * te, mem / (1 << 30),
                  e.memory_per_gpu / (1 << 30), 100 * me);
      err.push_back(std::fabs(te));
      mem_err.push_back(std::fabs(me));
      if (gpus > 1) ++multi_gpu;
      // The plan the run recorded is the one predicted.
      CHECK(s.plan.dp * s.plan.tp * s.plan.pp == gpus);
    }
  }
  REQUIRE(!err.empty());
  const double m = median(err), mm = median(mem_err);
  const double worst = *std::max_element(err.begin(), err.end());
  std::printf("median |step-time error| %.1f%%, worst %.1f%%, median |memory error| %.1f%% over %zu runs, %zu of them "
              "on several GPUs (goal: 5%%, 15%%, 5%%)\n",
              100 * m, 100 * worst, 100 * mm, err.size(), multi_gpu);
  CHECK(multi_gpu >= 20);
  // DTensor's separate projections, per-module backward all-reduces and per-module host
  // cost moved the DTensor runs: worst 33.1% -> 25.3% (the GPT runs, still under: see
  // host-dtblocks-2026-11-26.json), memory median 5.3% -> 4.3%; the median rose 2.6% ->
  // 3.2% as the Llama DTensor runs went from +-4% to -4..-9%. DTensor biases' host cost:
  // 25.3% -> 16.2%; the optimizer step's DTensor dispatch: 16.2% -> 15.3%; the
  // loss_parallel cross entropy's handlers: 15.3% -> 14.4% (median 3.2% -> 2.6%). The eager
  // kernels' fixed time timed from CUDA graphs (3-4 us where a single launch's 15-20 us was
  // mostly the host's dispatch): median 2.6% -> 3.9% (calibration/README.md, "Eager kernels
  // from CUDA graphs").
  CHECK(m <= 0.04);
  CHECK(worst <= 0.15);
  CHECK(mm <= 0.045);
}

TEST_CASE("measured multi-GPU steps on H200s: the calibrated profile against the transferred datasheet profile",
          "[accuracy][measured][parallel][transfer]") {
  // The H200 runs (calibration/data/h200-sxm-141gb/measured-parallel-2026-11-28.json, two
  // H200s joined by NV18) predicted with the profile fitted on an H200 and with the datasheet
  // profile transferred from the H100 (h200-sxm-141gb-datasheet), which carries the H100
  // host's dispatch rate: the H200 machines' host was slower (28.3 us a kernel against the
  // H100's 23.7), so the host-bound runs are where the transfer misses.
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  std::vector<double> cal, tr;
  std::printf("\n%-42s %9s %10s %7s %12s %7s\n", "run", "step ms", "calibrated", "error", "transferred", "error");
  for (const auto& file : measured_parallel_files(root)) {
    const json doc = read_json_file(file);
    for (const auto& run : doc.at("runs")) {
      Scenario s = scenario_of(run);
      if (s.cluster.gpu != "h200-sxm-141gb") continue;
      const double step = run.at("measured").at("step_time_s").get<double>();
      const double c = make_estimator(s).estimate(s.plan).iteration_time / step - 1;
      s.cluster.gpu = "h200-sxm-141gb-datasheet";
      const double t = make_estimator(s).estimate(s.plan).iteration_time / step - 1;
      std::printf("%-42s %9.1f %10.1f %+6.1f%% %12.1f %+6.1f%%\n", run.at("name").get<std::string>().c_str(),
                  1e3 * step, 1e3 * step * (1 + c), 100 * c, 1e3 * step * (1 + t), 100 * t);
      cal.push_back(std::fabs(c));
      tr.push_back(std::fabs(t));
    }
  }
  REQUIRE(cal.size() == 18);
  const double mc = median(cal), mt = median(tr);
  std::printf("median |error|: calibrated %.1f%% (worst %.1f%%), transferred %.1f%% (worst %.1f%%) over %zu runs\n",
              100 * mc, 100 * *std::max_element(cal.begin(), cal.end()), 100 * mt,
              100 * *std::max_element(tr.begin(), tr.end()), cal.size());
  // 2026-11-28: calibrated 2.5 % (worst -10.0 %, dtp2 gpt-1.3b), transferred 6.2 % (worst -26.9 %).
  CHECK(mc <= 0.03);
  CHECK(*std::max_element(cal.begin(), cal.end()) <= 0.15);
  CHECK(mt <= 0.08);
}

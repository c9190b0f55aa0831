// Accuracy against real training steps: the models of calibration/training measured on
// an H100 (calibration/data/h100-sxm5-80gb/measured-runs-*.json) and an H200
// (calibration/data/h200-sxm-141gb/), predicted from the scenarios in
// data/scenarios/measured-h100/ and measured-h200/ with the calibrated profiles.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "costmodel/hardware.hpp"
#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

TEST_CASE("H100 training steps: median step-time and peak-memory error <= 10%", "[accuracy][measured]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto runs = read_json_file(root + "/calibration/data/h100-sxm5-80gb/measured-runs-2026-11-26.json");
  std::vector<double> time_err, mem_err;
  std::printf("\n%-24s %11s %11s %7s %10s %10s %7s\n", "run", "step ms", "predicted", "error", "peak GiB", "predicted",
              "error");
  for (const auto& run : runs.at("runs")) {
    const std::string name = run.at("name");
    const Scenario s = load_scenario(root + "/data/scenarios/measured-h100/" + name + ".json");
    const Prediction e = make_estimator(s).estimate(s.plan);
    const auto& m = run.at("measured");
    const double step = m.at("step_time_s").get<double>(), mem = m.at("peak_memory_bytes").get<double>();
    const double te = (e.iteration_time - step) / step, me = (e.memory_per_gpu - mem) / mem;
    std::printf("%-24s %11.1f %11.1f %+6.1f%% %10.2f %10.2f %+6.1f%%\n", name.c_str(), step * 1e3,
                e.iteration_time * 1e3, 100 * te, mem / (1 << 30), e.memory_per_gpu / (1 << 30), 100 * me);
    time_err.push_back(std::fabs(te));
    mem_err.push_back(std::fabs(me));
    // The scenario describes the measured model exactly (the script counts parameters).
    CHECK(e.parameters == Approx(m.at("parameters").get<double>()).epsilon(1e-9));
  }
  const double mt = median(time_err), mm = median(mem_err);
  std::printf("median |error|: step time %.1f%%, peak memory %.1f%% over %zu runs (limit 10%%)\n", 100 * mt, 100 * mm,
              time_err.size());
  CHECK(time_err.size() >= 6);
  CHECK(mt <= 0.10);
  CHECK(mm <= 0.10);
}

TEST_CASE("H100 training steps with SDPA's own attention kernels (cuDNN) and with flash forced, 2k and 8k tokens",
          "[accuracy][measured][attention]") {
  // calibration/data/h100-sxm5-80gb/measured-runs-attention-2026-11-27.json
  // (calibration/training/run_attention_kernels.sh): the same models with SDPA left to its
  // choice (torch 2.11 on an H100: cuDNN, ScaledDotProductCudnnAttentionBackward0) and with
  // its flash backend forced. Each is predicted with the kernels it ran (the scenario's
  // attention_kernel: auto for the first, flash2 for the second) and, beside it, with the
  // other curve, the error a model with one attention curve would make.
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto runs = read_json_file(root + "/calibration/data/h100-sxm5-80gb/measured-runs-attention-2026-11-27.json");
  std::printf("\n%-32s %-7s %9s %10s %7s | %-12s %7s\n", "run", "kernels", "step ms", "predicted", "error",
              "other curve", "error");
  std::vector<double> err;
  for (const auto& run : runs.at("runs")) {
    const std::string name = run.at("name");
    Scenario s = load_scenario(root + "/data/scenarios/measured-h100/" + name + ".json");
    const double step = run.at("measured").at("step_time_s").get<double>();
    const bool forced_flash = run.at("environment").at("attention_backend") == "flash";
    CHECK(s.training.attention_kernel == (forced_flash ? AttentionKernelChoice::flash2 : AttentionKernelChoice::automatic));
    const double own = make_estimator(s).estimate(s.plan).iteration_time;
    s.training.attention_kernel = forced_flash ? AttentionKernelChoice::cudnn : AttentionKernelChoice::flash2;
    const double other = make_estimator(s).estimate(s.plan).iteration_time;
    const double e = own / step - 1, eo = other / step - 1;
    std::printf("%-32s %-7s %9.1f %10.1f %+6.1f%% | %-12.1f %+6.1f%%\n", name.c_str(), forced_flash ? "flash2" : "cudnn",
                1e3 * step, 1e3 * own, 100 * e, 1e3 * other, 100 * eo);
    err.push_back(std::fabs(e));
    // At 8,192 tokens the two curves are 12-16 % apart on the whole step.
    if (s.model.seq_len == 8192) CHECK(std::fabs(eo) > 0.08);
  }
  std::sort(err.begin(), err.end());
  std::printf("with the kernels each run ran: max |error| %.1f%% over %zu runs\n", 100 * err.back(), err.size());
  CHECK(err.size() == 6);
  CHECK(err.back() <= 0.05);
}

TEST_CASE("H200 training steps: the calibrated profile, and the datasheet profile transferred from the H100",
          "[accuracy][measured][transfer]") {
  // calibration/data/h200-sxm-141gb/measured-runs-2026-11-28.json: the same ten models as the
  // H100's set, on one H200 (calibration/run_single_gpu.sh). Each is predicted with the
  // profile fitted to that H200's microbenchmarks (h200-sxm-141gb) and with the datasheet
  // profile the project shipped before (h200-sxm-141gb-datasheet, status transferred: the
  // H100's curves moved by costmodel/transfer), whose error here is the transfer's, measured.
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto runs = read_json_file(root + "/calibration/data/h200-sxm-141gb/measured-runs-2026-11-28.json");
  REQUIRE(find_gpu_profile("h200-sxm-141gb")->status == "calibrated");
  REQUIRE(find_gpu_profile("h200-sxm-141gb-datasheet")->status == "transferred");
  std::vector<double> cal_err, tr_err, mem_err;
  std::printf("\n%-24s %9s %10s %7s %12s %7s %9s %9s %7s\n", "run", "step ms", "calibrated", "error", "transferred",
              "error", "peak GiB", "predicted", "error");
  for (const auto& run : runs.at("runs")) {
    const std::string name = run.at("name");
    Scenario s = load_scenario(root + "/data/scenarios/measured-h200/" + name + ".json");
    CHECK(s.cluster.gpu == "h200-sxm-141gb");
    const Prediction cal = make_estimator(s).estimate(s.plan);
    s.cluster.gpu = "h200-sxm-141gb-datasheet";
    const Prediction tr = make_estimator(s).estimate(s.plan);
    const auto& m = run.at("measured");
    const double step = m.at("step_time_s").get<double>(), mem = m.at("peak_memory_bytes").get<double>();
    const double ce = cal.iteration_time / step - 1, te = tr.iteration_time / step - 1, me = cal.memory_per_gpu / mem - 1;
    std::printf("%-24s %9.1f %10.1f %+6.1f%% %12.1f %+6.1f%% %9.2f %9.2f %+6.1f%%\n", name.c_str(), 1e3 * step,
                1e3 * cal.iteration_time, 100 * ce, 1e3 * tr.iteration_time, 100 * te, mem / (1 << 30),
                cal.memory_per_gpu / (1 << 30), 100 * me);
    cal_err.push_back(std::fabs(ce));
    tr_err.push_back(std::fabs(te));
    mem_err.push_back(std::fabs(me));
    CHECK(cal.parameters == Approx(m.at("parameters").get<double>()).epsilon(1e-9));
  }
  const double mc = median(cal_err), mt = median(tr_err), mm = median(mem_err);
  std::printf("median |error| over %zu runs: calibrated %.1f%% (worst %.1f%%), transferred %.1f%% (worst %.1f%%), "
              "peak memory %.1f%%\n",
              cal_err.size(), 100 * mc, 100 * *std::max_element(cal_err.begin(), cal_err.end()), 100 * mt,
              100 * *std::max_element(tr_err.begin(), tr_err.end()), 100 * mm);
  REQUIRE(cal_err.size() == 10);
  // 2026-11-28: calibrated 0.4 % (worst -3.7 %, gpt-125m; 3.5 %, all over, with the back-to-back
  // launch gap of 3.4 us a kernel in place of the queued 1.3), transferred 3.3 % (all -0.1 to -6.1 %).
  CHECK(mc <= 0.05);
  CHECK(mt <= 0.05);
  CHECK(mm <= 0.05);
}

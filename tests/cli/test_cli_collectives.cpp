// `clustersim calibrate fit-collectives` end to end: the one-GPU smoke file is refused, and
// a profile fitted to synthetic NCCL data (made by the alpha-beta model, a pipeline test,
// not a calibration) changes what `clustersim run` predicts for tensor-parallel traffic
// by the ratio the fit implies.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "tests/cli/run_cli.hpp"

#include "scenarios/scenario.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
using Result = clustersim::test::CliResult;

Result run(const std::string& args) { return clustersim::test::run_cli(args); }

using clustersim::test::write_temp;

// A file's whole text (a regenerated profile against the shipped one).
std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// Every collective on 2..8 ranks, NCCL's ring alpha-beta: time = steps alpha + F bytes / busbw
// (steps and F as costmodel/nccl_model.hpp: all-reduce 2(n-1) and 2(n-1)/n, all-gather,
// reduce-scatter, all-to-all n-1 and (n-1)/n, broadcast n-1 and 1, send/recv 1 and 1).
json synthetic_bench(double alpha, double busbw) {
  json runs = json::array();
  for (int n : {2, 4, 8}) {
    json results = json::array();
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"}) {
      const std::string o = op;
      const double steps = o == "all_reduce" ? 2.0 * (n - 1) : o == "send_recv" ? 1.0 : n - 1.0;
      const double factor = o == "all_reduce" ? 2.0 * (n - 1) / n : o == "broadcast" || o == "send_recv" ? 1.0 : (n - 1.0) / n;
      for (int e = 10; e <= 30; ++e) {
        const double bytes = std::ldexp(1.0, e);
        results.push_back({{"op", o}, {"gpus", n}, {"bytes", bytes}, {"time_s", steps * alpha + factor * bytes / busbw}});
      }
    }
    runs.push_back({{"gpus", n}, {"check_passed", true}, {"results", results}});
  }
  return {{"format", "clustersim-nccl-bench/1"}, {"provenance", json::object()}, {"runs", runs}};
}
}  // namespace

TEST_CASE("fit-collectives refuses one-GPU data", "[cli][collective_fit]") {
  const auto r = run("calibrate fit-collectives " + std::string(CLUSTERSIM_SOURCE_DIR) +
                     "/calibration/data/h100-sxm5-80gb/smoke-1gpu/nccl-bench-1gpu-smoke-2026-11-26.json");
  INFO(r.output);
  CHECK(r.code != 0);
  CHECK_THAT(r.output, Catch::Contains("two or more GPUs"));
}

TEST_CASE("a fitted collective profile drives the estimator's tensor-parallel time", "[cli][collective_fit]") {
  // Two fits of synthetic NCCL data on the A100 profile (300 GB/s NVLink), one at 228 GB/s
  // bus bandwidth (efficiency 0.76) and one at half that (0.38), both with 3 us latency.
  auto fitted_profile = [](double busbw, const std::string& tag) {
    const auto data = write_temp("cf-synth-" + tag + ".json", synthetic_bench(3e-6, busbw).dump());
    const auto profile = clustersim::test::temp_dir() / ("clustersim-test-cf-profile-" + tag + ".json");
    const auto fit = run("calibrate fit-collectives " + data.string() + " --base a100-sxm4-80gb --holdout 0 --out " +
                         profile.string());
    INFO(fit.output);
    REQUIRE(fit.code == 0);
    return std::pair{profile, fit.output};
  };
  const auto [full, full_out] = fitted_profile(228e9, "full");
  const auto [half, half_out] = fitted_profile(114e9, "half");
  CHECK_THAT(full_out, Catch::Contains("collective_nvlink 0.760"));
  CHECK_THAT(half_out, Catch::Contains("collective_nvlink 0.380"));

  json base = json::parse(std::string(clustersim::default_scenario_text()));
  json slow = base;
  base["cluster"]["gpu"] = full.string();
  slow["cluster"]["gpu"] = half.string();
  const auto r_base = run("run --json " + write_temp("cf-base.json", base.dump()).string());
  const auto r_fit = run("run --json " + write_temp("cf-fitted.json", slow.dump()).string());
  INFO(r_base.output << "\n" << r_fit.output);
  REQUIRE(r_base.code == 0);
  REQUIRE(r_fit.code == 0);
  const json b = json::parse(r_base.output), f = json::parse(r_fit.output);
  const double tp_base = b["breakdown"]["tp_comm_exposed_s"], tp_fit = f["breakdown"]["tp_comm_exposed_s"];
  // The scenario's TP traffic is bandwidth-bound (MB-sized activations), so halving the
  // bus bandwidth about doubles it; latency terms (3 us either way) keep it a little under 2.
  std::printf("tensor-parallel comm: 228 GB/s fit %.2f ms, 114 GB/s fit %.2f ms, ratio %.3f (bandwidth ratio 2)\n",
              1e3 * tp_base, 1e3 * tp_fit, tp_fit / tp_base);
  CHECK(tp_base > 0);
  CHECK(tp_fit / tp_base == Approx(2.0).epsilon(0.05));
  CHECK(f["iteration_time_s"].get<double>() > b["iteration_time_s"].get<double>());
}

TEST_CASE("the regenerate line makes the shipped H100 profile byte for byte, NCCL section included",
          "[cli][calibration][collective_fit]") {
  // As README.md and tests/core/test_calibration.cpp write it, from the repository root
  // (the profile records the paths it was given).
  const fs::path out = clustersim::test::temp_dir() / "clustersim-test-h100-regenerated.json";
  const std::string d = "calibration/data/h100-sxm5-80gb/";
  const auto r = run("calibrate fit " + d + "microbench-duty-2026-11-27.json --attention " + d + "sdpa-flash-2026-11-26.json" +
                     " --attention " + d + "sdpa-cudnn-2026-11-27.json" +
                     " --eager " + d + "eager-kernels-graphs-2026-11-28.json" +
                     " --host " + d + "host-dispatch-2026-11-26.json --dtensor-bias " + d + "dtensor-bias-2026-11-27.json" +
                     " --dtensor-optimizer " + d + "dtensor-host-2026-11-27/dtensor-params-run1.json --dtensor-optimizer " + d +
                     "dtensor-host-2026-11-27/dtensor-params-run2.json --dtensor-optimizer " + d +
                     "dtensor-host-2026-11-27/dtensor-params-run4.json --dtensor-optimizer " + d +
                     "dtensor-host-2026-11-27/call8-x4-params-r1.json --dtensor-optimizer " + d +
                     "dtensor-host-2026-11-27/call8-x4-params-r2.json --dtensor-loss " + d +
                     "dtensor-host-2026-11-27/call9-loss-r1.json --dtensor-loss " + d +
                     "dtensor-host-2026-11-27/call9-loss-r2.json --dtensor-loss " + d +
                     "dtensor-host-2026-11-27/call9-loss-r3.json --inference-host " + d +
                     "inference-host-clean-llama-1b-2026-11-28.json --inference-host " + d +
                     "inference-host-clean-llama-8b-2026-11-28.json --overlap " + d + "overlap-2026-11-26.json" +
                     " --nccl " + d + "nccl-2gpu-2026-11-26.json --nccl " +
                     d + "nccl-4gpu-2026-11-26.json --name h100-sxm5-80gb --holdout 0 --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("collective fit from 2 file(s), 276 samples"));
  const std::string shipped = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "costmodel/profiles/h100-sxm5-80gb.json");
  CHECK(slurp(out) == shipped);
  fs::remove(out);
}

TEST_CASE("the regenerate line makes the shipped H200 profile byte for byte", "[cli][calibration][collective_fit]") {
  // As README.md writes it: the H200's own measurements (calibration/data/h200-sxm-141gb/),
  // the DTensor optimizer and loss_parallel host costs measured on two H200s, the DTensor
  // bias's measured on H100s carried to the H200 host's eager rate,
  // the launch figures of a later lease (kernels queued behind a spin: the kernel overhead),
  // the kernels per linear of another (cuBLAS's split-K reductions and memsets),
  // and NCCL from the H200's two GPUs with the H100's four (the same NV18 NVLink 4 fabric).
  const fs::path out = clustersim::test::temp_dir() / "clustersim-test-h200-regenerated.json";
  const std::string d = "calibration/data/h200-sxm-141gb/", h = "calibration/data/h100-sxm5-80gb/";
  const auto r = run("calibrate fit " + d + "microbench-duty-2026-11-28.json --attention " + d + "sdpa-flash-2026-11-28.json" +
                     " --attention " + d + "sdpa-cudnn-2026-11-28.json --eager " + d + "eager-kernels-graphs-2026-11-28.json" +
                     " --host " + d + "host-dispatch-2026-11-28.json --dtensor-bias " + h + "dtensor-bias-2026-11-27.json" +
                     " --dtensor-optimizer " + d + "dtensor-params-2026-11-28.json --dtensor-loss " + d +
                     "dtensor-loss-2026-11-28.json --inference-host " + d +
                     "inference-host-2026-11-28.json --gemm-launches " + d + "gemm-launches-2026-11-28.json --launch " + d + "launch-queued-2026-11-28.json --overlap " + d +
                     "overlap-2026-11-28.json --nccl " + d +
                     "nccl-2gpu-2026-11-28.json --nccl " + h + "nccl-4gpu-2026-11-26.json" +
                     " --base h200-sxm-141gb-datasheet --name h200-sxm-141gb --holdout 0 --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string shipped = slurp(fs::path(CLUSTERSIM_SOURCE_DIR) / "costmodel/profiles/h200-sxm-141gb.json");
  CHECK(slurp(out) == shipped);
  fs::remove(out);
}

TEST_CASE("calibrate fit --launch: its launch figures replace the file's, bad ones are named", "[cli][calibration]") {
  const std::string data = "calibration/data/h200-sxm-141gb/microbench-duty-2026-11-28.json";
  // The queued gap, where measured, is the kernel overhead; without it the back-to-back gap.
  const json queued = {{"launch",
                        {{"async_gpu_time_per_launch", {{"median_s", 3.5e-6}}},
                         {"queued_gpu_time_per_launch", {{"median_s", 1.25e-6}}}}}};
  const json back_to_back = {{"launch", {{"async_gpu_time_per_launch", {{"median_s", 3.5e-6}}}}}};
  for (const auto& [doc, overhead] : {std::pair{queued, 1.25e-6}, std::pair{back_to_back, 3.5e-6}}) {
    const auto f = write_temp("launch.json", doc.dump());
    const auto out = clustersim::test::temp_dir() / "clustersim-test-launch-fit.json";
    const auto r = run("calibrate fit " + data + " --launch " + f.string() +
                       " --base h200-sxm-141gb-datasheet --holdout 0 --out " + out.string());
    INFO(r.output);
    REQUIRE(r.code == 0);
    const json p = json::parse(slurp(out));
    const std::string got = p["efficiency"]["kernel_overhead"];
    std::printf("kernel_overhead written %s, expected %.3g s\n", got.c_str(), overhead);
    CHECK(std::stod(got) == Approx(overhead).epsilon(1e-9));
    fs::remove(out);
  }
  const auto bad = write_temp("launch-bad.json", R"({"launch": {"async_gpu_time_per_launch": {"median_s": 3e-6},
                                                   "queued_gpu_time_per_launch": {"median_s": "fast"}}})");
  const auto r = run("calibrate fit " + data + " --launch " + bad.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(bad.string()) && Catch::Contains("/launch/queued_gpu_time_per_launch/median_s") &&
                           Catch::Contains("\"fast\""));
  // A launch figure written in microseconds where seconds belong.
  const auto micro = write_temp("launch-micro.json", R"({"launch": {"async_gpu_time_per_launch": {"median_s": 3.4}}})");
  const auto rm = run("calibrate fit " + data + " --launch " + micro.string());
  INFO(rm.output);
  CHECK(rm.code == 1);
  CHECK_THAT(rm.output, Catch::Contains("/launch/async_gpu_time_per_launch/median_s") && Catch::Contains("3.4"));
}

TEST_CASE("calibrate fit --gemm-launches: the points land in the profile, bad ones are named", "[cli][calibration]") {
  const std::string data = "calibration/data/h200-sxm-141gb/microbench-duty-2026-11-28.json";
  const auto good = write_temp("gemm-launches.json", R"({"format": "clustersim-gemm-launches/1",
                                                         "points": [[1, 4096, 4096, 2], [2048, 4096, 4096, 1]]})");
  const auto out = clustersim::test::temp_dir() / "clustersim-test-gemm-launches-fit.json";
  const auto r = run("calibrate fit " + data + " --gemm-launches " + good.string() +
                     " --base h200-sxm-141gb-datasheet --holdout 0 --out " + out.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const json p = json::parse(slurp(out));
  CHECK(p["calibration"]["gemm_launches"]["points"] == json::parse("[[1, 4096, 4096, 2], [2048, 4096, 4096, 1]]"));
  fs::remove(out);
  // No kernel at all is no launch count; a string is no shape.
  const auto bad = write_temp("gemm-launches-bad.json", R"({"format": "clustersim-gemm-launches/1",
                                                             "points": [[1, 4096, 4096, 2], [8, 4096, 4096, 0],
                                                                        ["M", 1, 1, 1]]})");
  const auto rb = run("calibrate fit " + data + " --gemm-launches " + bad.string());
  INFO(rb.output);
  CHECK(rb.code == 1);
  CHECK_THAT(rb.output, Catch::Contains(bad.string()) && Catch::Contains("/points/1") &&
                            Catch::Contains("[8,4096,4096,0]") && Catch::Contains("/points/2"));
  const auto wrong = write_temp("gemm-launches-format.json", R"({"format": "clustersim-inference-host/1", "points": []})");
  const auto rw = run("calibrate fit " + data + " --gemm-launches " + wrong.string());
  CHECK(rw.code == 1);
  CHECK_THAT(rw.output, Catch::Contains("/format"));
}

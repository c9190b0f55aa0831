// Calibration: the shipped H100 profile is exactly what the fits make of the committed
// measurements (microbenchmarks, flash attention, NCCL on 2 and 4 GPUs), and the fit
// predicts held-back measurements well.
#include <catch2/catch.hpp>
#include <algorithm>
#include <map>
#include <tuple>
#include <cstdio>

#include "costmodel/calibration.hpp"
#include "costmodel/collective_fit.hpp"
#include "costmodel/kernels.hpp"
#include "scenarios/json_reader.hpp"
#include "test_temp.hpp"

using namespace clustersim;

namespace {
const std::string kData = "calibration/data/h100-sxm5-80gb/";

// The test's own median (the mean of the middle two when even), kept apart from the code
// under test so that the expected values are recomputed independently.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Writes a damaged copy of a data file into the test's temporary folder; returns its path.
std::string bad(const std::string& name, const nlohmann::json& d) {
  const std::string path = (clustersim::test::temp_dir() / name).string();
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(d.dump().c_str(), f);
  std::fclose(f);
  return path;
}

Microbenchmarks h100_data() {
  Microbenchmarks d = read_microbenchmarks(kData + "microbench-duty-2026-11-27.json");
  read_attention_benchmarks(kData + "sdpa-flash-2026-11-26.json", d);
  read_attention_benchmarks(kData + "sdpa-cudnn-2026-11-27.json", d);
  read_eager_kernels(kData + "eager-kernels-graphs-2026-11-28.json", d);
  return d;
}
}  // namespace

TEST_CASE("the shipped H100 profile is the fit of the committed measurements", "[calibration]") {
  const auto base = find_gpu_profile("h100-sxm5-80gb-datasheet");
  REQUIRE(base);
  GpuProfile fitted = fit_profile(*base, h100_data(), {0, "h100-sxm5-80gb"}, nullptr);
  fitted.sources.push_back("eager PyTorch kernels by access path measured by "
                           "calibration/training/measure_eager_kernels.py: " + kData + "eager-kernels-graphs-2026-11-28.json");
  const std::string host = kData + "host-dispatch-2026-11-26.json";
  fitted.host = fit_host_dispatch(host);
  fitted.sources.push_back("host dispatch measured by calibration/training/measure_host.py: " + host);
  const std::string bias = kData + "dtensor-bias-2026-11-27.json";
  fitted.host.dtensor_bias = fit_dtensor_bias(bias, fitted.host.eager_per_kernel);
  fitted.sources.push_back("DTensor bias host cost from host-bound GPT steps with and without biases "
                           "(calibration/training/measure_parallel.py --dtp-gpt-bias): " + bias);
  std::vector<std::string> params;
  std::string listed;
  for (const char* f : {"dtensor-params-run1.json", "dtensor-params-run2.json", "dtensor-params-run4.json",
                        "call8-x4-params-r1.json", "call8-x4-params-r2.json"}) {
    params.push_back(kData + "dtensor-host-2026-11-27/" + f);
    listed += (listed.empty() ? "" : ", ") + params.back();
  }
  fitted.host.dtensor_optimizer_param = fit_dtensor_optimizer(params, fitted.host.eager_per_kernel);
  fitted.sources.push_back("DTensor parameter host cost of the fused AdamW step (calibration/training/"
                           "measure_dtensor_params.py): " + listed);
  std::vector<std::string> losses;
  listed.clear();
  for (const char* f : {"call9-loss-r1.json", "call9-loss-r2.json", "call9-loss-r3.json"}) {
    losses.push_back(kData + "dtensor-host-2026-11-27/" + f);
    listed += (listed.empty() ? "" : ", ") + losses.back();
  }
  std::tie(fitted.host.dtensor_loss_forward, fitted.host.dtensor_loss_backward) =
      fit_dtensor_loss(losses, fitted.host.eager_per_kernel);
  fitted.sources.push_back("DTensor loss_parallel host cost (calibration/training/measure_dtensor_params.py "
                           "--loss-only): " + listed);
  const std::vector<std::string> inference = {kData + "inference-host-clean-llama-1b-2026-11-28.json",
                                              kData + "inference-host-clean-llama-8b-2026-11-28.json"};
  const InferenceHost ih = fit_inference_host(inference);
  fitted.host.inference_per_kernel = ih.per_kernel;
  fitted.host.inference_forward = ih.forward;
  fitted.sources.push_back("eager inference forward host cost of transformers' Llama "
                           "(calibration/serving/measure_inference_host.py): " + inference[0] + ", " + inference[1]);
  const std::string overlap = kData + "overlap-2026-11-26.json";
  fitted.interference = fit_overlap_interference(overlap);
  fitted.sources.push_back("overlap interference measured by calibration/nccl (clustersim-overlap-bench): " + overlap);
  const CollectiveFit nccl = fit_collectives({read_collective_benchmarks(kData + "nccl-2gpu-2026-11-26.json"),
                                              read_collective_benchmarks(kData + "nccl-4gpu-2026-11-26.json")},
                                             {0});
  fitted = apply_collective_fit(fitted, nccl, nullptr);
  const auto shipped = find_gpu_profile("h100-sxm5-80gb");
  REQUIRE(shipped);
  CHECK(shipped->status == "calibrated");
  CHECK(shipped->nccl.present());
  // Regenerate with (one line, from the repository root): clustersim calibrate fit
  //   calibration/data/h100-sxm5-80gb/microbench-duty-2026-11-27.json
  //   --attention calibration/data/h100-sxm5-80gb/sdpa-flash-2026-11-26.json
  //   --attention calibration/data/h100-sxm5-80gb/sdpa-cudnn-2026-11-27.json
  //   --eager calibration/data/h100-sxm5-80gb/eager-kernels-graphs-2026-11-28.json
  //   --host calibration/data/h100-sxm5-80gb/host-dispatch-2026-11-26.json
  //   --dtensor-bias calibration/data/h100-sxm5-80gb/dtensor-bias-2026-11-27.json
  //   --dtensor-optimizer calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/dtensor-params-run1.json
  //   --dtensor-optimizer calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/dtensor-params-run2.json
  //   --dtensor-optimizer calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/dtensor-params-run4.json
  //   --dtensor-optimizer calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/call8-x4-params-r1.json
  //   --dtensor-optimizer calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/call8-x4-params-r2.json
  //   --dtensor-loss calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/call9-loss-r1.json
  //   --dtensor-loss calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/call9-loss-r2.json
  //   --dtensor-loss calibration/data/h100-sxm5-80gb/dtensor-host-2026-11-27/call9-loss-r3.json
  //   --inference-host calibration/data/h100-sxm5-80gb/inference-host-clean-llama-1b-2026-11-28.json
  //   --inference-host calibration/data/h100-sxm5-80gb/inference-host-clean-llama-8b-2026-11-28.json
  //   --overlap calibration/data/h100-sxm5-80gb/overlap-2026-11-26.json
  //   --nccl calibration/data/h100-sxm5-80gb/nccl-2gpu-2026-11-26.json
  //   --nccl calibration/data/h100-sxm5-80gb/nccl-4gpu-2026-11-26.json
  //   --name h100-sxm5-80gb --holdout 0 --out costmodel/profiles/h100-sxm5-80gb.json
  CHECK(to_json(fitted).dump() == to_json(*shipped).dump());
}

TEST_CASE("the datasheet H100 profile stays datasheet-only", "[calibration]") {
  const auto d = find_gpu_profile("h100-sxm5-80gb-datasheet");
  REQUIRE(d);
  CHECK(d->status == "datasheet");
  CHECK_FALSE(d->calibration.present());
  CHECK_FALSE(d->nccl.present());
}

TEST_CASE("the fit predicts held-back microbenchmarks (median error <= 5%)", "[calibration]") {
  FitReport rep;
  const auto base = find_gpu_profile("h100-sxm5-80gb-datasheet");
  const GpuProfile fitted = fit_profile(*base, h100_data(), {5, ""}, &rep);
  std::printf("\nheld back: GEMM n=%zu median %.2f%% p90 %.2f%%; memory-bound n=%zu median %.2f%%; "
              "attention fwd median %.2f%%, bwd %.2f%%\n",
              rep.gemm_held_back.count, 100 * rep.gemm_held_back.median, 100 * rep.gemm_held_back.p90,
              rep.memory_held_back.count, 100 * rep.memory_held_back.median,
              100 * rep.attention_forward_held_back[0].median, 100 * rep.attention_backward_held_back[0].median);
  std::printf("cuDNN attention held back: fwd n=%zu median %.2f%%, bwd median %.2f%%\n",
              rep.attention_forward_held_back[1].count, 100 * rep.attention_forward_held_back[1].median,
              100 * rep.attention_backward_held_back[1].median);
  std::printf("all held-back points: n=%zu median %.2f%%\n", rep.all_held_back.count, 100 * rep.all_held_back.median);
  CHECK(rep.gemm_held_back.count >= 50);
  CHECK(rep.gemm_held_back.median <= 0.05);
  CHECK(rep.all_held_back.median <= 0.05);
  CHECK(rep.attention_backward_held_back[0].median <= 0.10);
  CHECK(rep.attention_forward_held_back[1].count >= 6);
  CHECK(rep.attention_forward_held_back[1].median <= 0.10);
  CHECK(rep.attention_backward_held_back[1].median <= 0.10);
  // The fitted numbers are physical: below datasheet peak, above half of it for GEMMs.
  CHECK(fitted.efficiency.gemm_max > 0.5);
  CHECK(fitted.efficiency.gemm_max <= 1.0);
  CHECK(fitted.efficiency.memory <= 1.0);
  const KernelModel km(fitted);
  // 8192^3 bf16: the device notes saw ~790-800 TFLOP/s; the fit should be near that.
  const double tflops = 2.0 * 8192.0 * 8192 * 8192 / km.gemm_kernel(1, 8192, 8192, 8192, DType::bf16) / 1e12;
  std::printf("8192^3 bf16 predicted at %.0f TFLOP/s\n", tflops);
  CHECK(tflops > 650);
  CHECK(tflops < 900);
}

TEST_CASE("malformed calibration data is rejected with its path", "[calibration]") {
  Microbenchmarks scratch;
  CHECK_THROWS_WITH(read_microbenchmarks("/nonexistent.json"), Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(read_attention_benchmarks(kData + "microbench-2026-11-26.json", scratch),
                    Catch::Contains("/format"));
}

TEST_CASE("the inference host cost: the paired fast per-layer difference over the layer's launches", "[calibration]") {
  // The shipped profile's two runs (one width each, timed before torch.profiler ran in the process).
  const std::vector<std::string> files = {kData + "inference-host-clean-llama-1b-2026-11-28.json",
                                          kData + "inference-host-clean-llama-8b-2026-11-28.json"};
  // Recomputed here: per width and forward, per_layer_fast_s / launches_per_layer; outside,
  // the 2-layer model's fast median less two layers and its other launches at that rate.
  std::vector<double> rates, outside;
  for (const auto& file : files) {
    const auto doc = read_json_file(file);
    for (const auto& [width, kinds] : doc.at("paired").items())
      for (const char* kind : {"decode", "prefill"}) {
        const double layer = kinds.at(kind).at("per_layer_fast_s"), launches = kinds.at(kind).at("launches_per_layer");
        rates.push_back(layer / launches);
        for (const auto& c : doc.at("cases"))
          if (c.at("width_of") == width && c.at("kind") == kind && c.at("layers") == 2)
            outside.push_back(c.at("fast_median_s").get<double>() - 2 * layer -
                              (c.at("launches").get<double>() - 2 * launches) * rates.back());
      }
  }
  REQUIRE(rates.size() == 4);
  const InferenceHost h = fit_inference_host(files);
  std::printf("inference host: per kernel expected %.3f us, fitted %.3f us; outside expected %.3f ms, fitted %.3f ms\n",
              median(rates) * 1e6, h.per_kernel * 1e6, median(outside) * 1e3, h.forward * 1e3);
  CHECK(h.per_kernel == Approx(median(rates)).epsilon(1e-12));
  CHECK(h.forward == Approx(median(outside)).epsilon(1e-12));
  // A host that never ran fast leaves per_layer_fast_s null: an error with its path, not a crash.
  const auto doc = read_json_file(files[0]);
  auto slow = doc;
  slow["paired"]["llama-1b"]["decode"]["per_layer_fast_s"] = nullptr;
  CHECK_THROWS_WITH(fit_inference_host({bad("inference-host-slow.json", slow)}),
                    Catch::Contains("/paired/llama-1b/decode") && Catch::Contains("per_layer_fast_s"));
  auto other = doc;
  other["format"] = "clustersim-host-dispatch/1";
  CHECK_THROWS_WITH(fit_inference_host({bad("inference-host-format.json", other)}), Catch::Contains("/format"));
}

TEST_CASE("the DTensor bias cost: biased minus unbiased host-bound steps per biased module, at the profile's host speed",
          "[calibration]") {
  const std::string file = kData + "dtensor-bias-2026-11-27.json";
  const nlohmann::json doc = read_json_file(file);
  std::vector<double> on, off;
  for (const auto& r : doc["runs"]) (r["bias"].get<bool>() ? on : off).push_back(r["step_time_s"].get<double>());
  const double eager = 23.7e-6;
  const double per_kernel_there = doc["reference"]["step_time_s"].get<double>() / doc["reference"]["kernels_per_step"].get<double>();
  const double expected = (median(on) - median(off)) / (24.0 * 6.0) * eager / per_kernel_there;
  const double fitted = fit_dtensor_bias(file, eager);
  INFO("biased " << median(on) << " s, unbiased " << median(off) << " s a step, " << per_kernel_there * 1e6
                 << " us a kernel on that machine: expected " << expected * 1e6 << " us, fitted " << fitted * 1e6 << " us");
  CHECK(fitted == Approx(expected).epsilon(1e-12));
  CHECK(fitted > 0);

  nlohmann::json no_off = doc;
  no_off["runs"] = nlohmann::json::array({doc["runs"][2]});
  CHECK_THROWS_WITH(fit_dtensor_bias(bad("bias-no-off.json", no_off), eager), Catch::Contains("/runs"));
  nlohmann::json bad_step = doc;
  bad_step["runs"][1]["step_time_s"] = -1;
  CHECK_THROWS_WITH(fit_dtensor_bias(bad("bias-bad-step.json", bad_step), eager), Catch::Contains("/runs/1/step_time_s"));
  nlohmann::json bad_ref = doc;
  bad_ref["reference"].erase("kernels_per_step");
  CHECK_THROWS_WITH(fit_dtensor_bias(bad("bias-bad-ref.json", bad_ref), eager),
                    Catch::Contains("/reference/kernels_per_step"));
  CHECK_THROWS_WITH(fit_dtensor_bias(kData + "host-dispatch-2026-11-26.json", eager), Catch::Contains("/format"));
}

TEST_CASE("the DTensor optimizer cost: the slope over K of the DTensor AdamW step beyond the plain one, per parameter, "
          "at the profile's host speed",
          "[calibration]") {
  // Recomputed here from one file, rank by rank: ((D32 - D8) - (P32 - P8)) / (n32 - n8) x
  // eager / (this rank's median host time per kernel over the file's transformer blocks).
  const std::string file = kData + "dtensor-host-2026-11-27/dtensor-params-run4.json";
  const nlohmann::json doc = read_json_file(file);
  const double eager = 23.7e-6;
  std::vector<double> expected_all;
  for (int r = 0; r < 2; ++r) {
    std::vector<double> rates;
    for (const auto& c : doc["cases"])
      if (c["case"].get<std::string>().rfind("block ", 0) == 0)
        rates.push_back(c["host_per_call_s_per_rank"][r].get<double>() / c["kernels_per_call_per_rank"][r].get<double>());
    for (bool bias : {false, true}) {
      double t[2][2] = {}, n[2] = {};
      for (const auto& c : doc["cases"]) {
        if (c.value("part", "") != "optimizer" || c["bias"].get<bool>() != bias) continue;
        const int dt = c["model"] == "dtensor", k32 = c["modules"] == 32;
        t[dt][k32] = c["host_per_call_s_per_rank"][r].get<double>();
        n[k32] = c["param_tensors"].get<double>();
      }
      const double per = ((t[1][1] - t[1][0]) - (t[0][1] - t[0][0])) / (n[1] - n[0]) * eager / median(rates);
      std::printf("rank %d, bias %d: %.1f us a kernel on that machine, DTensor parameter %.2f us at the profile's speed\n",
                  r, int(bias), median(rates) * 1e6, per * 1e6);
      expected_all.push_back(per);
    }
  }
  const double expected = median(expected_all), fitted = fit_dtensor_optimizer({file}, eager);
  std::printf("expected %.3f us, fitted %.3f us\n", expected * 1e6, fitted * 1e6);
  CHECK(fitted == Approx(expected).epsilon(1e-12));
  CHECK(fitted > 0);

  nlohmann::json no_rank = doc;
  for (std::size_t i = 0; i < no_rank["cases"].size(); ++i)
    if (no_rank["cases"][i].value("part", "") == "optimizer") {
      no_rank["cases"][i]["host_per_call_s_per_rank"] = nlohmann::json::array({1e-3});
      CHECK_THROWS_WITH(fit_dtensor_optimizer({bad("opt-no-rank.json", no_rank)}, eager),
                        Catch::Contains("/cases/" + std::to_string(i) + "/host_per_call_s_per_rank") &&
                            Catch::Contains("rank 1"));
      break;
    }
  nlohmann::json no_params = doc;
  for (std::size_t i = 0; i < no_params["cases"].size(); ++i)
    if (no_params["cases"][i].value("part", "") == "optimizer") {
      no_params["cases"][i]["param_tensors"] = 0;
      CHECK_THROWS_WITH(fit_dtensor_optimizer({bad("opt-no-params.json", no_params)}, eager),
                        Catch::Contains("/cases/" + std::to_string(i) + "/param_tensors"));
      break;
    }
  nlohmann::json no_blocks = doc;
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& c : doc["cases"])
    if (c["case"].get<std::string>().rfind("block ", 0) != 0) kept.push_back(c);
  no_blocks["cases"] = kept;
  CHECK_THROWS_WITH(fit_dtensor_optimizer({bad("opt-no-blocks.json", no_blocks)}, eager), Catch::Contains("block"));
  CHECK_THROWS_WITH(fit_dtensor_optimizer({kData + "dtensor-bias-2026-11-27.json"}, eager), Catch::Contains("/format"));
}

TEST_CASE("the DTensor loss cost: loss_parallel beyond the plain cross entropy, forward and backward, at the profile's "
          "host speed",
          "[calibration]") {
  // Recomputed here from one file: per rank, forward (D_f - P_f) and backward
  // ((D_fb - D_f) - (P_fb - P_f)), x eager / (the rank's median host time per kernel over the
  // file's transformer blocks); the medians over the ranks.
  const std::string file = kData + "dtensor-host-2026-11-27/call9-loss-r2.json";
  const nlohmann::json doc = read_json_file(file);
  const double eager = 23.7e-6;
  std::vector<double> fwd, bwd;
  for (int r = 0; r < 2; ++r) {
    std::vector<double> rates;
    std::map<std::string, double> host;
    for (const auto& c : doc["cases"]) {
      const std::string name = c["case"].get<std::string>();
      if (name.rfind("block ", 0) == 0)
        rates.push_back(c["host_per_call_s_per_rank"][r].get<double>() / c["kernels_per_call_per_rank"][r].get<double>());
      if (name.rfind("loss ", 0) == 0) host[name] = c["host_per_call_s_per_rank"][r].get<double>();
    }
    const double scale = eager / median(rates);
    fwd.push_back((host["loss dtensor forward"] - host["loss plain forward"]) * scale);
    bwd.push_back(((host["loss dtensor forward+backward"] - host["loss dtensor forward"]) -
                   (host["loss plain forward+backward"] - host["loss plain forward"])) * scale);
    std::printf("rank %d: %.1f us a kernel on that machine; loss_parallel %.0f us forward, %.0f us backward at the "
                "profile's speed\n", r, median(rates) * 1e6, fwd.back() * 1e6, bwd.back() * 1e6);
  }
  const auto fitted = fit_dtensor_loss({file}, eager);
  std::printf("expected %.1f / %.1f us, fitted %.1f / %.1f us\n", median(fwd) * 1e6, median(bwd) * 1e6,
              fitted.first * 1e6, fitted.second * 1e6);
  CHECK(fitted.first == Approx(median(fwd)).epsilon(1e-12));
  CHECK(fitted.second == Approx(median(bwd)).epsilon(1e-12));

  nlohmann::json missing = doc;
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& c : doc["cases"])
    if (c["case"] != "loss dtensor forward") kept.push_back(c);
  missing["cases"] = kept;
  CHECK_THROWS_WITH(fit_dtensor_loss({bad("loss-missing.json", missing)}, eager),
                    Catch::Contains("/cases") && Catch::Contains("loss dtensor forward"));
  nlohmann::json bad_fig = doc;
  for (std::size_t i = 0; i < bad_fig["cases"].size(); ++i)
    if (bad_fig["cases"][i]["case"] == "loss plain forward") {
      bad_fig["cases"][i]["host_per_call_s_per_rank"][1] = -1;
      CHECK_THROWS_WITH(fit_dtensor_loss({bad("loss-bad-figure.json", bad_fig)}, eager),
                        Catch::Contains("/cases/" + std::to_string(i) + "/host_per_call_s_per_rank") &&
                            Catch::Contains("rank 1"));
    }
  CHECK_THROWS_WITH(fit_dtensor_loss({kData + "host-dispatch-2026-11-26.json"}, eager), Catch::Contains("/cases"));
}

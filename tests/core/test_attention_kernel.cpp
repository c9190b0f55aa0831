// Which fused-attention kernels a training run reaches (strategies/rules.hpp
// fused_attention_kernel, training.attention_kernel) and the cuDNN curve the H100 profile
// carries beside FlashAttention-2's (calibration/data/h100-sxm5-80gb/sdpa-cudnn-2026-11-27.json,
// measure_sdpa_backends.py).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "costmodel/hardware.hpp"
#include "costmodel/kernels.hpp"
#include "scenarios/json_reader.hpp"
#include "scenarios/scenario.hpp"
#include "strategies/rules.hpp"
#include "strategies/validation.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {
// The built-in default scenario on `gpu` at `precision` (amp-* defaults to pytorch-ddp,
// mixed-* to megatron), with `kernel` written when not empty.
Scenario scenario_on(const std::string& gpu, const std::string& precision, const std::string& kernel = "") {
  json doc = parse_json_text(default_scenario_text(), "<default>");
  doc["cluster"]["gpu"] = gpu;
  doc["training"]["precision"] = precision;
  if (!kernel.empty()) doc["training"]["attention_kernel"] = kernel;
  Diagnostics diag("<test>");
  Scenario s = parse_scenario(doc, diag);
  REQUIRE(diag.ok());
  return s;
}

AttentionKernel kernel_of(const Scenario& s) {
  Diagnostics diag("<test>");
  const ClusterModel c = resolve_cluster(s.cluster, diag);
  REQUIRE(diag.ok());
  return fused_attention_kernel(s.training, c.gpu);
}
}  // namespace

TEST_CASE("attention kernel: eager PyTorch on Hopper reaches cuDNN's, Megatron and older GPUs FlashAttention-2's",
          "[rules][attention]") {
  struct Case {
    const char *gpu, *precision, *written;
    AttentionKernel expected;
  };
  for (const Case& c : std::vector<Case>{
           {"h100-sxm5-80gb", "amp-bf16", "", AttentionKernel::cudnn},     // SDPA's cuDNN-first order on 9.0
           {"h200-sxm-141gb", "amp-bf16", "", AttentionKernel::cudnn},     // its own measured cuDNN curve (9.0)
           {"h200-sxm-141gb-datasheet", "amp-bf16", "", AttentionKernel::cudnn},  // the H100's curve carried
           {"h100-sxm5-80gb", "mixed-bf16", "", AttentionKernel::flash2},  // megatron: FlashAttention-2's curve
           {"a100-sxm4-80gb", "amp-bf16", "", AttentionKernel::flash2},    // 8.0: flash first
           {"b200-sxm-180gb", "amp-bf16", "", AttentionKernel::flash2},    // 10.0, but no cuDNN curve measured there
           {"h100-sxm5-80gb", "amp-bf16", "flash2", AttentionKernel::flash2},
           {"h100-sxm5-80gb", "mixed-bf16", "cudnn", AttentionKernel::cudnn},
       }) {
    const AttentionKernel k = kernel_of(scenario_on(c.gpu, c.precision, c.written));
    std::printf("%-16s %-10s written %-7s -> %s (expected %s)\n", c.gpu, c.precision, *c.written ? c.written : "-",
                std::string(to_string(k)).c_str(), std::string(to_string(c.expected)).c_str());
    CHECK(k == c.expected);
  }
}

TEST_CASE("attention kernel: the cluster a scenario resolves carries the curve of its kernels", "[rules][attention]") {
  const auto h100 = find_gpu_profile("h100-sxm5-80gb");
  REQUIRE(h100);
  REQUIRE(h100->calibration.attention_cudnn.calibrated());
  REQUIRE(h100->compute_capability == "9.0");
  // The measured cuDNN time of one shape (b 2, 32 heads, s 8192, d 128, causal), back to
  // back, beside what the resolved cluster's kernel model gives for it.
  const json data =
      read_json_file(std::string(CLUSTERSIM_SOURCE_DIR) + "/calibration/data/h100-sxm5-80gb/sdpa-cudnn-2026-11-27.json");
  REQUIRE(data.at("backend") == "cudnn");
  double measured_f = 0, measured_b = 0;
  for (const auto& r : data.at("results"))
    if (r.at("batch") == 2 && r.at("heads") == 32 && r.at("kv_heads") == 32 && r.at("seq") == 8192 &&
        r.at("head_dim") == 128) {
      measured_f = r.at("forward_s");
      measured_b = r.at("backward_s");
    }
  REQUIRE(measured_f > 0);
  for (const char* precision : {"amp-bf16", "mixed-bf16"}) {
    const Scenario s = scenario_on("h100-sxm5-80gb", precision);
    Diagnostics diag("<test>");
    const ClusterModel c = scenario_cluster(s, diag);
    REQUIRE(diag.ok());
    const bool cudnn = fused_attention_kernel(s.training, c.gpu) == AttentionKernel::cudnn;
    const AttentionCalibration& expected = cudnn ? h100->calibration.attention_cudnn : h100->calibration.attention;
    CHECK(c.gpu.calibration.attention.forward_max == expected.forward_max);
    CHECK(c.gpu.calibration.attention.backward_max == expected.backward_max);
    CHECK(c.gpu.calibration.attention.points.size() == expected.points.size());
    const KernelModel km(c.gpu);
    const double f = km.attention_forward(64, 8192, 8192, 128, true, 0, DType::bf16);
    const double b = km.attention_backward(64, 8192, 8192, 128, true, 0, DType::bf16);
    std::printf("%-10s %-6s forward %.3f ms (cuDNN measured %.3f), backward %.3f ms (measured %.3f)\n", precision,
                cudnn ? "cudnn" : "flash2", 1e3 * f, 1e3 * measured_f, 1e3 * b, 1e3 * measured_b);
    if (cudnn) {
      CHECK(std::fabs(f / measured_f - 1) < 0.10);
      CHECK(std::fabs(b / measured_b - 1) < 0.10);
    } else {
      CHECK(f > 1.5 * measured_f);  // FlashAttention-2 at head dim 128: 1.7-1.9x cuDNN's time
    }
  }
}

TEST_CASE("attention kernel: cuDNN's curve carries over only to GPUs of the H100's compute capability", "[attention]") {
  for (const char* name :
       {"h200-sxm-141gb-datasheet", "h800-sxm5-80gb", "a100-sxm4-80gb", "b200-sxm-180gb", "v100-sxm2-32gb"}) {
    const auto p = find_gpu_profile(name);
    REQUIRE(p);
    const bool carried = p->calibration.attention_cudnn.calibrated();
    std::printf("%-24s compute capability %-5s cuDNN attention curve: %s\n", name, p->compute_capability.c_str(),
                carried ? "yes" : "no");
    CHECK(carried == (p->compute_capability == "9.0"));
  }
}

TEST_CASE("attention kernel: bad values name the file's field and the value", "[scenario][attention]") {
  json doc = parse_json_text(default_scenario_text(), "<default>");
  doc["training"]["attention_kernel"] = "xformers";
  Diagnostics bad("<test>");
  (void)parse_scenario(doc, bad);
  REQUIRE_FALSE(bad.ok());
  const std::string what = bad.problems().front().path + ": " + bad.problems().front().message;
  std::printf("%s\n", what.c_str());
  CHECK_THAT(what, Catch::Contains("/training/attention_kernel") && Catch::Contains("xformers"));
  // cuDNN written for a GPU without a measured cuDNN curve (the default is an A100).
  const Scenario s = scenario_on("a100-sxm4-80gb", "amp-bf16", "cudnn");
  Diagnostics diag("<test>");
  (void)scenario_cluster(s, diag);
  REQUIRE_FALSE(diag.ok());
  const std::string msg = diag.problems().front().path + ": " + diag.problems().front().message;
  std::printf("%s\n", msg.c_str());
  CHECK_THAT(msg, Catch::Contains("/training/attention_kernel") && Catch::Contains("a100-sxm4-80gb") &&
                      Catch::Contains("cudnn"));
}

TEST_CASE("attention kernel: a measured run keeps the kernels it forced", "[attention][measured]") {
  CHECK(recorded_attention_kernel(json{{"attention_backend", "flash"}}) == std::optional<std::string>("flash2"));
  CHECK(recorded_attention_kernel(json{{"attention_backend", "cudnn"}}) == std::optional<std::string>("cudnn"));
  CHECK_FALSE(recorded_attention_kernel(json{{"attention_backend", "auto"}}));
  CHECK_FALSE(recorded_attention_kernel(json::object()));
  // The committed one-GPU runs forced flash: their scenario says so, and the rule keeps it.
  const json doc = read_json_file(std::string(CLUSTERSIM_SOURCE_DIR) +
                                  "/calibration/data/h100-sxm5-80gb/measured-parallel-2026-11-26.json");
  const json& run = doc.at("runs").at(0);
  REQUIRE(run.at("environment").at("attention_backend") == "flash");
  const Scenario s = measured_run_scenario(run);
  CHECK(s.training.attention_kernel == AttentionKernelChoice::flash2);
}

// Kernel time model: closed forms of the memory model, and the GEMM efficiency's shape.
#include <catch2/catch.hpp>

#include "costmodel/hardware.hpp"
#include "costmodel/kernels.hpp"

using namespace clustersim;

TEST_CASE("built-in profiles load and carry their sources", "[hardware]") {
  for (const auto& name : builtin_gpu_names()) {
    const auto p = find_gpu_profile(name);
    REQUIRE(p);
    CHECK(p->name == name);
    CHECK(p->peak_fp16 > 0);
    CHECK(p->memory_capacity > 0);
    CHECK_FALSE(p->sources.empty());
  }
  const auto a100 = find_gpu_profile("a100-sxm4-80gb");
  CHECK(a100->peak(DType::bf16) == Approx(312e12));
  CHECK(a100->memory_bandwidth == Approx(2039e9));
  CHECK(find_gpu_profile("v100-sxm2-16gb")->peak(DType::bf16) == 0);  // no bf16 on Volta
  CHECK_FALSE(find_gpu_profile("tpu-v9"));
}

TEST_CASE("memory-bound kernel time is (bytes + half size) / (bandwidth x efficiency) + overhead", "[kernels]") {
  const auto gpu = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(gpu);
  const double bytes = 512e6;
  const double expected = (bytes + gpu.efficiency.memory_half_size) / (gpu.memory_bandwidth * gpu.efficiency.memory) +
                          gpu.efficiency.kernel_overhead;
  INFO("expected " << expected << " s, model " << km.memory(bytes, 1));
  CHECK(km.memory(bytes, 1) == Approx(expected).epsilon(1e-12));
}

TEST_CASE("GEMM efficiency: bounded, rises with size, dips past a full wave", "[kernels]") {
  auto gpu = *find_gpu_profile("a100-sxm4-80gb");
  gpu.calibration = Calibration{};  // the parametric model alone
  const KernelModel km(gpu);
  const double big = km.gemm_efficiency(1, 8192, 8192, 8192);
  CHECK(big <= gpu.efficiency.gemm_max);
  CHECK(big > 0.95 * gpu.efficiency.gemm_max);
  CHECK(km.gemm_efficiency(1, 256, 256, 256) < 0.5 * big);
  // 108 SMs: 108 tiles of 256x128 fill one wave exactly; one more tile row needs a second.
  const double full = km.gemm_efficiency(1, 256 * 12, 128 * 9, 4096);
  const double over = km.gemm_efficiency(1, 256 * 12 + 64, 128 * 9, 4096);
  CHECK(over < full);
  // Time follows FLOPs / (peak x efficiency) for a compute-bound GEMM.
  const double t = km.gemm(1, 8192, 8192, 8192, DType::bf16);
  const double expected = 2.0 * 8192 * 8192 * 8192 / (312e12 * big) + gpu.efficiency.kernel_overhead;
  CHECK(t == Approx(expected).epsilon(1e-9));
}

TEST_CASE("thin GEMMs are bounded by memory bandwidth", "[kernels]") {
  const auto gpu = *find_gpu_profile("a100-sxm4-80gb");
  const KernelModel km(gpu);
  // A matrix-vector product: 2mn FLOPs over ~2mn bytes is far below the ridge point.
  const double t = km.gemm(1, 16384, 1, 16384, DType::bf16);
  const double traffic = (16384.0 * 16384 + 16384 + 16384) * 2 / (gpu.memory_bandwidth * gpu.efficiency.memory);
  CHECK(t == Approx(traffic + gpu.efficiency.kernel_overhead).epsilon(1e-9));
}

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

TEST_CASE("fused attention pads the head dim to FlashAttention's next kernel (a multiple of 32)", "[kernels]") {
  const auto gpu = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(gpu);
  // GPT-2.7B's head dim 80 runs the 96 kernel: the same time as 96, 1.2x the work of 80.
  const double t80 = km.attention_forward(32, 2048, 2048, 80, true, 1e6, DType::bf16);
  const double t96 = km.attention_forward(32, 2048, 2048, 96, true, 1e6, DType::bf16);
  INFO("d 80: " << t80 << " s, d 96: " << t96 << " s");
  CHECK(t80 == Approx(t96).epsilon(1e-12));
  CHECK(km.attention_backward(32, 2048, 2048, 80, true, 1e6, DType::bf16) ==
        Approx(km.attention_backward(32, 2048, 2048, 96, true, 1e6, DType::bf16)).epsilon(1e-12));
  CHECK(km.attention_forward(32, 2048, 2048, 64, true, 1e6, DType::bf16) < t80);
}

TEST_CASE("eager access paths: the H100 profile's kinds carry the measured eager-kernel rates", "[kernels][calibration]") {
  const auto gpu = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(gpu);
  // At 2^29 elements (calibration/data/h100-sxm5-80gb/eager-kernels-graphs-2026-11-28.json), GB/s;
  // noncontiguous is silu on a chunk() (1463) and a transpose's copy (1449).
  const struct {
    MemoryKind kind;
    double bytes, measured;
  } cases[] = {{MemoryKind::strided, 6.0 * (1 << 29), 2097e9},      {MemoryKind::broadcast, 4.0 * (1 << 29), 1593e9},
               {MemoryKind::noncontiguous, 4.0 * (1 << 29), 1456e9}, {MemoryKind::cast_up, 6.0 * (1 << 29), 1980e9},
               {MemoryKind::mixed_add, 10.0 * (1 << 29), 2487e9}};
  for (const auto& c : cases) {
    const double rate = c.bytes / (km.memory(c.bytes, 1, c.kind) - gpu.efficiency.kernel_overhead);
    INFO(to_string(c.kind) << ": measured " << c.measured / 1e9 << " GB/s, model " << rate / 1e9 << " GB/s");
    CHECK(rate == Approx(c.measured).epsilon(0.05));
    const double vectorized = c.bytes / (km.memory(c.bytes, 1) - gpu.efficiency.kernel_overhead);
    CHECK(rate < 0.85 * vectorized);  // every unvectorized path is slower than the vectorized one
  }
  // torch.cat's generic path: one kind over a crop() view's concatenation (679 GB/s), a fresh
  // cache's first one (678) and rotate_half's halves (999): the fit lies between them.
  const double bytes = 4.0 * (1 << 29);
  const double concat = bytes / (km.memory(bytes, 1, MemoryKind::concat) - gpu.efficiency.kernel_overhead);
  std::printf("concat at 2^29 elements: model %.0f GB/s, measured 678-999 GB/s\n", concat / 1e9);
  CHECK(concat > 678e9);
  CHECK(concat < 999e9);
}

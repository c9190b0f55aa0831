// GEMM model: cuBLAS-like kernels tile C into thread-block tiles and run them in waves
// over the SMs. Efficiency = gemm_max x (best tile: tile quality x fraction of the
// last wave and of padded tiles doing useful work) x K / (K + k_half). The profile's
// gemm_max and k_half are defaults until calibration fits them from measurements.
#include "costmodel/kernels.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace clustersim {
namespace {

struct Tile {
  double m, n, quality;  // quality: rate of a full wave of this tile relative to the best
};

// Thread-block tiles of CUTLASS/cuBLAS tensor-core kernels; smaller tiles have lower
// arithmetic intensity per shared-memory byte and run slower when full.
constexpr std::array<Tile, 6> tiles{{{256, 128, 1.0},
                                     {128, 256, 1.0},
                                     {128, 128, 0.95},
                                     {128, 64, 0.85},
                                     {64, 128, 0.85},
                                     {64, 64, 0.70}}};

double ceil_div(double a, double b) { return std::ceil(a / b); }

}  // namespace

double KernelModel::gemm_efficiency(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) const {
  const double sms = std::max(1, gpu_.sms);
  double best = 0;
  for (const auto& t : tiles) {
    const double count = ceil_div(double(m), t.m) * ceil_div(double(n), t.n) * double(batch);
    const double waves = ceil_div(count, sms);
    const double useful = double(m) * double(n) * double(batch) / (waves * sms * t.m * t.n);
    best = std::max(best, t.quality * useful);
  }
  const double kf = double(k) / (double(k) + gpu_.efficiency.gemm_k_half);
  return gpu_.efficiency.gemm_max * best * kf;
}

Seconds KernelModel::gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) const {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return 0;
  const double flops = 2.0 * double(batch) * double(m) * double(n) * double(k);
  const double compute = flops / (gpu_.peak(dtype) * gemm_efficiency(batch, m, n, k));
  const double bytes = (double(m) * k + double(k) * n + double(m) * n) * double(batch) * dtype_bytes(dtype);
  const double traffic = bytes / (gpu_.memory_bandwidth * gpu_.efficiency.memory);
  return std::max(compute, traffic) + gpu_.efficiency.kernel_overhead;
}

Seconds KernelModel::attention_forward(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool causal,
                                       Bytes bytes, DType dtype) const {
  const double work = 4.0 * double(batch) * double(m) * double(n) * double(k) * (causal ? 0.5 : 1.0);
  const double compute = work / (gpu_.peak(dtype) * gpu_.efficiency.attention);
  return std::max(compute, bytes / (gpu_.memory_bandwidth * gpu_.efficiency.memory)) + gpu_.efficiency.kernel_overhead;
}

Seconds KernelModel::attention_backward(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool causal,
                                        Bytes bytes, DType dtype) const {
  const double work = 2.5 * 4.0 * double(batch) * double(m) * double(n) * double(k) * (causal ? 0.5 : 1.0);
  const double compute = work / (gpu_.peak(dtype) * gpu_.efficiency.attention);
  return std::max(compute, bytes / (gpu_.memory_bandwidth * gpu_.efficiency.memory)) +
         2 * gpu_.efficiency.kernel_overhead;
}

Seconds KernelModel::memory(Bytes bytes, int kernels) const {
  if (bytes <= 0 && kernels <= 0) return 0;
  // Rate ramps with size: bw * eff * bytes / (bytes + half)  =>  time below.
  const double t = (bytes + (bytes > 0 ? gpu_.efficiency.memory_half_size : 0.0)) /
                   (gpu_.memory_bandwidth * gpu_.efficiency.memory);
  return t + kernels * gpu_.efficiency.kernel_overhead;
}

}  // namespace clustersim

// GEMM model: cuBLAS-like kernels tile C into thread-block tiles and run them in waves
// over the SMs. Efficiency = gemm_max x (best tile: tile quality x fraction of the
// last wave and of padded tiles doing useful work) x K / (K + k_half). The profile's
// gemm_max and k_half are defaults until calibration fits them from measurements. A
// transferred profile's GEMMs never exceed the best rate a published shape sweep
// reached on that GPU (its calibration's ceiling).
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

double KernelModel::tile_utilisation(int sms_count, std::int64_t batch, std::int64_t m, std::int64_t n) {
  const double sms = std::max(1, sms_count);
  double best = 0;
  for (const auto& t : tiles) {
    const double count = ceil_div(double(m), t.m) * ceil_div(double(n), t.n) * double(batch);
    const double waves = ceil_div(count, sms);
    const double useful = double(m) * double(n) * double(batch) / (waves * sms * t.m * t.n);
    best = std::max(best, t.quality * useful);
  }
  return best;
}

namespace {
// Inverse-distance interpolation of a log ratio (measured / parametric time) over the
// nearest measured points in log2 shape space. A prior point of ratio 1 at distance 2
// (a factor of 4 in one dimension) pulls far-away queries back to the parametric model.
template <std::size_t D, typename P, typename Coords, typename Value>
double interpolate(const std::vector<P>& points, const std::array<double, D>& q, Coords coords, Value value) {
  if (points.empty()) return 1.0;
  constexpr int kNearest = 4;
  constexpr double kPriorDistance2 = 4.0, kSoft = 0.25;
  std::array<std::pair<double, double>, kNearest> best;  // (distance^2, log ratio)
  best.fill({1e300, 0.0});
  for (const auto& p : points) {
    const std::array<double, D> x = coords(p);
    double d2 = 0;
    for (std::size_t i = 0; i < D; ++i) d2 += (q[i] - x[i]) * (q[i] - x[i]);
    if (d2 >= best.back().first) continue;
    std::size_t i = best.size() - 1;
    while (i > 0 && best[i - 1].first > d2) {
      best[i] = best[i - 1];
      --i;
    }
    best[i] = {d2, value(p)};
  }
  double wsum = 1.0 / (kPriorDistance2 + kSoft), acc = 0;
  for (const auto& [d2, lr] : best) {
    if (d2 >= 1e299) continue;
    const double w = 1.0 / (d2 + kSoft);
    wsum += w;
    acc += w * lr;
  }
  return std::exp(acc / wsum);
}

double correction(const GemmCalibration& c, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k) {
  using P = GemmCalibration::Point;
  const std::array<double, 4> q{std::log2(double(batch)), std::log2(double(m)), std::log2(double(n)), std::log2(double(k))};
  return interpolate(c.points, q, [](const P& p) { return std::array<double, 4>{p.log_batch, p.log_m, p.log_n, p.log_k}; },
                     [](const P& p) { return p.log_ratio; });
}
}  // namespace

double KernelModel::attention_efficiency(std::int64_t batch, std::int64_t s, std::int64_t d, bool backward) const {
  const auto& a = gpu_.calibration.attention;
  if (!a.calibrated()) return gpu_.efficiency.attention;
  using P = AttentionCalibration::Point;
  const double max = backward ? a.backward_max : a.forward_max;
  const double half = backward ? a.backward_s_half : a.forward_s_half;
  const std::array<double, 3> q{std::log2(double(batch)), std::log2(double(s)), std::log2(double(d))};
  const double ratio = interpolate(
      a.points, q, [](const P& p) { return std::array<double, 3>{p.log_bh, p.log_s, p.log_d}; },
      [backward](const P& p) { return backward ? p.log_ratio_bwd : p.log_ratio_fwd; });
  return max * double(s) / (double(s) + half) / ratio;
}

double KernelModel::gemm_efficiency(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                                    DType dtype) const {
  const auto& cal = gpu_.calibration.gemm[static_cast<std::size_t>(dtype)];
  const double gemm_max = cal.calibrated() ? cal.gemm_max : gpu_.efficiency.gemm_max;
  const double k_half = cal.calibrated() ? cal.k_half : gpu_.efficiency.gemm_k_half;
  const double kf = double(k) / (double(k) + k_half);
  const double parametric = gemm_max * tile_utilisation(gpu_.sms, batch, m, n) * kf;
  if (!cal.calibrated()) return parametric;
  const double eff = parametric / correction(cal, batch, m, n, k);
  return cal.ceiling > 0 ? std::min(eff, cal.ceiling) : eff;
}

Seconds KernelModel::gemm_kernel(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) const {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return 0;
  const double flops = 2.0 * double(batch) * double(m) * double(n) * double(k);
  const double compute = flops / (gpu_.peak(dtype) * gemm_efficiency(batch, m, n, k, dtype));
  const double bytes = (double(m) * k + double(k) * n + double(m) * n) * double(batch) * dtype_bytes(dtype);
  const double traffic = bytes / (gpu_.memory_bandwidth * gpu_.efficiency.memory);
  return std::max(compute, traffic);
}

Seconds KernelModel::gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) const {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return 0;
  return gemm_kernel(batch, m, n, k, dtype) + gpu_.efficiency.kernel_overhead;
}

namespace {
// The head dim fused attention computes with. FlashAttention-2's kernels are instantiated
// for head dims 32, 64, ..., 256; any other runs the next one up on zero-padded lanes
// (GPT-2.7B's 80 takes the 96 kernel, as the profiles' Flash_fwd_kernel_traits<96, ...>
// show).
std::int64_t attention_head_dim(std::int64_t d) {
  for (std::int64_t p = 32; p <= 256; p += 32)
    if (d <= p) return p;
  return d;
}
}  // namespace

Seconds KernelModel::attention_forward(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool causal,
                                       Bytes bytes, DType dtype) const {
  k = attention_head_dim(k);
  const double work = 4.0 * double(batch) * double(m) * double(n) * double(k) * (causal ? 0.5 : 1.0);
  const double compute = work / (gpu_.peak(dtype) * attention_efficiency(batch, m, k, false));
  return std::max(compute, bytes / (gpu_.memory_bandwidth * gpu_.efficiency.memory)) + gpu_.efficiency.kernel_overhead;
}

Seconds KernelModel::attention_backward(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool causal,
                                        Bytes bytes, DType dtype) const {
  k = attention_head_dim(k);
  const double work = 2.5 * 4.0 * double(batch) * double(m) * double(n) * double(k) * (causal ? 0.5 : 1.0);
  const double compute = work / (gpu_.peak(dtype) * attention_efficiency(batch, m, k, true));
  return std::max(compute, bytes / (gpu_.memory_bandwidth * gpu_.efficiency.memory)) +
         2 * gpu_.efficiency.kernel_overhead;
}

namespace {
struct MemoryRate {
  double rate, half;  // bytes/s at full size; bytes at which half the rate is reached
};
MemoryRate memory_rate(const GpuProfile& gpu, MemoryKind kind) {
  const auto& e = gpu.efficiency;
  const auto i = static_cast<std::size_t>(kind);
  const double eff = e.memory_by_kind[i] > 0 ? e.memory_by_kind[i] : e.memory;
  const double half = e.memory_by_kind[i] > 0 ? e.memory_half_size_by_kind[i] : e.memory_half_size;
  return {gpu.memory_bandwidth * eff, half};
}
}  // namespace

// Rate ramps with size: bw * eff * bytes / (bytes + half)  =>  (bytes + half) / (bw * eff).
Seconds KernelModel::memory_stream(Bytes bytes, MemoryKind kind) const {
  return bytes > 0 ? bytes / memory_rate(gpu_, kind).rate : 0.0;
}

Seconds KernelModel::memory_fixed(int kernels, MemoryKind kind) const {
  const MemoryRate r = memory_rate(gpu_, kind);
  return r.half / r.rate + kernels * gpu_.efficiency.kernel_overhead;
}

Seconds KernelModel::memory(Bytes bytes, int kernels, MemoryKind kind) const {
  if (bytes <= 0 && kernels <= 0) return 0;
  if (bytes <= 0) return kernels * gpu_.efficiency.kernel_overhead;
  return memory_stream(bytes, kind) + memory_fixed(kernels, kind);
}

}  // namespace clustersim

// Time of one kernel on one GPU: GEMMs (tile and wave quantisation, K-loop prologue,
// a memory-bandwidth floor), fused attention, and memory-bound kernels (bandwidth with
// a size-dependent ramp). Parameters come from the GPU profile; calibration refits them.
#pragma once
#include <cstdint>

#include "costmodel/hardware.hpp"

namespace clustersim {

class KernelModel {
 public:
  explicit KernelModel(const GpuProfile& gpu) : gpu_(gpu) {}

  // C[batch,m,n] = A[batch,m,k] B[batch,k,n] in `dtype` (operands of dtype_bytes each).
  Seconds gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) const;
  // GPU time of the GEMM kernel alone (no launch overhead): what the calibration
  // microbenchmarks measure.
  Seconds gemm_kernel(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, DType dtype) const;
  // The parametric model alone (no calibrated correction), with explicit parameters:
  // what the calibration fit adjusts.
  static double tile_utilisation(int sms, std::int64_t batch, std::int64_t m, std::int64_t n);
  // Fraction of the dtype's peak the GEMM reaches: the parametric model, corrected by
  // the calibrated measurements near this shape when the profile has them.
  double gemm_efficiency(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                         DType dtype = DType::bf16) const;
  // Fused (flash) attention over batch*heads = `batch`, query length m, key length n,
  // head dim k. Backward recomputes the scores: 2.5x the forward work.
  Seconds attention_forward(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool causal,
                            Bytes bytes, DType dtype) const;
  Seconds attention_backward(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, bool causal,
                             Bytes bytes, DType dtype) const;
  // Fraction of the peak reached by fused attention (causal work counted once), forward
  // or backward: calibrated when the profile has measurements, else the default.
  double attention_efficiency(std::int64_t batch, std::int64_t s, std::int64_t d, bool backward) const;
  // A memory-bound kernel (or `kernels` of them) moving `bytes` in total.
  Seconds memory(Bytes bytes, int kernels, MemoryKind kind = MemoryKind::elementwise) const;
  // memory() is affine in the bytes moved (for bytes > 0): memory_stream(bytes) plus
  // memory_fixed(kernels), the ramp's half size at full rate and the launch costs. Rules
  // that a consumer sums op by op use the two parts to add the fixed part once.
  Seconds memory_stream(Bytes bytes, MemoryKind kind = MemoryKind::elementwise) const;
  Seconds memory_fixed(int kernels, MemoryKind kind = MemoryKind::elementwise) const;

  const GpuProfile& gpu() const { return gpu_; }

 private:
  const GpuProfile& gpu_;
};

}  // namespace clustersim

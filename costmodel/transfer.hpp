// Carrying a calibrated GPU profile over to a GPU nobody here can measure.
//
// A transferred profile keeps the target's datasheet (SMs, peaks per compute type, HBM
// capacity and bandwidth, NVLink, PCIe) and takes the *shapes* the reference GPU's
// calibration measured: GEMM efficiency over shape (the tile and wave model runs with
// the target's SM count; the measured residuals by shape are kept), fused-attention
// efficiency over sequence length, memory-bound efficiency over size per kernel kind,
// per-kernel overhead, host dispatch, compute/communication interference and NCCL's
// efficiency by message size. What differs between generations moves each curve:
//
//   achievable fraction of peak (GEMM per dtype, attention, HBM)
//       = reference's calibrated fraction x (published fraction on the target /
//         published fraction on the reference), both from the same public benchmark;
//         1 when nobody published the pair (the reference's fraction is kept).
//   GEMM ceiling (per dtype) = the target's published rate / its datasheet peak: the
//       published figure is the best a sweep of shapes reached (Bekman's maximum
//       achievable matmul FLOPS), so no shape may run faster. The reference's curve,
//       moved by the ratio above, keeps residuals by shape that its own measurements
//       (cuBLASLt's top heuristic, back to back) put above its published maximum, and
//       on a GPU with fewer, slower SMs the K-loop and wave terms lift the curve further:
//       without the ceiling the A100 reached 95.5% of peak at 16384x4096x2048 where the
//       sweep found at best 86.9%. 0 (no ceiling) when nobody published the figure.
//   GEMM k_half (K at which the K-loop prologue costs half the rate)
//       scales with tensor-core throughput per SM: the prologue takes the same time,
//       and a faster SM needs a longer K loop to hide it.
//   memory-bound half size (bytes at which a kernel reaches half its rate)
//       scales with HBM bandwidth: Little's law, the same latency at a higher rate
//       needs more bytes in flight.
//   NCCL bus bandwidth scales with the NVLink bandwidth per GPU, and so do the message
//       sizes of its efficiency-by-size curve (the latency to hide is the same, the bytes
//       that hide it fewer on slower links); the per-buffer term scales with HBM
//       bandwidth; latencies are kept.
// No per-model constant enters: the only inputs are datasheets and cited benchmarks.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "costmodel/hardware.hpp"

namespace clustersim {

// Apply the rules above. `reference` must be calibrated; `target` holds the datasheet
// figures and its TransferSpec. `notes` (optional) receives one line per rule applied.
GpuProfile transfer_profile(const GpuProfile& reference, const GpuProfile& target,
                            std::vector<std::string>* notes = nullptr);

// The sources of a transferred profile's datasheet: what transfer_profile appended (its
// line on the figures it moved and the published pairs' sources) taken off again, for a fit
// that replaces the transferred figures with measured ones.
std::vector<std::string> datasheet_sources(const GpuProfile& transferred);

// The ratio of achievable fractions of peak that a published pair implies:
// (target_rate / target_peak) / (reference_rate / reference_peak); 1 when absent.
double published_fraction_ratio(const PublishedPair& pair, double target_peak, double reference_peak);

// The best fraction of its peak a GEMM may reach on the target: target_rate / target_peak
// of the published pair (capped below 1); 0 when absent.
double published_ceiling(const PublishedPair& pair, double target_peak);

// Tensor-core throughput per SM of the target over the reference's, for one dtype.
double per_sm_throughput_ratio(const GpuProfile& target, const GpuProfile& reference, DType t);

}  // namespace clustersim

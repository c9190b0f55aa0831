// GPU hardware profiles: datasheet peaks plus the efficiency figures the cost model
// needs. Built-in profiles are data files (costmodel/profiles/*.json) compiled into
// the binary; calibrated profiles are files of the same format.
#pragma once
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "scenarios/diagnostics.hpp"
#include "scenarios/units.hpp"

namespace clustersim {

enum class DType { fp32, tf32, fp16, bf16, fp8 };
std::string_view to_string(DType);
double dtype_bytes(DType);

// Memory-bound kernels differ: a copy streams at full rate, a norm or softmax reduces
// along rows first, the optimizer step touches several fp32 streams at once. Eager
// PyTorch's elementwise kernels (TensorIterator) also differ by how their operands lie:
// contiguous operands of one dtype take the vectorized path (elementwise); a strided
// view, a broadcast operand or a dtype cast on load takes the unvectorized path with an
// offset computation per element, which limits it to a rate of elements rather than bytes:
//  strided        a binary op with a strided-view operand (x[..., :d] * c; silu(gate) * up
//                 with up a chunk() of the fused gate/up output)
//  broadcast      a binary op with an operand broadcast over batch and heads and a
//                 transposed-view operand (RoPE's x1 * cos on q of [b, h, s, d] viewed
//                 from [b, s, h, d])
//  noncontiguous  a unary op or copy reading a non-contiguous input (silu of a chunk(),
//                 transpose(...).contiguous(), writing a gradient into a slice)
//  cast_up        bf16 -> fp32 conversion (autocast's gradients back to fp32 weights and
//                 norm inputs: LoadWithCast, unrolled)
//  mixed_add      fp32 + bf16 -> fp32 (the fp32 residual stream plus a bf16 branch)
//  concat         torch.cat with an input that is not contiguous: PyTorch's generic
//                 CatArrayBatchedCopy, one element per thread (rotate_half's cat of two
//                 half-width views; a DynamicCache update whose new K or V keeps the
//                 projection's [b, s, h, d] layout, or whose cache is a crop() view). With
//                 every input contiguous torch.cat takes its vectorized kernel: elementwise.
// The cast down (fp32 -> bf16) is vectorized: elementwise.
enum class MemoryKind { elementwise, norm, softmax, optimizer, strided, broadcast, noncontiguous, cast_up, mixed_add, concat };
constexpr std::array<MemoryKind, 10> kMemoryKinds{MemoryKind::elementwise,   MemoryKind::norm,    MemoryKind::softmax,
                                                  MemoryKind::optimizer,     MemoryKind::strided, MemoryKind::broadcast,
                                                  MemoryKind::noncontiguous, MemoryKind::cast_up, MemoryKind::mixed_add,
                                                  MemoryKind::concat};
std::string_view to_string(MemoryKind);

struct Efficiency {
  double gemm_max = 0.8;       // fraction of peak a large, well-shaped GEMM reaches
  double gemm_k_half = 48;     // K at which a GEMM loses half its rate to the K loop prologue
  double attention = 0.5;      // fraction of peak of fused (flash) attention
  double memory = 0.7;         // fraction of HBM bandwidth of large memory-bound kernels
  Bytes memory_half_size = 1 << 20;  // transfer size reaching half of that rate
  // Per kind of memory-bound kernel (index: MemoryKind), from calibration; 0 falls back
  // to `memory` and `memory_half_size`.
  std::array<double, kMemoryKinds.size()> memory_by_kind{};
  std::array<Bytes, kMemoryKinds.size()> memory_half_size_by_kind{};
  Seconds kernel_overhead = 3e-6;    // per kernel, on the GPU timeline
  // A launch the host waits out (CUDA_LAUNCH_BLOCKING=1): an empty kernel launched and
  // synchronized, host to host; and what the host spends submitting one asynchronous
  // launch (part of the eager host time per kernel). 0: not measured.
  Seconds sync_launch_latency = 0, launch_submit = 0;
  double collective_nvlink = 0.75;   // NCCL bus bandwidth / NVLink bandwidth
  double collective_network = 0.9;   // NCCL bus bandwidth / NIC bandwidth
};

// Measured GEMM behaviour of one compute type: the parametric model's two fitted
// numbers, and the measured/model time ratio at each measured shape, interpolated
// over shapes (log space) by the kernel model.
struct GemmCalibration {
  double gemm_max = 0;  // 0: not calibrated for this dtype
  double k_half = 0;
  // The best fraction of peak a published sweep of shapes reached on this GPU (a
  // transferred profile's maximum achievable matmul FLOPS over the datasheet peak): no
  // shape runs faster. 0: none (a calibrated profile's own measurements bound it).
  double ceiling = 0;
  struct Point {
    double log_batch, log_m, log_n, log_k;  // log2 of the shape
    double log_ratio;                      // log(measured time / parametric time)
  };
  std::vector<Point> points;
  bool calibrated() const { return gemm_max > 0; }
};

// Measured fused (flash) attention, 16-bit, causal: efficiency = max x s / (s + s_half)
// for forward and backward, corrected by the measured ratio near (batch*heads, s, d).
struct AttentionCalibration {
  double forward_max = 0, forward_s_half = 0, backward_max = 0, backward_s_half = 0;
  struct Point {
    double log_bh, log_s, log_d;             // log2 of batch*heads, sequence, head dim
    double log_ratio_fwd, log_ratio_bwd;     // log(measured / parametric time)
  };
  std::vector<Point> points;
  std::string source;
  bool calibrated() const { return forward_max > 0 && backward_max > 0; }
};

// The fused attention kernels a training run's attention calls reach (the software picks
// them; strategies/rules.hpp fused_attention_kernel):
//  flash2  FlashAttention-2 (PyTorch SDPA's flash backend, the flash-attn package)
//  cudnn   cuDNN's fused flash attention (PyTorch SDPA's cuDNN backend, Transformer
//          Engine's FusedAttention): its own kernels per architecture (sm90's use wgmma)
enum class AttentionKernel { flash2, cudnn };
std::string_view to_string(AttentionKernel);

// Kernels one 16-bit linear (a GEMM without bias, as PyTorch calls cuBLAS) launches: the
// GEMM, and where cuBLAS's heuristic picks them a split-K reduction or a memset, measured
// over a grid of shapes (calibration/serving/measure_gemm_launches.py). The host pays for
// every launch. Empty: one a call.
struct GemmLaunches {
  struct Point {
    double log_m, log_n, log_k;  // log2 of tokens, outputs, inputs
    double kernels;              // per call
  };
  std::vector<Point> points;
  std::string source;
  // At the measured point nearest in (log2 M, log2 N, log2 K); the first of equals.
  double per_call(double m, double n, double k) const;
};

struct Calibration {
  std::string source;          // the microbenchmark file the fit used
  nlohmann::json provenance;   // GPU, driver, CUDA, date, as the benchmark recorded them
  std::array<GemmCalibration, 5> gemm;  // indexed by DType
  AttentionCalibration attention;        // FlashAttention-2 (and what the kernel model uses)
  AttentionCalibration attention_cudnn;  // cuDNN's fused attention; not calibrated: none measured
  GemmLaunches gemm_launches;
  bool present() const { return !source.empty(); }
};

// Host-side cost of eager PyTorch on the machine the GPU sits in (its CPU, driver and
// framework versions), measured by calibration/training/measure_host.py. Zero when not
// measured: then no host bound is modelled.
struct HostDispatch {
  Seconds eager_per_kernel = 0;    // host time per kernel of eager PyTorch with autograd
  // A DTensor ParallelStyle module (ColwiseParallel / RowwiseParallel Linear under
  // parallelize_module) beyond its kernels at the eager rate: its input/output hooks,
  // from_local / to_local, sharding propagation of its ops and its redistribute, in its
  // forward and in its backward.
  Seconds dtensor_module_forward = 0, dtensor_module_backward = 0;
  // What a bias adds to such a module (the bias is a DTensor parameter of its own: cast
  // under autocast, its gradient reduced, accumulated and updated), forward + backward +
  // its optimizer step, as measured on whole one-micro-batch steps; 0 where not measured.
  Seconds dtensor_bias = 0;
  // What one DTensor parameter adds to the fused AdamW step on the host beyond a plain one
  // (the step's tensor lists go through DTensor's dispatch: sharding propagation and the
  // unwrapping of each parameter, gradient and state before the kernels are launched);
  // 0 where not measured.
  Seconds dtensor_optimizer_param = 0;
  // The vocabulary-parallel cross entropy (loss_parallel over logits sharded by the head's
  // ColwiseParallel) beyond the same ops on a plain tensor: DTensor's handlers of the cast,
  // log_softmax and nll_loss with their functional all-reduces, forward and backward; 0
  // where not measured.
  Seconds dtensor_loss_forward = 0, dtensor_loss_backward = 0;
  Seconds ddp_per_layer = 0;       // DDP's autograd hooks, per layer (its parameters)
  Seconds fsdp_per_unit = 0;       // FSDP1 pre/post hooks per wrapped unit, fwd + bwd, no mixed precision
  Seconds fsdp_mixed_per_unit = 0; // FSDP1 with a MixedPrecision policy (casts of the flat parameter)
  Seconds fsdp2_per_unit = 0;      // FSDP2 (fully_shard, per-parameter DTensors)
  // transformers' eager Llama forward under torch.inference_mode (no autograd recording),
  // at the host's fast speed: host time per kernel its decoder layers launch, and what the
  // forward spends on the host outside the layers beyond its own kernels at that rate (the
  // model's and the cache's Python: masks, positions, output objects). 0 where not measured.
  Seconds inference_per_kernel = 0, inference_forward = 0;
  std::string source;
  bool present() const { return eager_per_kernel > 0; }
};

// How much a collective and the kernels beside it slow each other while both run (NCCL
// runs as kernels: its channels take SMs and HBM bandwidth from a GEMM, which slows the
// collective in turn), measured by calibration/nccl's overlap benchmark. 1 when not
// measured: overlap is then free.
struct OverlapInterference {
  double compute = 1;  // GEMM time running beside a collective / alone
  double comm = 1;     // collective time running beside GEMMs / alone
  std::string source;
  bool present() const { return !source.empty(); }
};

// NCCL as measured on one link class (calibration/nccl, fitted by costmodel/collective_fit;
// evaluated by costmodel/nccl_model, which has the equations). Per operation, in the
// order of costmodel's Collective enum (kNcclOpNames: the benchmark's names):
//   latency(n)        = latency + latency_per_step x latency_steps(op, n)
//   transfer rate(n, S) = curve(S)^curve_exponent / (1 / bus_bandwidth + 1 / (bus_factor(op, n) x buffer_bandwidth))
// (bus bytes per second once the latency is paid; n capped at max_ranks in the bus factor)
// bus_bandwidth is what the link moves per rank (nccl-tests' bus bytes), buffer_bandwidth
// a cost per byte of the buffer that more ranks do not spread (0: none), and the curve,
// shared by all operations, the efficiency by message size (protocol regimes).
struct NcclOpFit {
  Seconds latency = 0;
  Seconds latency_per_step = 0;
  BytesPerSecond bus_bandwidth = 0;
  BytesPerSecond buffer_bandwidth = 0;  // 0: no such term
  double curve_exponent = 1;
};
constexpr std::array<std::string_view, 6> kNcclOpNames{"all_reduce", "all_gather", "reduce_scatter",
                                                      "all_to_all", "broadcast",  "send_recv"};
struct NcclLinkFit {
  std::array<NcclOpFit, 6> ops;
  struct Point {
    Bytes bytes = 0;
    double efficiency = 1;
  };
  std::vector<Point> curve;  // ascending bytes; log-interpolated in log2(bytes), flat outside
  std::int64_t max_ranks = 0;  // largest group measured: buffer terms are not extrapolated beyond it
  bool present() const { return max_ranks > 0; }
};
struct NcclCalibration {
  std::vector<std::string> sources;  // the benchmark files
  nlohmann::json provenance;         // per source: NCCL version, GPUs, date
  NcclLinkFit nvlink;                // groups inside one node (NVLink / NVSwitch)
  bool present() const { return nvlink.present(); }
};

// One figure a public benchmark measured on both the target GPU and the transfer's
// reference GPU (the same program, so its bias cancels in the ratio); see transfer.hpp.
struct PublishedPair {
  double target = 0;     // FLOP/s or bytes/s on the target GPU
  double reference = 0;  // the same benchmark on the reference GPU
  std::string source;
  bool present() const { return target > 0 && reference > 0; }
};

// How an uncalibrated profile is derived from a calibrated one (costmodel/transfer).
struct TransferSpec {
  std::string from;                     // the calibrated reference profile's name
  std::array<PublishedPair, 5> gemm;    // achievable dense GEMM rate, indexed by DType
  PublishedPair attention;              // fused attention (flash) rate
  PublishedPair memory;                 // achievable HBM bandwidth (stream copy)
  bool present() const { return !from.empty(); }
};

struct GpuProfile {
  std::string name;          // "a100-sxm4-80gb"
  std::string display_name;  // "NVIDIA A100-SXM4-80GB"
  std::string status;        // "datasheet", "transferred" or "calibrated"
  int sms = 0;
  // CUDA compute capability ("9.0"): which architecture's kernels libraries run (cuDNN's
  // attention kernels differ by architecture; PyTorch's SDPA prefers cuDNN on 9.0 and
  // 10.0). Empty: not stated.
  std::string compute_capability;
  Bytes l2 = 0;
  FlopPerSecond peak_fp64 = 0, peak_fp32 = 0, peak_tf32 = 0, peak_fp16 = 0, peak_bf16 = 0, peak_fp8 = 0;
  FlopPerSecond peak_fp4 = 0;  // datasheet only: no training precision uses it
  Bytes memory_capacity = 0;
  Bytes memory_reserved = 0;  // CUDA context, NCCL buffers, allocator slack
  BytesPerSecond memory_bandwidth = 0;
  BytesPerSecond nvlink_bandwidth = 0;  // per GPU per direction
  Seconds nvlink_latency = 0;
  BytesPerSecond pcie_bandwidth = 0;  // per direction
  // Copies between GPU memory and pinned host memory (cudaMemcpyAsync), per direction, as
  // calibrated (calibrate fit: the microbenchmark's memcpy section); 0: pcie_bandwidth.
  BytesPerSecond pinned_h2d = 0, pinned_d2h = 0;
  BytesPerSecond host_copy_bandwidth(bool to_device) const {
    const BytesPerSecond b = to_device ? pinned_h2d : pinned_d2h;
    return b > 0 ? b : pcie_bandwidth;
  }
  Efficiency efficiency;
  Calibration calibration;
  HostDispatch host;
  OverlapInterference interference;
  NcclCalibration nccl;  // optional: without it collectives use the constant efficiencies
  TransferSpec transfer;  // optional: derive the efficiency figures from a calibrated profile
  std::vector<std::string> sources;

  // Peak dense rate for a compute type; 0 when the GPU has no such units.
  FlopPerSecond peak(DType t) const;
  Bytes usable_memory() const { return memory_capacity - memory_reserved; }
};

// Parses a profile document; problems go to `diag`.
GpuProfile parse_gpu_profile(const nlohmann::json& doc, Diagnostics& diag);
// The profile as a document parse_gpu_profile() reads back (used to save fits).
nlohmann::json to_json(const GpuProfile& p);
// The nccl section's per-link part, as the profile holds it.
nlohmann::json to_json(const NcclLinkFit& link);
// A built-in profile by name, else a profile file path; nullopt when neither exists.
std::optional<GpuProfile> find_gpu_profile(const std::string& name_or_path);
std::vector<std::string> builtin_gpu_names();

}  // namespace clustersim

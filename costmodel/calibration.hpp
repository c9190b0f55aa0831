// Fitting a GPU profile to microbenchmark measurements (calibration/microbench output):
//  - GEMM, per compute type: the parametric model's gemm_max and k_half by least squares
//    on log time, then the measured/model ratio at every training shape, which the
//    kernel model interpolates over shapes;
//  - memory-bound kernels: efficiency and half-rate size per kind from the kernels whose
//    data exceed L2 (smaller ones measure the cache, not HBM), eager PyTorch's access
//    paths from their own measurements;
//  - kernel overhead: the GPU's gap between kernels queued with the host ahead, where the
//    launch section measured it, else the back-to-back launch gap (fit_profile);
//  - host copies: pinned H2D and D2H bandwidth of cudaMemcpyAsync (activation offload).
// Every `holdout_every`-th sample (in file order) is held back and predicted to report
// the fit's error on shapes it did not see.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "costmodel/hardware.hpp"

namespace clustersim {

// The median of v (the mean of the middle two when even); 0 for none.
double median_of(std::vector<double> v);

struct GemmSample {
  DType dtype = DType::bf16;
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  Seconds time = 0;  // GPU time of one call
};

struct MemorySample {
  std::string kernel;
  Bytes bytes = 0;  // read + written
  Seconds time = 0;
};

struct AttentionSample {
  std::int64_t batch_heads = 0, seq = 0, head_dim = 0;
  Seconds forward = 0, backward = 0;  // causal, 16-bit
};

struct Microbenchmarks {
  std::string file;
  std::string gpu_name;
  int sms = 0;
  nlohmann::json provenance;
  std::vector<GemmSample> gemm;
  std::vector<MemorySample> memory;
  Seconds launch_gap = 0;  // GPU time per back-to-back kernel launch (bound by the host's submit rate)
  Seconds sync_launch = 0, launch_submit = 0;  // launch + synchronize; host submit per async launch
  // GPU time per kernel queued behind others with the host ahead (the launch section's
  // queued_gpu_time_per_launch; 0 when the file predates it).
  Seconds queued_gap = 0;
  // Pinned host <-> GPU copies (the memcpy section): the best bandwidth over the copy
  // sizes per direction; 0 when the file has none (the profile keeps its PCIe figure).
  BytesPerSecond pinned_h2d = 0, pinned_d2h = 0;
  Bytes l2 = 0;
  // Optional: fused-attention timings per kernel library (index: AttentionKernel; flash2
  // from profile_step.py or measure_sdpa_backends.py, cudnn from measure_sdpa_backends.py).
  std::array<std::string, 2> attention_files;
  std::array<std::vector<AttentionSample>, 2> attention;
  std::vector<std::string> eager_files;  // optional: eager PyTorch kernels by TensorIterator path
};

// Reads a clustersim-microbench JSON file; bad content is an InputError with paths.
Microbenchmarks read_microbenchmarks(const std::string& file);
// Replaces the launch figures of `into` with those of another clustersim-microbench file
// (its launch section alone, e.g. `--only launch` on the same GPU model).
void read_launch_section(const std::string& file, Microbenchmarks& into);
// Adds a fused-attention timing file: clustersim-sdpa-flash/1 (profile_step.py:
// FlashAttention-2) or clustersim-sdpa/1 with its "backend", flash or cudnn
// (measure_sdpa_backends.py), to the samples of that kernel library; a second file for
// the same library is an error, as are shapes a backend did not run (an "error" entry is
// skipped).
void read_attention_benchmarks(const std::string& file, Microbenchmarks& into);
// Adds the memory-bound samples of a clustersim-eager-kernels JSON file
// (calibration/training/measure_eager_kernels.py) under the kinds of their access path
// (hardware.hpp MemoryKind: strided, broadcast, noncontiguous, cast_up, mixed_add, concat).
// A path that an earlier file already added is skipped: each path's samples come from one
// measurement run.
void read_eager_kernels(const std::string& file, Microbenchmarks& into);

struct ErrorStats {
  std::size_t count = 0;
  double median = 0, p90 = 0, max = 0;  // |predicted - measured| / measured
};

struct FitReport {
  struct PerType {
    DType dtype;
    std::size_t train = 0;
    double gemm_max = 0, k_half = 0;
    ErrorStats parametric;  // held-back error of the parametric model alone
    ErrorStats held_back;   // held-back error with the interpolated correction
  };
  std::vector<PerType> gemm;
  ErrorStats gemm_held_back;  // all compute types together
  double memory_efficiency = 0;
  Bytes memory_half_size = 0;
  ErrorStats memory_held_back;
  Seconds kernel_overhead = 0;
  bool kernel_overhead_queued = false;  // the queued gap (else the back-to-back launch gap)
  // Per kernel library (index: AttentionKernel); count 0 where none was measured.
  std::array<ErrorStats, 2> attention_forward_held_back, attention_backward_held_back;
  ErrorStats all_held_back;  // every held-back point: GEMMs, memory-bound, attention
};

struct FitOptions {
  int holdout_every = 5;  // 0: fit on everything (no error report)
  std::string name;       // name of the fitted profile; default: the base's
};

// A calibrated copy of `base`. The report says how well it predicts held-back samples.
GpuProfile fit_profile(const GpuProfile& base, const Microbenchmarks& data, const FitOptions& options,
                       FitReport* report);

// Host-side dispatch costs from a clustersim-host-dispatch JSON file
// (calibration/training/measure_host.py): per kernel of eager PyTorch (median over the
// measured transformer blocks, forward and forward + backward, fp32 and autocast), per
// DTensor parallel-style module forward and backward (the DTensor tensor-parallel MLP
// against the plain one: the host time beyond the extra kernels at the eager rate, over
// its two modules, median over fp32 and autocast), DDP's hooks per layer
// and FSDP's per unit (each over the plain stack of the same tiny layers). Bad content is
// an InputError with JSON paths.
HostDispatch fit_host_dispatch(const std::string& file);

// The eager inference forward's host costs (HostDispatch::inference_per_kernel and
// inference_forward) from clustersim-inference-host files of
// calibration/serving/measure_inference_host.py: transformers' Llama with 2 and 6 decoder
// layers, their repeats interleaved, each after a probe of the host's speed. Per kernel: the
// median over the files, widths and forwards (decode, prefill) of the paired fast per-layer
// difference over the layer's launches; outside: the 2-layer model's fast median less two
// layers and less its other launches at that rate, the same median. Bad content is an
// InputError with JSON paths.
struct InferenceHost {
  Seconds per_kernel = 0, forward = 0;
};
InferenceHost fit_inference_host(const std::vector<std::string>& files);

// The kernels per 16-bit linear over a grid of shapes (GemmLaunches) from a
// clustersim-gemm-launches file (calibration/serving/measure_gemm_launches.py); a bad point
// is an InputError naming the file, its JSON path and the value.
GemmLaunches read_gemm_launches(const std::string& file);

// What a bias adds to a DTensor parallel-style module on the host (HostDispatch::
// dtensor_bias), from a clustersim-dtensor-bias JSON file: host-bound DTensor GPT steps
// with and without biases, (median with - median without) / (layers x biased modules per
// layer), carried to the profile's host speed by eager_per_kernel over the measuring
// machine's own (its host-bound Megatron-style reference step over that step's kernels).
// Bad content is an InputError with JSON paths.
Seconds fit_dtensor_bias(const std::string& file, Seconds eager_per_kernel);

// What a DTensor parameter adds to the fused AdamW step on the host (HostDispatch::
// dtensor_optimizer_param), from clustersim-host-dispatch files of
// calibration/training/measure_dtensor_params.py: per rank and with or without biases, the
// slope over K = 8 and 32 ColwiseParallel Linears of the DTensor step beyond the plain
// one's, per parameter tensor, carried to the profile's host speed by eager_per_kernel over
// that rank's own rate on the same file's transformer blocks; the median over all of them.
// Bad content is an InputError with JSON paths.
Seconds fit_dtensor_optimizer(const std::vector<std::string>& files, Seconds eager_per_kernel);

// What the vocabulary-parallel cross entropy costs on the host beyond the plain one
// (HostDispatch::dtensor_loss_forward / _backward), from clustersim-host-dispatch files of
// measure_dtensor_params.py --loss-only: per rank, DTensor minus plain forward, and
// (forward + backward) minus forward likewise, carried to the profile's host speed by
// eager_per_kernel over that rank's rate on the same file's transformer blocks; the medians.
// Bad content is an InputError with JSON paths.
std::pair<Seconds, Seconds> fit_dtensor_loss(const std::vector<std::string>& files, Seconds eager_per_kernel);

// Overlap interference from a clustersim-overlap-bench JSON file (calibration/nccl): the
// median GEMM slowdown beside a collective, and the median collective slowdown beside
// GEMMs, over every GPU count, GEMM shape and collective of at least 64 MiB (smaller
// collectives finish before the GEMM stream settles: their factors are lower bounds).
OverlapInterference fit_overlap_interference(const std::string& file);

}  // namespace clustersim

// Shared helpers of clustersim-microbench: error checks, options, timing, random init.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "json.h"

// ---------------------------------------------------------------------------
// Error checking: every CUDA / cuBLAS call goes through one of these.
// ---------------------------------------------------------------------------
#define CUDA_CHECK(call)                                                                  \
  do {                                                                                    \
    cudaError_t err_ = (call);                                                            \
    if (err_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "CUDA error %s (%d) at %s:%d: %s\n    in: %s\n",               \
                   cudaGetErrorName(err_), static_cast<int>(err_), __FILE__, __LINE__,    \
                   cudaGetErrorString(err_), #call);                                      \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

// Check the last launch error (and, in debug builds, synchronise).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                \
  do {                                                                                    \
    cublasStatus_t st_ = (call);                                                          \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      std::fprintf(stderr, "cuBLAS error %s (%d) at %s:%d\n    in: %s\n",                 \
                   cublasGetStatusName(st_), static_cast<int>(st_), __FILE__, __LINE__,   \
                   #call);                                                                \
      std::exit(3);                                                                       \
    }                                                                                     \
  } while (0)

namespace mb {

struct Options {
  std::string out_path = "microbench.json";
  bool quick = false;
  bool run_gemm = true;
  bool run_copy = true;
  bool run_membound = true;
  bool run_launch = true;
  int device = 0;
  std::string command_line;
};

struct DeviceInfo {
  cudaDeviceProp prop{};
  int cc = 0;            // major*10+minor
  int sm_count = 0;
  size_t total_mem = 0;
};

// Compact numbers printed at the end.
struct Summary {
  std::vector<std::string> lines;
  void add(const std::string& s) { lines.push_back(s); }
};

// ---------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------
// A launch function enqueues exactly one instance of the operation on the stream and
// returns 0 on success (non-zero: a library status that is not success).
using LaunchFn = std::function<int(cudaStream_t)>;

struct TimingConfig {
  double target_sample_s = 1.0e-3;  // aim: one timed sample lasts at least this long
  double budget_s = 0.05;           // aim: total timed time per measurement
  int min_samples = 5;
  int max_samples = 50;
  int max_inner = 1000;
  bool allow_graph = true;          // capture `inner` launches into a CUDA graph
};

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0, mean_s = 0;  // per single operation
  int samples = 0;
  int inner = 0;          // operations per timed sample
  std::string method;     // "stream" or "graph"
};

// Times fn with CUDA events after warm-up; returns per-operation statistics.
Timing time_op(cudaStream_t stream, const LaunchFn& fn, const TimingConfig& cfg);

void write_timing(Json& j, const Timing& t);

double median_of(std::vector<double> v);

// ---------------------------------------------------------------------------
// Random init (hash based, deterministic, never zeros)
// ---------------------------------------------------------------------------
enum class DType { F32, F16, BF16, FP8E4M3 };
size_t dtype_size(DType t);
void fill_uniform(void* ptr, DType t, size_t n, uint64_t seed, float lo, float hi,
                  cudaStream_t stream);

// Sections
void run_gemm_section(const Options& opt, const DeviceInfo& dev, cudaStream_t stream,
                      Json& j, Summary& sum);
void run_copy_section(const Options& opt, const DeviceInfo& dev, cudaStream_t stream,
                      Json& j, Summary& sum);
void run_launch_section(const Options& opt, const DeviceInfo& dev, cudaStream_t stream,
                        Json& j, Summary& sum);
void run_membound_section(const Options& opt, const DeviceInfo& dev, cudaStream_t stream,
                          Json& j, Summary& sum);

std::string fmt(const char* f, ...);

}  // namespace mb

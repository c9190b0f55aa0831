// Timing with CUDA events, statistics, random initialisation.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>

#include "common.cuh"

namespace mb {

std::string fmt(const char* f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return std::string(buf);
}

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return (n % 2 == 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void must_launch(int rc, const char* what) {
  if (rc != 0) {
    std::fprintf(stderr, "operation failed with library status %d during %s\n", rc, what);
    std::exit(4);
  }
}

Timing time_op(cudaStream_t s, const LaunchFn& fn, const TimingConfig& cfg) {
  Timing t;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));

  // Warm-up (module load, heuristics, caches).
  must_launch(fn(s), "warm-up");
  CUDA_CHECK_LAUNCH();
  must_launch(fn(s), "warm-up");
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaStreamSynchronize(s));

  // Estimate a single operation's time.
  CUDA_CHECK(cudaEventRecord(e0, s));
  must_launch(fn(s), "estimate");
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaEventRecord(e1, s));
  CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0.f;
  CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  double t1 = std::max(1e-3 * static_cast<double>(ms), 1e-7);
  if (t1 < 1e-4) {
    // Short operation: a single event pair mostly measures launch latency; time a burst.
    const int burst = 20;
    CUDA_CHECK(cudaEventRecord(e0, s));
    for (int i = 0; i < burst; ++i) must_launch(fn(s), "estimate burst");
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventRecord(e1, s));
    CUDA_CHECK(cudaEventSynchronize(e1));
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t1 = std::max(1e-3 * static_cast<double>(ms) / burst, 1e-7);
  }

  int inner = static_cast<int>(std::ceil(cfg.target_sample_s / t1));
  inner = std::max(1, std::min(inner, cfg.max_inner));
  double per_sample = t1 * inner;
  int samples = static_cast<int>(std::lround(cfg.budget_s / per_sample));
  samples = std::max(cfg.min_samples, std::min(samples, cfg.max_samples));

  // Optionally capture `inner` launches into one graph, which removes host launch gaps.
  cudaGraphExec_t exec = nullptr;
  t.method = "stream";
  if (inner > 1 && cfg.allow_graph) {
    cudaGraph_t graph = nullptr;
    bool ok = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
      int rc = 0;
      for (int i = 0; i < inner && rc == 0; ++i) rc = fn(s);
      cudaError_t e = cudaStreamEndCapture(s, &graph);
      if (e != cudaSuccess || rc != 0 || graph == nullptr) ok = false;
    }
    if (ok) {
      if (cudaGraphInstantiate(&exec, graph, 0ULL) != cudaSuccess) {
        exec = nullptr;
        ok = false;
      }
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!ok) {
      (void)cudaGetLastError();  // clear a non-sticky capture error, fall back to stream
      exec = nullptr;
    } else {
      t.method = "graph";
    }
  }

  auto run_sample = [&]() {
    if (exec != nullptr) {
      CUDA_CHECK(cudaGraphLaunch(exec, s));
    } else {
      for (int i = 0; i < inner; ++i) must_launch(fn(s), "timed sample");
      CUDA_CHECK_LAUNCH();
    }
  };

  run_sample();  // warm the chosen path
  CUDA_CHECK(cudaStreamSynchronize(s));

  std::vector<cudaEvent_t> ev(samples + 1);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  CUDA_CHECK(cudaEventRecord(ev[0], s));
  for (int i = 0; i < samples; ++i) {
    run_sample();
    CUDA_CHECK(cudaEventRecord(ev[i + 1], s));
  }
  CUDA_CHECK(cudaEventSynchronize(ev[samples]));

  std::vector<double> per_op(samples);
  double sum = 0.0;
  for (int i = 0; i < samples; ++i) {
    float m = 0.f;
    CUDA_CHECK(cudaEventElapsedTime(&m, ev[i], ev[i + 1]));
    per_op[i] = 1e-3 * static_cast<double>(m) / inner;
    sum += per_op[i];
  }
  for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
  if (exec != nullptr) CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));

  t.samples = samples;
  t.inner = inner;
  t.median_s = median_of(per_op);
  t.min_s = *std::min_element(per_op.begin(), per_op.end());
  t.max_s = *std::max_element(per_op.begin(), per_op.end());
  t.mean_s = sum / samples;
  return t;
}

void write_timing(Json& j, const Timing& t) {
  j.kv_num("time_s", t.median_s);
  j.kv_num("time_min_s", t.min_s);
  j.kv_num("time_max_s", t.max_s);
  j.kv_int("samples", t.samples);
  j.kv_int("inner", t.inner);
  j.kv_str("timing", t.method);
}

// ---------------------------------------------------------------------------
// Random init
// ---------------------------------------------------------------------------
__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_uniform_kernel(T* p, size_t n, uint64_t seed, float lo, float hi) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    uint64_t h = splitmix64(seed ^ (i * 0xD1B54A32D192ED03ULL));
    float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    float v = lo + (hi - lo) * u;
    p[i] = static_cast<T>(v);
  }
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::FP8E4M3: return 1;
  }
  return 4;
}

void fill_uniform(void* ptr, DType t, size_t n, uint64_t seed, float lo, float hi,
                  cudaStream_t stream) {
  if (n == 0) return;
  size_t blocks = std::min<size_t>((n + 255) / 256, 65536);
  dim3 grid(static_cast<unsigned>(blocks));
  switch (t) {
    case DType::F32:
      fill_uniform_kernel<float><<<grid, 256, 0, stream>>>(static_cast<float*>(ptr), n, seed, lo, hi);
      break;
    case DType::F16:
      fill_uniform_kernel<__half><<<grid, 256, 0, stream>>>(static_cast<__half*>(ptr), n, seed, lo, hi);
      break;
    case DType::BF16:
      fill_uniform_kernel<__nv_bfloat16>
          <<<grid, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(ptr), n, seed, lo, hi);
      break;
    case DType::FP8E4M3:
      fill_uniform_kernel<__nv_fp8_e4m3>
          <<<grid, 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(ptr), n, seed, lo, hi);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace mb

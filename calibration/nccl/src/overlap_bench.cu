// clustersim-overlap-bench: how much a compute kernel and an NCCL collective slow each other
// down when they run at the same time on two streams of the same GPUs.
//
// One process drives the first n GPUs (ncclCommInitAll + group calls, as clustersim-nccl-bench).
// Every GPU has a compute stream and a communication stream. Compute kinds: bf16 GEMMs
// (cublasGemmEx, fp32 accumulation, random inputs) and a memory-bound copy kernel;
// collectives: all-reduce, all-gather and reduce-scatter of a few sizes (float32, sum).
// For each (compute kind, collective, size) four measurements, each repeated --reps times
// (medians are reported):
//   alone       the compute kind back-to-back for about --window-ms on its stream, nothing else;
//               the collective back-to-back for about --window-ms, nothing else;
//   compute under communication
//               the collective runs back-to-back on the communication stream; after its first
//               call, the compute stream runs the compute kind back-to-back for about
//               --window-ms; the collectives go on for 2.5x that long (alone), so the whole
//               compute window is overlapped (`compute_coverage` says how much was);
//   communication under compute
//               the same with the roles swapped: the collectives are timed while the compute
//               kind runs back-to-back;
//   paired      both streams start together with windows of equal length alone (about
//               --window-ms each); the makespan gives the overlap fraction
//               (T_compute_alone + T_comm_alone - makespan) / min(T_compute_alone, T_comm_alone):
//               1 = the shorter one is entirely hidden, 0 = no better than one after the other.
// Every sample is enqueued behind the launch gate (bench_common.h), so host launch rates do
// not enter the timings. Compute time per kernel is the mean over ranks of each rank's window
// divided by the kernel count (and the slowest rank); collective time per call is the slowest
// rank's window divided by the call count.
//
//   clustersim-overlap-bench [--gpus 2,4] [--gemms MxNxK,...] [--membound-bytes N]
//                            [--ops all_reduce,all_gather,reduce_scatter] [--sizes-mib 16,64,256]
//                            [--window-ms 10] [--reps 3] [--out FILE] [--quick]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "bench_common.h"

#define CUBLAS_CHECK(call)                                                                         \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      std::fprintf(stderr, "cuBLAS error %d at %s:%d\n    in: %s\n", static_cast<int>(s_), __FILE__, \
                   __LINE__, #call);                                                               \
      std::exit(4);                                                                                \
    }                                                                                              \
  } while (0)

namespace {

using benchc::fmt;
using benchc::median_of;
using benchc::split;
using mb::Json;

enum class Op { all_reduce, all_gather, reduce_scatter };
const char* op_name(Op op) {
  switch (op) {
    case Op::all_reduce: return "all_reduce";
    case Op::all_gather: return "all_gather";
    case Op::reduce_scatter: return "reduce_scatter";
  }
  return "?";
}
double bus_factor(Op op, int n) { return op == Op::all_reduce ? 2.0 * (n - 1) / n : double(n - 1) / n; }

struct Compute {
  std::string name;  // "gemm_MxNxK" or "copy_<bytes>"
  bool gemm = true;
  long long m = 0, n = 0, k = 0;  // out[m,n] = A[m,k] * B[n,k]^T (a linear layer's forward)
  size_t bytes = 0;               // copy: bytes copied (read once, written once)
  double flop() const { return 2.0 * double(m) * double(n) * double(k); }
};

struct Options {
  std::vector<int> gpu_counts{2};
  std::vector<Compute> computes;
  std::vector<Op> ops{Op::all_reduce, Op::all_gather, Op::reduce_scatter};
  std::vector<size_t> sizes{size_t(16) << 20, size_t(64) << 20, size_t(256) << 20};
  size_t membound_bytes = size_t(1) << 30;
  double window_s = 0.010;
  double long_factor = 2.5;  // the background side runs this many times the timed window (alone)
  int reps = 3;
  int max_calls = 600;       // per stream and window (queued behind the gate)
  std::string out = "overlap_bench.json";
  bool quick = false;
  std::string command_line;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr,
               "error: %s\n"
               "usage: clustersim-overlap-bench [--gpus 2,4] [--gemms MxNxK,...] [--membound-bytes N]\n"
               "         [--ops all_reduce,all_gather,reduce_scatter] [--sizes-mib 16,64,256]\n"
               "         [--window-ms 10] [--reps 3] [--out FILE] [--quick]\n",
               msg.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  std::string gemms = "4096x4096x4096,8192x8192x2048,2048x8192x8192";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      char* end = nullptr;
      const double d = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(d > 0)) usage_error(a + ": expected a positive number, got " + v);
      return d;
    };
    if (a == "--gpus") {
      o.gpu_counts.clear();
      for (const auto& p : split(value(), ',')) o.gpu_counts.push_back(int(number(p)));
    } else if (a == "--gemms") {
      gemms = value();
    } else if (a == "--membound-bytes") {
      o.membound_bytes = size_t(number(value()));
    } else if (a == "--ops") {
      o.ops.clear();
      for (const auto& p : split(value(), ',')) {
        if (p == "all_reduce") o.ops.push_back(Op::all_reduce);
        else if (p == "all_gather") o.ops.push_back(Op::all_gather);
        else if (p == "reduce_scatter") o.ops.push_back(Op::reduce_scatter);
        else usage_error("unknown operation " + p);
      }
    } else if (a == "--sizes-mib") {
      o.sizes.clear();
      for (const auto& p : split(value(), ',')) o.sizes.push_back(size_t(number(p) * double(1 << 20)));
    } else if (a == "--window-ms") {
      o.window_s = 1e-3 * number(value());
    } else if (a == "--reps") {
      o.reps = int(number(value()));
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--quick") {
      o.quick = true;
    } else {
      usage_error("unknown argument " + a);
    }
  }
  if (o.quick) {
    gemms = "4096x4096x4096";
    o.sizes = {size_t(64) << 20};
    o.reps = 1;
    o.window_s = std::min(o.window_s, 0.005);
  }
  if (!gemms.empty() && gemms != "none") {
    for (const auto& g : split(gemms, ',')) {
      const auto d = split(g, 'x');
      if (d.size() != 3) usage_error("--gemms wants MxNxK, got " + g);
      Compute c;
      long long* dims[3] = {&c.m, &c.n, &c.k};
      for (int q = 0; q < 3; ++q) {
        char* end = nullptr;
        *dims[q] = std::strtoll(d[q].c_str(), &end, 10);
        if (end == d[q].c_str() || *end != '\0' || *dims[q] <= 0) usage_error("--gemms wants MxNxK, got " + g);
      }
      c.name = fmt("gemm_%lldx%lldx%lld", c.m, c.n, c.k);
      o.computes.push_back(c);
    }
  }
  Compute c;
  c.gemm = false;
  c.bytes = o.membound_bytes / 16 * 16;
  c.name = fmt("copy_%zu", c.bytes);
  o.computes.push_back(c);
  return o;
}

// Fills bf16 values uniform in [-1, 1) from a hash of the index (no cuRAND).
__global__ void fill_bf16(__nv_bfloat16* p, size_t count, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ (seed + uint32_t(i >> 32) * 97u);
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    p[i] = __float2bfloat16(float(h) * (2.0f / 4294967296.0f) - 1.0f);
  }
}

// A memory-bound kernel as frameworks write them: one element chunk per thread, a large grid
// (not persistent), 16-byte vector loads and stores, 2 vectors per thread.
__global__ void copy_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, size_t nvec) {
  const size_t base = size_t(blockIdx.x) * blockDim.x * 2 + threadIdx.x;
  uint4 v0{}, v1{};
  if (base < nvec) v0 = x[base];
  if (base + blockDim.x < nvec) v1 = x[base + blockDim.x];
  if (base < nvec) y[base] = v0;
  if (base + blockDim.x < nvec) y[base + blockDim.x] = v1;
}

struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t cs = nullptr, ks = nullptr;  // communication and compute streams
  cublasHandle_t blas = nullptr;
  void *send = nullptr, *recv = nullptr;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  void *src = nullptr, *dst = nullptr;
  // Events: kick (after the first call of the background side), start/end of both windows.
  cudaEvent_t kick = nullptr, k0 = nullptr, k1 = nullptr, c0 = nullptr, c1 = nullptr;
};

struct World {
  std::vector<Rank> ranks;
  benchc::Gate* gate = nullptr;
  int size() const { return int(ranks.size()); }
};

void enqueue_compute(Rank& r, const Compute& c) {
  if (c.gemm) {
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major out[m,n] = A[m,k] * B[n,k]^T is column-major C^T[n,m] = B[n,k] (op T of the
    // k x n column-major buffer) times A^T (k x m column-major, op N).
    CUBLAS_CHECK(cublasGemmEx(r.blas, CUBLAS_OP_T, CUBLAS_OP_N, int(c.n), int(c.m), int(c.k), &alpha, r.b,
                              CUDA_R_16BF, int(c.k), r.a, CUDA_R_16BF, int(c.k), &beta, r.c, CUDA_R_16BF, int(c.n),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    const size_t nvec = c.bytes / 16;
    const unsigned threads = 256;
    const size_t blocks = (nvec + 2 * threads - 1) / (2 * threads);
    copy_kernel<<<unsigned(blocks), threads, 0, r.ks>>>(static_cast<const uint4*>(r.src), static_cast<uint4*>(r.dst),
                                                        nvec);
    CUDA_CHECK(cudaGetLastError());
  }
}

void enqueue_coll(World& w, Op op, size_t bytes) {
  const int n = w.size();
  const size_t count = bytes / sizeof(float), chunk = count / size_t(n);
  NCCL_CHECK(ncclGroupStart());
  for (Rank& r : w.ranks) {
    switch (op) {
      case Op::all_reduce: NCCL_CHECK(ncclAllReduce(r.send, r.recv, count, ncclFloat, ncclSum, r.comm, r.cs)); break;
      case Op::all_gather: NCCL_CHECK(ncclAllGather(r.send, r.recv, chunk, ncclFloat, r.comm, r.cs)); break;
      case Op::reduce_scatter:
        NCCL_CHECK(ncclReduceScatter(r.send, r.recv, chunk, ncclFloat, ncclSum, r.comm, r.cs));
        break;
    }
  }
  NCCL_CHECK(ncclGroupEnd());
}

void sync_all(World& w) {
  for (Rank& r : w.ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaStreamSynchronize(r.cs));
    CUDA_CHECK(cudaStreamSynchronize(r.ks));
  }
}

double elapsed(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return 1e-3 * double(ms);
}

// The raw event times of one sample, per rank, relative to the earliest start.
struct Sample {
  std::vector<double> k_start, k_end, c_start, c_end;  // seconds, per rank (NaN if unused)
  int gate_timeouts = 0;
};

// Runs one sample. nk compute kernels and nc collectives (either may be 0). `lead`: which side
// starts first and kicks the other after its first call: 'c' (communication leads), 'k'
// (compute leads) or 'p' (both start together at the gate).
Sample run_sample(World& w, const Compute* comp, int nk, Op op, size_t bytes, int nc, char lead) {
  const int n = w.size();
  w.gate->arm();
  for (int i = 0; i < n; ++i) {
    Rank& r = w.ranks[i];
    CUDA_CHECK(cudaSetDevice(r.device));
    if (nc > 0 && (lead == 'c' || lead == 'p')) w.gate->hold(i, r.cs);
    if (nk > 0 && (lead == 'k' || lead == 'p')) w.gate->hold(i, r.ks);
  }
  auto comm_window = [&](int calls, bool kick_after_first) {
    if (kick_after_first) {
      enqueue_coll(w, op, bytes);
      for (Rank& r : w.ranks) {
        CUDA_CHECK(cudaSetDevice(r.device));
        CUDA_CHECK(cudaEventRecord(r.kick, r.cs));
      }
    }
    for (Rank& r : w.ranks) {
      CUDA_CHECK(cudaSetDevice(r.device));
      CUDA_CHECK(cudaEventRecord(r.c0, r.cs));
    }
    for (int q = 0; q < calls; ++q) enqueue_coll(w, op, bytes);
    for (Rank& r : w.ranks) {
      CUDA_CHECK(cudaSetDevice(r.device));
      CUDA_CHECK(cudaEventRecord(r.c1, r.cs));
    }
  };
  auto compute_window = [&](int calls, bool kick_after_first) {
    for (Rank& r : w.ranks) {
      CUDA_CHECK(cudaSetDevice(r.device));
      if (kick_after_first) {
        enqueue_compute(r, *comp);
        CUDA_CHECK(cudaEventRecord(r.kick, r.ks));
      }
      CUDA_CHECK(cudaEventRecord(r.k0, r.ks));
      for (int q = 0; q < calls; ++q) enqueue_compute(r, *comp);
      CUDA_CHECK(cudaEventRecord(r.k1, r.ks));
    }
  };
  if (lead == 'c') {
    comm_window(nc, nk > 0);
    if (nk > 0) {
      for (Rank& r : w.ranks) {
        CUDA_CHECK(cudaSetDevice(r.device));
        CUDA_CHECK(cudaStreamWaitEvent(r.ks, r.kick, 0));
      }
      compute_window(nk, false);
    }
  } else if (lead == 'k') {
    compute_window(nk, nc > 0);
    if (nc > 0) {
      for (Rank& r : w.ranks) {
        CUDA_CHECK(cudaSetDevice(r.device));
        CUDA_CHECK(cudaStreamWaitEvent(r.cs, r.kick, 0));
      }
      comm_window(nc, false);
    }
  } else {
    if (nk > 0) compute_window(nk, false);
    if (nc > 0) comm_window(nc, false);
  }
  w.gate->release();
  sync_all(w);
  Sample s;
  s.gate_timeouts = w.gate->timeouts();
  const double nan = std::nan("");
  for (Rank& r : w.ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    // Reference: the earliest start on this rank.
    cudaEvent_t ref = nk > 0 ? r.k0 : r.c0;
    if (nk > 0 && nc > 0 && elapsed(r.c0, r.k0) > 0) ref = r.c0;  // c0 earlier than k0
    s.k_start.push_back(nk > 0 ? elapsed(ref, r.k0) : nan);
    s.k_end.push_back(nk > 0 ? elapsed(ref, r.k1) : nan);
    s.c_start.push_back(nc > 0 ? elapsed(ref, r.c0) : nan);
    s.c_end.push_back(nc > 0 ? elapsed(ref, r.c1) : nan);
  }
  return s;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}
double vmax(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }
double vmin(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

// Per-kernel compute time of a sample: mean over ranks, and the slowest rank.
void compute_times(const Sample& s, int nk, double& mean_s, double& max_s) {
  std::vector<double> t;
  for (size_t i = 0; i < s.k_start.size(); ++i) t.push_back((s.k_end[i] - s.k_start[i]) / nk);
  mean_s = mean(t), max_s = vmax(t);
}
// Per-call collective time of a sample: the slowest rank.
double comm_time(const Sample& s, int nc) {
  std::vector<double> t;
  for (size_t i = 0; i < s.c_start.size(); ++i) t.push_back((s.c_end[i] - s.c_start[i]) / nc);
  return vmax(t);
}

struct World make_world(int n, size_t comm_bytes, const Options& o) {
  World w;
  w.ranks.resize(n);
  std::vector<int> devs(n);
  std::vector<ncclComm_t> comms(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  size_t a_elems = 1, b_elems = 1, c_elems = 1;
  for (const Compute& c : o.computes)
    if (c.gemm) {
      a_elems = std::max(a_elems, size_t(c.m * c.k));
      b_elems = std::max(b_elems, size_t(c.n * c.k));
      c_elems = std::max(c_elems, size_t(c.m * c.n));
    }
  for (int i = 0; i < n; ++i) {
    Rank& r = w.ranks[i];
    r.device = i;
    r.comm = comms[i];
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.cs, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.ks, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&r.kick, &r.k0, &r.k1, &r.c0, &r.c1}) CUDA_CHECK(cudaEventCreate(e));
    CUBLAS_CHECK(cublasCreate(&r.blas));
    CUBLAS_CHECK(cublasSetStream(r.blas, r.ks));
    CUDA_CHECK(cudaMalloc(&r.send, comm_bytes));
    CUDA_CHECK(cudaMalloc(&r.recv, comm_bytes));
    CUDA_CHECK(cudaMemset(r.send, 0, comm_bytes));
    CUDA_CHECK(cudaMemset(r.recv, 0, comm_bytes));
    CUDA_CHECK(cudaMalloc(&r.a, a_elems * 2));
    CUDA_CHECK(cudaMalloc(&r.b, b_elems * 2));
    CUDA_CHECK(cudaMalloc(&r.c, c_elems * 2));
    fill_bf16<<<1024, 256, 0, r.ks>>>(r.a, a_elems, 11u + i);
    fill_bf16<<<1024, 256, 0, r.ks>>>(r.b, b_elems, 12345u + i);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMalloc(&r.src, o.membound_bytes));
    CUDA_CHECK(cudaMalloc(&r.dst, o.membound_bytes));
    fill_bf16<<<1024, 256, 0, r.ks>>>(static_cast<__nv_bfloat16*>(r.src), o.membound_bytes / 2, 777u + i);
    CUDA_CHECK(cudaMemset(r.dst, 0, o.membound_bytes));
  }
  sync_all(w);
  return w;
}

void destroy_world(World& w) {
  sync_all(w);
  for (Rank& r : w.ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    NCCL_CHECK(ncclCommDestroy(r.comm));
    CUBLAS_CHECK(cublasDestroy(r.blas));
    for (void* p : {r.send, r.recv, static_cast<void*>(r.a), static_cast<void*>(r.b), static_cast<void*>(r.c), r.src, r.dst})
      CUDA_CHECK(cudaFree(p));
    for (cudaEvent_t e : {r.kick, r.k0, r.k1, r.c0, r.c1}) CUDA_CHECK(cudaEventDestroy(e));
    CUDA_CHECK(cudaStreamDestroy(r.cs));
    CUDA_CHECK(cudaStreamDestroy(r.ks));
  }
  w.ranks.clear();
}

int calls_for(double window_s, double per_call_s, int max_calls) {
  return std::clamp(int(std::ceil(window_s / std::max(per_call_s, 1e-7))), 1, max_calls);
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (!benchc::nvls_off_or_complain()) return 1;
  int device_count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&device_count));
  for (int n : o.gpu_counts)
    if (n < 1 || n > device_count) usage_error(fmt("--gpus asks for %d GPUs; this host has %d", n, device_count));
  size_t max_size = 0;
  for (size_t s : o.sizes) max_size = std::max(max_size, s);

  const auto t0 = std::time(nullptr);
  Json j(3);
  j.begin_obj();
  j.kv_str("format", "clustersim-overlap-bench/1");
  j.kv_str("source", "calibration/nccl/src/overlap_bench.cu");
  j.kv_str("units", "bytes, seconds, FLOP/s, bytes/s");
  j.kv_str("method",
           "one process drives n GPUs; per GPU a compute stream and a communication stream (non-blocking, default "
           "priority). Compute: bf16 GEMM out[m,n] = A[m,k] B[n,k]^T via cublasGemmEx (CUBLAS_COMPUTE_32F, default "
           "algorithm, random inputs), or a copy kernel (16-byte vectors, 2 per thread, 256 threads a block, a grid "
           "covering the buffer). Collectives: NCCL float32 sum; bytes = all_reduce buffer, all_gather output, "
           "reduce_scatter input (nccl-tests). Each sample is enqueued behind a gate kernel so no host launch gaps "
           "enter. 'alone': one side back-to-back for ~window_s. 'compute_under_comm': collectives back-to-back "
           "from before until after a ~window_s compute window (coverage = fraction of the compute window during "
           "which collectives ran, min over ranks). 'comm_under_compute': the same with roles swapped. 'paired': "
           "both start together with windows of equal length alone; overlap_fraction = (T_compute_alone + "
           "T_comm_alone - makespan) / min(T_compute_alone, T_comm_alone). Compute time per kernel: mean over ranks "
           "(and slowest rank); collective time per call: slowest rank. Medians over reps. slowdown = "
           "overlapped / alone");
  j.kv_num("window_s", o.window_s);
  j.kv_num("background_factor", o.long_factor);
  j.kv_int("reps", o.reps);
  j.kv_raw("provenance", benchc::provenance_json(o.command_line, o.quick, "1"));
  j.key("runs").begin_arr();
  std::vector<std::string> summary;
  int total_timeouts = 0;
  for (int n : o.gpu_counts) {
    const size_t unit = sizeof(float) * size_t(n);
    World w = make_world(n, (max_size + unit - 1) / unit * unit, o);
    benchc::Gate gate(n);
    w.gate = &gate;
    const Compute* none = nullptr;
    j.begin_obj().kv_int("gpus", n);

    // Warm-up and alone times: compute kinds.
    std::vector<double> k_alone(o.computes.size()), k_alone_max(o.computes.size());
    std::vector<int> k_calls(o.computes.size());
    j.key("compute_alone").begin_arr();
    for (size_t ci = 0; ci < o.computes.size(); ++ci) {
      const Compute& c = o.computes[ci];
      run_sample(w, &c, 3, Op::all_reduce, 0, 0, 'k');  // warm-up (cuBLAS picks its kernel)
      double one_mean, one_max;
      compute_times(run_sample(w, &c, 2, Op::all_reduce, 0, 0, 'k'), 2, one_mean, one_max);
      k_calls[ci] = calls_for(o.window_s, one_mean, o.max_calls);
      std::vector<double> tm, tx;
      int to = 0;
      for (int rep = 0; rep < o.reps; ++rep) {
        const Sample s = run_sample(w, &c, k_calls[ci], Op::all_reduce, 0, 0, 'k');
        double a, b;
        compute_times(s, k_calls[ci], a, b);
        tm.push_back(a), tx.push_back(b), to += s.gate_timeouts;
      }
      k_alone[ci] = median_of(tm), k_alone_max[ci] = median_of(tx);
      total_timeouts += to;
      j.begin_obj().kv_str("compute", c.name).kv_bool("gemm", c.gemm);
      if (c.gemm) j.kv_int("m", c.m).kv_int("n", c.n).kv_int("k", c.k).kv_num("flop", c.flop());
      else j.kv_int("bytes_copied", (long long)c.bytes).kv_int("bytes_moved", (long long)(2 * c.bytes));
      j.kv_num("time_s", k_alone[ci]).kv_num("time_slowest_rank_s", k_alone_max[ci]).kv_int("calls", k_calls[ci]);
      if (c.gemm) j.kv_num("tflops", c.flop() / k_alone[ci] / 1e12);
      else j.kv_num("bandwidth_rw_Bps", 2.0 * double(c.bytes) / k_alone[ci]);
      j.kv_int("gate_timeouts", to).end_obj();
      std::printf("%d GPUs  %-24s alone %9.3f us  (%d calls a window)\n", n, c.name.c_str(), 1e6 * k_alone[ci],
                  k_calls[ci]);
      std::fflush(stdout);
    }
    j.end_arr();

    // Alone times: collectives.
    struct CommKey { Op op; size_t bytes; double alone; int calls; };
    std::vector<CommKey> comms;
    j.key("comm_alone").begin_arr();
    for (Op op : o.ops)
      for (size_t s0 : o.sizes) {
        const size_t bytes = std::max(unit, s0 / unit * unit);
        run_sample(w, none, 0, op, bytes, 3, 'c');  // warm-up
        const double one = comm_time(run_sample(w, none, 0, op, bytes, 2, 'c'), 2);
        const int calls = calls_for(o.window_s, one, o.max_calls);
        std::vector<double> t;
        int to = 0;
        for (int rep = 0; rep < o.reps; ++rep) {
          const Sample s = run_sample(w, none, 0, op, bytes, calls, 'c');
          t.push_back(comm_time(s, calls)), to += s.gate_timeouts;
        }
        const double alone = median_of(t);
        total_timeouts += to;
        comms.push_back({op, bytes, alone, calls});
        j.begin_obj().kv_str("op", op_name(op)).kv_int("bytes", (long long)bytes).kv_num("time_s", alone);
        j.kv_num("busbw_Bps", double(bytes) / alone * bus_factor(op, n)).kv_int("calls", calls);
        j.kv_int("gate_timeouts", to).end_obj();
        std::printf("%d GPUs  %-15s %10zu B alone %9.3f us  busbw %6.1f GB/s\n", n, op_name(op), bytes, 1e6 * alone,
                    1e-9 * double(bytes) / alone * bus_factor(op, n));
        std::fflush(stdout);
      }
    j.end_arr();

    // Overlapped.
    j.key("overlap").begin_arr();
    for (size_t ci = 0; ci < o.computes.size(); ++ci) {
      const Compute& c = o.computes[ci];
      for (const CommKey& ck : comms) {
        const double tk = k_alone[ci], tc = ck.alone;
        const int nk = k_calls[ci], nc = ck.calls;
        // (1) compute under communication: collectives cover the compute window and more.
        const int nc_bg = std::clamp(int(std::ceil(o.long_factor * nk * tk / tc)) + 2, 3, o.max_calls);
        // (2) communication under compute.
        const int nk_bg = std::clamp(int(std::ceil(o.long_factor * nc * tc / tk)) + 2, 3, o.max_calls);
        std::vector<double> k_over, k_over_max, k_cov, c_over, c_cov, mk, pk, pc, pk_win, pc_win;
        int to = 0;
        for (int rep = 0; rep < o.reps; ++rep) {
          Sample s = run_sample(w, &c, nk, ck.op, ck.bytes, nc_bg, 'c');
          double a, b;
          compute_times(s, nk, a, b);
          k_over.push_back(a), k_over_max.push_back(b);
          std::vector<double> cov;
          for (int i = 0; i < n; ++i)
            cov.push_back(std::clamp((s.c_end[i] - s.k_start[i]) / (s.k_end[i] - s.k_start[i]), 0.0, 1.0));
          k_cov.push_back(vmin(cov));
          to += s.gate_timeouts;

          s = run_sample(w, &c, nk_bg, ck.op, ck.bytes, nc, 'k');
          c_over.push_back(comm_time(s, nc));
          cov.clear();
          for (int i = 0; i < n; ++i)
            cov.push_back(std::clamp((s.k_end[i] - s.c_start[i]) / (s.c_end[i] - s.c_start[i]), 0.0, 1.0));
          c_cov.push_back(vmin(cov));
          to += s.gate_timeouts;

          // (3) paired: windows of equal length alone, started together.
          const double target = std::max(nk * tk, nc * tc);
          const int pnk = calls_for(target, tk, o.max_calls), pnc = calls_for(target, tc, o.max_calls);
          s = run_sample(w, &c, pnk, ck.op, ck.bytes, pnc, 'p');
          std::vector<double> span, kw, cw;
          for (int i = 0; i < n; ++i) {
            span.push_back(std::max(s.k_end[i], s.c_end[i]) - std::min(s.k_start[i], s.c_start[i]));
            kw.push_back(s.k_end[i] - s.k_start[i]);
            cw.push_back(s.c_end[i] - s.c_start[i]);
          }
          mk.push_back(vmax(span)), pk.push_back(pnk * tk), pc.push_back(pnc * tc);
          pk_win.push_back(mean(kw)), pc_win.push_back(vmax(cw));
          to += s.gate_timeouts;
        }
        total_timeouts += to;
        const double ko = median_of(k_over), co = median_of(c_over);
        const double makespan = median_of(mk), tka = median_of(pk), tca = median_of(pc);
        const double frac = (tka + tca - makespan) / std::min(tka, tca);
        j.begin_obj().kv_str("compute", c.name).kv_str("op", op_name(ck.op)).kv_int("bytes", (long long)ck.bytes);
        j.kv_num("compute_alone_s", tk).kv_num("compute_overlapped_s", ko).kv_num("compute_slowdown", ko / tk);
        j.kv_num("compute_overlapped_slowest_rank_s", median_of(k_over_max));
        j.kv_num("compute_coverage", median_of(k_cov)).kv_int("compute_calls", nk).kv_int("comm_background_calls", nc_bg);
        j.kv_num("comm_alone_s", tc).kv_num("comm_overlapped_s", co).kv_num("comm_slowdown", co / tc);
        j.kv_num("comm_busbw_alone_Bps", double(ck.bytes) / tc * bus_factor(ck.op, n));
        j.kv_num("comm_busbw_overlapped_Bps", double(ck.bytes) / co * bus_factor(ck.op, n));
        j.kv_num("comm_coverage", median_of(c_cov)).kv_int("comm_calls", nc).kv_int("compute_background_calls", nk_bg);
        j.key("paired").begin_obj();
        j.kv_num("compute_window_alone_s", tka).kv_num("comm_window_alone_s", tca).kv_num("makespan_s", makespan);
        j.kv_num("compute_window_s", median_of(pk_win)).kv_num("comm_window_s", median_of(pc_win));
        j.kv_num("serial_s", tka + tca).kv_num("overlap_fraction", frac).end_obj();
        j.kv_int("gate_timeouts", to).end_obj();
        const std::string line =
            fmt("%d GPUs  %-24s + %-14s %4zu MiB: compute x%.3f (cov %.2f)  comm x%.3f (cov %.2f)  overlap %.2f", n,
                c.name.c_str(), op_name(ck.op), ck.bytes >> 20, ko / tk, median_of(k_cov), co / tc, median_of(c_cov),
                frac);
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        summary.push_back(line);
      }
    }
    j.end_arr();
    j.end_obj();
    w.gate = nullptr;
    destroy_world(w);
  }
  j.end_arr();
  j.key("summary").begin_arr();
  for (const auto& s : summary) j.str(s);
  j.end_arr();
  j.kv_int("gate_timeouts", total_timeouts);
  j.kv_num("wall_time_s", double(std::time(nullptr) - t0));
  j.end_obj();
  std::ofstream f(o.out);
  f << j.text() << '\n';
  if (!f) {
    std::fprintf(stderr, "error: could not write %s\n", o.out.c_str());
    return 1;
  }
  std::printf("wrote %s (%d gate timeouts)\n", o.out.c_str(), total_timeouts);
  return 0;
}

// Shared by clustersim-nccl-bench and clustersim-overlap-bench: error checks, small helpers,
// the launch gate and the provenance block of both JSON files.
//
// The launch gate. Both programs drive every GPU from one host thread (ncclCommInitAll and
// group calls, as nccl-tests' -g mode). Launching a collective on n GPUs from one thread
// costs several microseconds of host time per rank, which is as long as a small collective
// runs on the GPU: timed back-to-back, such a collective would measure the host, not the
// GPU. So every timed sample starts with a one-thread "gate" kernel on each stream that
// spins until the host has enqueued the whole sample and raised a flag in mapped host
// memory; the start events follow the gate, so the sample times GPU work only and all ranks
// start together. A gate gives up after a timeout (it never deadlocks if a launch blocks
// because the queue is full); the programs count those timeouts and write them out.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "json.h"

#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n    in: %s\n", cudaGetErrorName(err_),     \
                   __FILE__, __LINE__, cudaGetErrorString(err_), #call);                           \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

#define NCCL_CHECK(call)                                                                           \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      std::fprintf(stderr, "NCCL error %d at %s:%d: %s\n    in: %s\n", static_cast<int>(r_),       \
                   __FILE__, __LINE__, ncclGetErrorString(r_), #call);                             \
      std::exit(3);                                                                                \
    }                                                                                              \
  } while (0)

namespace benchc {

inline std::string fmt(const char* f, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof(buf), f, ap);
  va_end(ap);
  return buf;
}

inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

inline std::string run_capture(const char* cmd) {
  std::string out;
  FILE* p = popen(cmd, "r");
  if (!p) return "";
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

inline double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = s.find(sep, start);
    parts.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until *flag >= generation, or gives up after timeout_ns and sets *timed_out.
__global__ void gate_kernel(const volatile int* flag, int generation, unsigned long long timeout_ns,
                            volatile int* timed_out) {
  const unsigned long long t0 = global_ns();
  while (*flag < generation) {
    if (global_ns() - t0 > timeout_ns) {
      *timed_out = 1;
      return;
    }
    __nanosleep(200);
  }
}

// One flag for all GPUs (mapped, portable host memory) and one timeout word per rank.
class Gate {
 public:
  explicit Gate(int ranks, double timeout_s = 0.5) : ranks_(ranks), timeout_ns_((unsigned long long)(timeout_s * 1e9)) {
    CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flag_), sizeof(int) * (1 + ranks),
                             cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(flag_, 0, sizeof(int) * (1 + ranks));
  }
  ~Gate() { cudaFreeHost(flag_); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // Starts a new sample; then hold(rank, stream) on every stream that must wait.
  void arm() {
    ++generation_;
    for (int r = 0; r < ranks_; ++r) flag_[1 + r] = 0;
  }
  // Enqueues the gate kernel on `stream` (the current device must be the stream's).
  void hold(int rank, cudaStream_t stream) {
    gate_kernel<<<1, 1, 0, stream>>>(flag_, generation_, timeout_ns_, flag_ + 1 + rank);
    CUDA_CHECK(cudaGetLastError());
  }
  void release() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *reinterpret_cast<volatile int*>(flag_) = generation_;
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  // After the streams were synchronised: how many ranks' gates gave up.
  int timeouts() const {
    int n = 0;
    for (int r = 0; r < ranks_; ++r) n += reinterpret_cast<volatile int*>(flag_)[1 + r] != 0;
    return n;
  }

 private:
  int ranks_;
  unsigned long long timeout_ns_;
  int* flag_ = nullptr;
  int generation_ = 0;
};

// Provenance block shared by both programs' JSON files.
inline std::string provenance_json(const std::string& command_line, bool quick, const std::string& version) {
  mb::Json j(2);
  int device_count = 0, driver = 0, runtime = 0, nccl = 0;
  CUDA_CHECK(cudaGetDeviceCount(&device_count));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  NCCL_CHECK(ncclGetVersion(&nccl));
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  j.begin_obj();
  j.key("gpus").begin_arr();
  for (int d = 0; d < device_count; ++d) {
    cudaDeviceProp p{};
    CUDA_CHECK(cudaGetDeviceProperties(&p, d));
    j.begin_obj().kv_int("index", d).kv_str("name", p.name).kv_int("sm_count", p.multiProcessorCount);
    j.kv_int("total_memory_bytes", static_cast<long long>(p.totalGlobalMem));
    char bus[32] = {0};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof(bus), d));
    j.kv_str("pci_bus_id", bus).end_obj();
  }
  j.end_arr();
  // Peer access and CUDA's relative performance rank of each GPU pair (lower is better).
  j.key("p2p").begin_arr();
  for (int a = 0; a < device_count; ++a)
    for (int b = 0; b < device_count; ++b) {
      if (a == b) continue;
      int access = 0, rank = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&access, a, b));
      CUDA_CHECK(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, a, b));
      j.begin_obj().kv_int("from", a).kv_int("to", b).kv_bool("access", access != 0).kv_int("performance_rank", rank).end_obj();
    }
  j.end_arr();
  j.kv_int("cuda_driver_version", driver);
  j.kv_int("cuda_runtime_version", runtime);
  j.kv_int("nccl_version_code", nccl);
  j.kv_str("nccl_version", fmt("%d.%d.%d", nccl / 10000, (nccl / 100) % 100, nccl % 100));
  j.kv_int("nccl_header_version_code", NCCL_VERSION_CODE);  // differs from the above if mixed up
#ifdef CLUSTERSIM_NCCL_LIBRARY
  j.kv_str("nccl_library_linked", CLUSTERSIM_NCCL_LIBRARY);
#endif
  j.kv_str("nvidia_driver", run_capture("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1"));
  j.kv_str("nvidia_smi_gpus",
           run_capture("nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total,clocks.max.sm,clocks.max.mem,"
                       "clocks.sm,power.limit,temperature.gpu --format=csv 2>&1"));
  j.kv_str("topology", run_capture("nvidia-smi topo -m 2>&1"));
  j.kv_str("nvlink_status_gpu0", run_capture("nvidia-smi nvlink --status -i 0 2>&1 | head -40"));
  j.key("environment").begin_obj();
  for (const char* v : {"NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
                        "NCCL_IB_DISABLE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_CTAS",
                        "NCCL_MAX_CTAS", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS"}) {
    const char* val = std::getenv(v);
    if (val) j.kv_str(v, val); else j.key(v).null();
  }
  j.end_obj();
  j.kv_str("hostname", host);
  j.kv_str("date_utc", utc_now());
  j.kv_str("command_line", command_line);
  j.kv_bool("quick", quick);
  j.kv_str("bench_version", version);
  j.end_obj();
  return j.text();
}

// NVLink multicast (NVLS) stays off: on shared hosts it can take the GPUs out of service.
inline bool nvls_off_or_complain() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  if (std::string(std::getenv("NCCL_NVLS_ENABLE")) != "0") {
    std::fprintf(stderr, "error: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)\n");
    return false;
  }
  return true;
}

}  // namespace benchc

// cudaMemcpy bandwidth (D2D, pinned H2D / D2H) and kernel launch overhead.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "common.cuh"

namespace mb {
namespace {

__global__ void empty_kernel() {}

// Busy-waits `ns` nanoseconds of the GPU's global timer: a stream held back while the host
// queues launches behind it.
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

double now_s() {
  using clk = std::chrono::steady_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

}  // namespace

void run_copy_section(const Options& opt, const DeviceInfo& dev, cudaStream_t stream, Json& j,
                      Summary& sum) {
  (void)dev;
  const int d2d_max_log2 = opt.quick ? 28 : 31;  // 256 MiB / 2 GiB
  const int host_max_log2 = opt.quick ? 26 : 30; // 64 MiB / 1 GiB
  const size_t d2d_max = static_cast<size_t>(1) << d2d_max_log2;
  const size_t host_max = static_cast<size_t>(1) << host_max_log2;

  void* d0 = nullptr;
  void* d1 = nullptr;
  void* h = nullptr;
  CUDA_CHECK(cudaMalloc(&d0, d2d_max));
  CUDA_CHECK(cudaMalloc(&d1, d2d_max));
  CUDA_CHECK(cudaMallocHost(&h, host_max));
  fill_uniform(d0, DType::F32, d2d_max / 4, 21, -1.f, 1.f, stream);
  fill_uniform(d1, DType::F32, d2d_max / 4, 22, -1.f, 1.f, stream);
  {
    unsigned char* hp = static_cast<unsigned char*>(h);
    for (size_t i = 0; i < host_max; i += 4096) hp[i] = static_cast<unsigned char>(i * 2654435761u >> 24);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));

  TimingConfig tc;
  tc.target_sample_s = 1.0e-3;
  tc.budget_s = opt.quick ? 0.01 : 0.05;
  tc.min_samples = opt.quick ? 3 : 10;
  tc.max_samples = 50;
  tc.max_inner = 1000;
  tc.allow_graph = false;  // plain cudaMemcpyAsync calls, as a framework issues them

  j.begin_obj();
  j.kv_str("api", "cudaMemcpyAsync on one stream; host buffers pinned (cudaMallocHost)");
  j.kv_str("bandwidth_convention",
           "bandwidth_Bps = bytes copied / time; for D2D also bandwidth_rw_Bps = 2 * bytes / time "
           "(bytes read + bytes written)");
  j.key("results").begin_arr();
  double d2d_best = 0, h2d_best = 0, d2h_best = 0;
  double d2d_small = 0;
  double d2d_largest = 0, h2d_largest = 0, d2h_largest = 0;  // at the largest size (HBM, not L2)
  size_t d2d_best_bytes = 0;
  for (int dir = 0; dir < 3; ++dir) {
    const char* name = dir == 0 ? "d2d" : (dir == 1 ? "h2d" : "d2h");
    int max_log2 = dir == 0 ? d2d_max_log2 : host_max_log2;
    for (int lg = 10; lg <= max_log2; ++lg) {
      size_t bytes = static_cast<size_t>(1) << lg;
      LaunchFn fn = [&, dir, bytes](cudaStream_t s) -> int {
        cudaError_t e;
        if (dir == 0)
          e = cudaMemcpyAsync(d1, d0, bytes, cudaMemcpyDeviceToDevice, s);
        else if (dir == 1)
          e = cudaMemcpyAsync(d1, h, bytes, cudaMemcpyHostToDevice, s);
        else
          e = cudaMemcpyAsync(h, d0, bytes, cudaMemcpyDeviceToHost, s);
        return e == cudaSuccess ? 0 : static_cast<int>(e);
      };
      Timing t = time_op(stream, fn, tc);
      double bw = bytes / t.median_s;
      j.begin_obj();
      j.kv_str("direction", name);
      j.kv_int("bytes", static_cast<long long>(bytes));
      write_timing(j, t);
      j.kv_num("bandwidth_Bps", bw);
      if (dir == 0) j.kv_num("bandwidth_rw_Bps", 2.0 * bw);
      j.end_obj();
      if (dir == 0) {
        if (bw > d2d_best) {
          d2d_best = bw;
          d2d_best_bytes = bytes;
        }
        if (lg == 10) d2d_small = t.median_s;
        if (lg == max_log2) d2d_largest = bw;
      }
      if (dir == 1) {
        h2d_best = std::max(h2d_best, bw);
        if (lg == max_log2) h2d_largest = bw;
      }
      if (dir == 2) {
        d2h_best = std::max(d2h_best, bw);
        if (lg == max_log2) d2h_largest = bw;
      }
    }
  }
  j.end_arr();
  j.key("summary").begin_obj();
  j.kv_int("d2d_largest_bytes", static_cast<long long>(d2d_max));
  j.kv_num("d2d_largest_bandwidth_Bps", d2d_largest);
  j.kv_num("d2d_largest_bandwidth_rw_Bps", 2 * d2d_largest);
  j.kv_num("d2d_peak_bandwidth_Bps", d2d_best);
  j.kv_num("d2d_peak_bandwidth_rw_Bps", 2 * d2d_best);
  j.kv_int("d2d_peak_bytes", static_cast<long long>(d2d_best_bytes));
  j.kv_str("d2d_peak_note", "peak over sizes; sizes whose source + destination fit in L2 exceed HBM bandwidth");
  j.kv_int("host_largest_bytes", static_cast<long long>(host_max));
  j.kv_num("h2d_largest_bandwidth_Bps", h2d_largest);
  j.kv_num("d2h_largest_bandwidth_Bps", d2h_largest);
  j.kv_num("h2d_peak_bandwidth_Bps", h2d_best);
  j.kv_num("d2h_peak_bandwidth_Bps", d2h_best);
  j.kv_num("d2d_1KiB_time_s", d2d_small);
  j.end_obj();
  j.end_obj();

  sum.add(fmt("memcpy D2D (HBM) %.0f GB/s copied = %.0f GB/s read+write at %zu MiB; peak over sizes "
              "%.0f GB/s at %zu KiB (L2-resident); 1 KiB copy %.2f us",
              d2d_largest / 1e9, 2 * d2d_largest / 1e9, d2d_max >> 20, d2d_best / 1e9,
              d2d_best_bytes >> 10, d2d_small * 1e6));
  sum.add(fmt("memcpy pinned H2D %.1f GB/s, D2H %.1f GB/s at %zu MiB (peak over sizes %.1f / %.1f)",
              h2d_largest / 1e9, d2h_largest / 1e9, host_max >> 20, h2d_best / 1e9, d2h_best / 1e9));

  CUDA_CHECK(cudaFree(d0));
  CUDA_CHECK(cudaFree(d1));
  CUDA_CHECK(cudaFreeHost(h));
}

void run_launch_section(const Options& opt, const DeviceInfo& dev, cudaStream_t stream, Json& j,
                        Summary& sum) {
  (void)dev;
  const int n_async = opt.quick ? 5000 : 20000;
  const int n_sync = opt.quick ? 500 : 2000;
  const int graph_nodes = 1000;
  const int graph_reps = opt.quick ? 5 : 20;

  // Warm-up.
  for (int i = 0; i < 200; ++i) empty_kernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK_LAUNCH();
  CUDA_CHECK(cudaStreamSynchronize(stream));

  // 1) Back-to-back asynchronous launches: host submit rate and GPU time per kernel.
  std::vector<double> async_host, async_gpu;
  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  for (int rep = 0; rep < 5; ++rep) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    double t0 = now_s();
    CUDA_CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < n_async; ++i) empty_kernel<<<1, 1, 0, stream>>>();
    CUDA_CHECK(cudaEventRecord(e1, stream));
    double t_submit = now_s() - t0;
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventSynchronize(e1));
    double t_total = now_s() - t0;
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    async_host.push_back(t_submit / n_async);
    async_gpu.push_back(1e-3 * ms / n_async);
    (void)t_total;
  }

  // 2) Synchronous latency: launch + cudaStreamSynchronize, host clock.
  std::vector<double> sync_lat;
  sync_lat.reserve(n_sync);
  for (int i = 0; i < n_sync; ++i) {
    double t0 = now_s();
    empty_kernel<<<1, 1, 0, stream>>>();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    sync_lat.push_back(now_s() - t0);
  }
  CUDA_CHECK_LAUNCH();

  // 3) CUDA graph of `graph_nodes` empty kernels: time per node.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < graph_nodes; ++i) empty_kernel<<<1, 1, 0, stream>>>();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0ULL));
  CUDA_CHECK(cudaGraphLaunch(exec, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> graph_node;
  for (int r = 0; r < graph_reps; ++r) {
    CUDA_CHECK(cudaEventRecord(e0, stream));
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaEventRecord(e1, stream));
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    graph_node.push_back(1e-3 * ms / graph_nodes);
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));

  // 4) Queued launches: `n_queued` empty kernels enqueued while a spin kernel holds the
  // stream, so that the host is ahead when the GPU starts on them; the GPU's time per
  // launch from the spin's end (e0) to the last kernel's (e1) is the front end's gap between
  // queued kernels, what a GPU-bound eager stream pays per kernel. The host's submit time is
  // recorded beside it (it must stay below the spin for the queue to have been full).
  const int n_queued = 512;
  const double spin_s = 0.02;
  std::vector<double> queued_gpu, queued_submit;
  for (int rep = 0; rep < 7; ++rep) {
    CUDA_CHECK(cudaStreamSynchronize(stream));
    spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(spin_s * 1e9));
    double t0 = now_s();
    CUDA_CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < n_queued; ++i) empty_kernel<<<1, 1, 0, stream>>>();
    CUDA_CHECK(cudaEventRecord(e1, stream));
    queued_submit.push_back(now_s() - t0);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    queued_gpu.push_back(1e-3 * ms / n_queued);
  }

  // 5) Event record + synchronize round trip with no kernel.
  std::vector<double> ev_rt;
  for (int i = 0; i < n_sync / 4; ++i) {
    double t0 = now_s();
    CUDA_CHECK(cudaEventRecord(e0, stream));
    CUDA_CHECK(cudaEventSynchronize(e0));
    ev_rt.push_back(now_s() - t0);
  }
  CUDA_CHECK(cudaEventDestroy(e0));
  CUDA_CHECK(cudaEventDestroy(e1));

  auto stats = [&](const std::string& key, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    j.key(key).begin_obj();
    j.kv_num("median_s", median_of(v));
    j.kv_num("min_s", v.front());
    j.kv_num("max_s", v.back());
    j.kv_int("samples", static_cast<long long>(v.size()));
    j.end_obj();
  };

  j.begin_obj();
  j.kv_str("kernel", "empty __global__ kernel, <<<1, 1>>> on a non-blocking stream");
  j.kv_int("async_launches_per_sample", n_async);
  stats("async_host_submit_per_launch", async_host);
  stats("async_gpu_time_per_launch", async_gpu);
  stats("sync_launch_latency", sync_lat);
  j.kv_int("graph_nodes", graph_nodes);
  stats("graph_gpu_time_per_node", graph_node);
  stats("event_record_sync_roundtrip", ev_rt);
  j.kv_int("queued_launches_per_sample", n_queued);
  j.kv_num("queued_spin_s", spin_s);
  stats("queued_gpu_time_per_launch", queued_gpu);
  stats("queued_host_submit_s", queued_submit);
  j.end_obj();

  sum.add(fmt("launch: async submit %.2f us/launch, GPU %.2f us/launch back-to-back, "
              "sync launch latency %.2f us, graph %.2f us/node, queued behind a spin %.2f us/launch "
              "(submitted in %.2f ms of the %.0f ms spin)",
              median_of(async_host) * 1e6, median_of(async_gpu) * 1e6, median_of(sync_lat) * 1e6,
              median_of(graph_node) * 1e6, median_of(queued_gpu) * 1e6, median_of(queued_submit) * 1e3,
              spin_s * 1e3));
}

}  // namespace mb

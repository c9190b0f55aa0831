// clustersim-nccl-bench: times NCCL collectives (all-reduce, all-gather, reduce-scatter,
// all-to-all, broadcast, send/recv) over message sizes on 1..N GPUs of one host and writes
// algorithm and bus bandwidth per size (nccl-tests conventions), with provenance, to JSON.
//
// One process drives every GPU of a communicator (ncclCommInitAll + group calls, like
// nccl-tests' -g mode), so one run covers every GPU count asked for (--gpus 2,4,8).
//
//   clustersim-nccl-bench [--gpus LIST] [--min-bytes N] [--max-bytes N] [--factor F]
//                         [--ops LIST] [--out FILE] [--quick] [--no-gate]
//
// Each timed sample is enqueued behind a gate kernel (bench_common.h) so that one host thread
// launching for every GPU does not limit small messages; --no-gate times plain launches.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "bench_common.h"

namespace {

using mb::Json;
using benchc::median_of;
using benchc::split;

enum class Op { all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send_recv };
const Op kAllOps[] = {Op::all_reduce, Op::all_gather, Op::reduce_scatter,
                      Op::all_to_all, Op::broadcast,  Op::send_recv};

const char* op_name(Op op) {
  switch (op) {
    case Op::all_reduce: return "all_reduce";
    case Op::all_gather: return "all_gather";
    case Op::reduce_scatter: return "reduce_scatter";
    case Op::all_to_all: return "all_to_all";
    case Op::broadcast: return "broadcast";
    case Op::send_recv: return "send_recv";
  }
  return "?";
}

// nccl-tests' bus-bandwidth factor: busbw = algbw * factor makes every collective
// comparable with the link's bandwidth (a ring moves (n-1)/n of the data per step, twice
// for all-reduce). send_recv is a ring shift: every rank sends `bytes` to its successor.
double bus_factor(Op op, int n) {
  const double d = n;
  switch (op) {
    case Op::all_reduce: return 2.0 * (d - 1) / d;
    case Op::all_gather:
    case Op::reduce_scatter:
    case Op::all_to_all: return (d - 1) / d;
    case Op::broadcast:
    case Op::send_recv: return 1.0;
  }
  return 1.0;
}

struct Options {
  std::vector<int> gpu_counts;  // empty: every power of two up to the device count, and the count
  size_t min_bytes = 1024;
  size_t max_bytes = size_t(4) << 30;
  double factor = 2;
  std::vector<Op> ops{std::begin(kAllOps), std::end(kAllOps)};
  std::string out = "nccl_bench.json";
  bool quick = false;
  double target_sample_s = 1e-3;  // one timed sample lasts at least this long
  double budget_s = 0.03;         // timed time per (op, size)
  int min_samples = 5, max_samples = 12;
  int max_inner = 400;            // operations per sample (queued behind the gate)
  bool gate = true;               // --no-gate: time plain back-to-back launches (host-bound when small)
  std::string command_line;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr,
               "error: %s\n"
               "usage: clustersim-nccl-bench [--gpus 1,2,4,8] [--min-bytes N] [--max-bytes N] [--factor F]\n"
               "         [--ops all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv]\n"
               "         [--out FILE] [--quick] [--no-gate]\n",
               msg.c_str());
  std::exit(1);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
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
      for (const auto& p : split(value(), ',')) o.gpu_counts.push_back(int(number(p)));
    } else if (a == "--min-bytes") {
      o.min_bytes = size_t(number(value()));
    } else if (a == "--max-bytes") {
      o.max_bytes = size_t(number(value()));
    } else if (a == "--factor") {
      o.factor = number(value());
      if (o.factor < 1.01) usage_error("--factor must be above 1");
    } else if (a == "--ops") {
      o.ops.clear();
      for (const auto& p : split(value(), ',')) {
        bool found = false;
        for (Op op : kAllOps)
          if (p == op_name(op)) o.ops.push_back(op), found = true;
        if (!found) usage_error("unknown operation " + p);
      }
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--no-gate") {
      o.gate = false;
    } else {
      usage_error("unknown argument " + a);
    }
  }
  if (o.quick) {
    o.factor = std::max(o.factor, 16.0);
    o.max_bytes = std::min(o.max_bytes, size_t(256) << 20);
    o.budget_s = 0.005;
    o.min_samples = 3;
  }
  if (o.min_bytes > o.max_bytes) usage_error("--min-bytes is above --max-bytes");
  return o;
}

// One communicator over the first `n` GPUs, with a stream, events and buffers per rank.
struct Rank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

struct World {
  std::vector<Rank> ranks;
  benchc::Gate* gate = nullptr;  // holds each timed sample until all of it is enqueued
  size_t buffer_bytes = 0;  // each of send and recv, per rank
  int size() const { return int(ranks.size()); }
};

World make_world(int n, size_t buffer_bytes) {
  World w;
  w.buffer_bytes = buffer_bytes;
  w.ranks.resize(n);
  std::vector<int> devs(n);
  std::vector<ncclComm_t> comms(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  for (int i = 0; i < n; ++i) {
    Rank& r = w.ranks[i];
    r.device = i;
    r.comm = comms[i];
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&r.start));
    CUDA_CHECK(cudaEventCreate(&r.stop));
    CUDA_CHECK(cudaMalloc(&r.send, buffer_bytes));
    CUDA_CHECK(cudaMalloc(&r.recv, buffer_bytes));
    CUDA_CHECK(cudaMemset(r.send, 0, buffer_bytes));
    CUDA_CHECK(cudaMemset(r.recv, 0, buffer_bytes));
  }
  for (int i = 0; i < n; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  return w;
}

void destroy_world(World& w) {
  for (Rank& r : w.ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaStreamSynchronize(r.stream));
    NCCL_CHECK(ncclCommDestroy(r.comm));
    CUDA_CHECK(cudaFree(r.send));
    CUDA_CHECK(cudaFree(r.recv));
    CUDA_CHECK(cudaEventDestroy(r.start));
    CUDA_CHECK(cudaEventDestroy(r.stop));
    CUDA_CHECK(cudaStreamDestroy(r.stream));
  }
  w.ranks.clear();
}

// Enqueues one operation on every rank. `bytes` follows nccl-tests: the all-reduce buffer,
// the all-gather output, the reduce-scatter input, what each rank sends in all-to-all,
// the broadcast buffer, and what each rank sends in send/recv.
void enqueue(World& w, Op op, size_t bytes) {
  const int n = w.size();
  const size_t count = bytes / sizeof(float);  // elements of the whole buffer
  const size_t chunk = count / size_t(n);      // elements per rank's share
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    Rank& r = w.ranks[i];
    switch (op) {
      case Op::all_reduce:
        NCCL_CHECK(ncclAllReduce(r.send, r.recv, count, ncclFloat, ncclSum, r.comm, r.stream));
        break;
      case Op::all_gather:
        NCCL_CHECK(ncclAllGather(r.send, r.recv, chunk, ncclFloat, r.comm, r.stream));
        break;
      case Op::reduce_scatter:
        NCCL_CHECK(ncclReduceScatter(r.send, r.recv, chunk, ncclFloat, ncclSum, r.comm, r.stream));
        break;
      case Op::all_to_all:
        // As nccl-tests does it: one send and one receive per peer inside a group.
        for (int p = 0; p < n; ++p) {
          NCCL_CHECK(ncclSend(static_cast<float*>(r.send) + p * chunk, chunk, ncclFloat, p, r.comm, r.stream));
          NCCL_CHECK(ncclRecv(static_cast<float*>(r.recv) + p * chunk, chunk, ncclFloat, p, r.comm, r.stream));
        }
        break;
      case Op::broadcast:
        NCCL_CHECK(ncclBroadcast(r.send, r.recv, count, ncclFloat, 0, r.comm, r.stream));
        break;
      case Op::send_recv:
        NCCL_CHECK(ncclSend(r.send, count, ncclFloat, (i + 1) % n, r.comm, r.stream));
        NCCL_CHECK(ncclRecv(r.recv, count, ncclFloat, (i + n - 1) % n, r.comm, r.stream));
        break;
    }
  }
  NCCL_CHECK(ncclGroupEnd());
}

void sync_all(World& w) {
  for (Rank& r : w.ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaStreamSynchronize(r.stream));
  }
}

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int samples = 0, inner = 0;
  int gate_timeouts = 0;  // samples whose gate gave up before the host had enqueued them
};

// One sample: `inner` back-to-back operations between events on every rank's stream; the
// sample's time is the slowest rank's (a collective ends when its last rank ends). With the
// gate, every stream first waits for the host to enqueue the whole sample (bench_common.h).
double sample(World& w, Op op, size_t bytes, int inner, int* gate_timeouts = nullptr) {
  if (w.gate) w.gate->arm();
  for (int i = 0; i < w.size(); ++i) {
    Rank& r = w.ranks[i];
    CUDA_CHECK(cudaSetDevice(r.device));
    if (w.gate) w.gate->hold(i, r.stream);
    CUDA_CHECK(cudaEventRecord(r.start, r.stream));
  }
  for (int k = 0; k < inner; ++k) enqueue(w, op, bytes);
  for (Rank& r : w.ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaEventRecord(r.stop, r.stream));
  }
  if (w.gate) w.gate->release();
  double worst = 0;
  for (Rank& r : w.ranks) {
    CUDA_CHECK(cudaSetDevice(r.device));
    CUDA_CHECK(cudaEventSynchronize(r.stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop));
    worst = std::max(worst, 1e-3 * double(ms));
  }
  if (w.gate && gate_timeouts && w.gate->timeouts() > 0) ++*gate_timeouts;
  return worst;
}

Timing time_op(World& w, Op op, size_t bytes, const Options& o) {
  // Warm-up: connection set-up and NCCL's first-call work happen here.
  for (int k = 0; k < 3; ++k) enqueue(w, op, bytes);
  sync_all(w);
  const double one = std::max(sample(w, op, bytes, 1), 1e-7);
  Timing t;
  t.inner = std::clamp(int(std::ceil(o.target_sample_s / one)), 1, o.max_inner);
  t.samples = std::clamp(int(o.budget_s / (one * t.inner)), o.min_samples, o.max_samples);
  std::vector<double> per_op;
  for (int s = 0; s < t.samples; ++s) per_op.push_back(sample(w, op, bytes, t.inner, &t.gate_timeouts) / t.inner);
  t.median_s = median_of(per_op);
  t.min_s = *std::min_element(per_op.begin(), per_op.end());
  t.max_s = *std::max_element(per_op.begin(), per_op.end());
  return t;
}

// Correctness check before timing: rank i fills its buffer with i+1; the all-reduce sum is
// n(n+1)/2 everywhere and all-gather puts rank p's value in chunk p.
void fill(World& w, size_t count) {
  for (int i = 0; i < w.size(); ++i) {
    std::vector<float> host(count, float(i + 1));
    CUDA_CHECK(cudaSetDevice(w.ranks[i].device));
    CUDA_CHECK(cudaMemcpy(w.ranks[i].send, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  }
}

bool verify(World& w, std::string& note) {
  const int n = w.size();
  const size_t bytes = std::min<size_t>(w.buffer_bytes, size_t(1) << 20) / (sizeof(float) * n) * (sizeof(float) * n);
  const size_t count = bytes / sizeof(float), chunk = count / n;
  std::vector<float> host(count);
  bool ok = true;
  fill(w, count);
  enqueue(w, Op::all_reduce, bytes);
  sync_all(w);
  const float want = float(n) * float(n + 1) / 2;
  for (int i = 0; i < n && ok; ++i) {
    CUDA_CHECK(cudaSetDevice(w.ranks[i].device));
    CUDA_CHECK(cudaMemcpy(host.data(), w.ranks[i].recv, bytes, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < count && ok; ++k)
      if (host[k] != want) ok = false, note = benchc::fmt("all_reduce rank %d element %zu: %g, expected %g", i, k, host[k], want);
  }
  fill(w, count);
  enqueue(w, Op::all_gather, bytes);
  sync_all(w);
  for (int i = 0; i < n && ok; ++i) {
    CUDA_CHECK(cudaSetDevice(w.ranks[i].device));
    CUDA_CHECK(cudaMemcpy(host.data(), w.ranks[i].recv, bytes, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < count && ok; ++k)
      if (host[k] != float(k / chunk + 1))
        ok = false, note = benchc::fmt("all_gather rank %d element %zu: %g, expected %g", i, k, host[k], float(k / chunk + 1));
  }
  if (ok) note = benchc::fmt("all_reduce and all_gather of %zu bytes gave the expected values on every rank", bytes);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  // NVLink SHARP / multicast stays off: on shared hosts it can take the GPUs out of service.
  if (!benchc::nvls_off_or_complain()) return 1;
  int device_count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&device_count));
  if (o.gpu_counts.empty()) {
    for (int n = 1; n <= device_count; n *= 2) o.gpu_counts.push_back(n);
    if (o.gpu_counts.back() != device_count) o.gpu_counts.push_back(device_count);
  }
  for (int n : o.gpu_counts)
    if (n < 1 || n > device_count) usage_error(benchc::fmt("--gpus asks for %d GPUs; this host has %d", n, device_count));

  // Cap the largest message by memory: send and receive buffers of max_bytes on every GPU.
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  const size_t cap = free_b / 3;
  std::string cap_note;
  if (o.max_bytes > cap) {
    cap_note = benchc::fmt("--max-bytes %zu lowered to %zu (a third of GPU 0's free memory)", o.max_bytes, cap);
    o.max_bytes = cap;
  }
  std::vector<size_t> sizes;
  for (double b = double(o.min_bytes); b <= double(o.max_bytes) * 1.0000001; b *= o.factor) sizes.push_back(size_t(b));

  const auto t0 = std::time(nullptr);
  Json j(3);
  j.begin_obj();
  j.kv_str("format", "clustersim-nccl-bench/1");
  j.kv_str("source", "calibration/nccl/src/nccl_bench.cu");
  j.kv_str("units", "bytes, seconds, bytes/s (algbw, busbw)");
  j.kv_str("conventions",
           "bytes: all_reduce buffer, all_gather output, reduce_scatter input, all_to_all bytes sent per rank, "
           "broadcast buffer, send_recv bytes each rank sends to its successor (ring shift); float32 elements, sum; "
           "algbw = bytes / time; busbw = algbw * factor with factor 2(n-1)/n (all_reduce), (n-1)/n (all_gather, "
           "reduce_scatter, all_to_all), 1 (broadcast, send_recv); time = median over samples of the slowest rank's "
           "GPU time per operation, a sample being `inner` back-to-back operations between CUDA events");
  j.kv_str("timing",
           o.gate ? "gated: each sample's operations are all enqueued (one host thread drives every GPU) while a "
                    "one-thread gate kernel holds every stream; the start events follow the gate, so samples time "
                    "GPU work only, with no host launch gaps, and all ranks start together"
                  : "ungated (--no-gate): operations launched back-to-back by one host thread for all GPUs; small "
                    "sizes then measure the host's launch rate");
  j.kv_raw("provenance", benchc::provenance_json(o.command_line, o.quick, "2"));
  if (!cap_note.empty()) j.kv_str("note", cap_note);
  j.key("runs").begin_arr();
  std::vector<std::string> summary;
  bool all_ok = true;
  for (int n : o.gpu_counts) {
    // Round sizes to whole float elements per rank so every collective divides evenly.
    const size_t unit = sizeof(float) * size_t(n);
    World w = make_world(n, (o.max_bytes + unit - 1) / unit * unit);
    benchc::Gate gate(n);
    if (o.gate) w.gate = &gate;
    std::string note;
    const bool ok = verify(w, note);
    all_ok = all_ok && ok;
    std::printf("%d GPU(s): check %s: %s\n", n, ok ? "passed" : "FAILED", note.c_str());
    j.begin_obj().kv_int("gpus", n).kv_bool("check_passed", ok).kv_str("check", note);
    j.key("results").begin_arr();
    for (Op op : o.ops) {
      double best_bus = 0;
      size_t best_bytes = 0;
      double small_time = 0;
      for (size_t s : sizes) {
        const size_t bytes = std::max(unit, s / unit * unit);
        const Timing t = time_op(w, op, bytes, o);
        const double algbw = double(bytes) / t.median_s, busbw = algbw * bus_factor(op, n);
        j.begin_obj().kv_str("op", op_name(op)).kv_int("gpus", n).kv_int("bytes", static_cast<long long>(bytes));
        j.kv_num("time_s", t.median_s).kv_num("time_min_s", t.min_s).kv_num("time_max_s", t.max_s);
        j.kv_int("samples", t.samples).kv_int("inner", t.inner).kv_int("gate_timeouts", t.gate_timeouts);
        j.kv_num("algbw_Bps", algbw).kv_num("busbw_Bps", busbw).kv_num("bus_factor", bus_factor(op, n)).end_obj();
        if (busbw > best_bus) best_bus = busbw, best_bytes = bytes;
        if (small_time == 0) small_time = t.median_s;
      }
      const std::string line = benchc::fmt("%d GPU(s) %-15s smallest %8.2f us   peak busbw %8.1f GB/s at %zu B", n,
                                      op_name(op), 1e6 * small_time, 1e-9 * best_bus, best_bytes);
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      summary.push_back(line);
    }
    j.end_arr().end_obj();
    w.gate = nullptr;
    destroy_world(w);
  }
  j.end_arr();
  j.key("summary").begin_arr();
  for (const auto& s : summary) j.str(s);
  j.end_arr();
  j.kv_bool("all_checks_passed", all_ok);
  j.kv_num("wall_time_s", double(std::time(nullptr) - t0));
  j.end_obj();
  std::ofstream f(o.out);
  f << j.text() << '\n';
  if (!f) {
    std::fprintf(stderr, "error: could not write %s\n", o.out.c_str());
    return 1;
  }
  std::printf("wrote %s\n", o.out.c_str());
  return all_ok ? 0 : 5;
}

#include "costmodel/calibration.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <fmt/format.h>

#include "costmodel/kernels.hpp"
#include "costmodel/transfer.hpp"
#include "scenarios/json_reader.hpp"

namespace clustersim {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

namespace {

std::optional<DType> dtype_from(const std::string& s) {
  for (DType t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16, DType::fp8})
    if (to_string(t) == s) return t;
  return std::nullopt;
}

double positive(const nlohmann::json& o, const char* key, const std::string& path, Diagnostics& diag) {
  if (!o.contains(key) || !o.at(key).is_number() || !(o.at(key).get<double>() > 0)) {
    diag.error(json_path(path, key), fmt::format("expected a positive number, got {}",
                                                 o.contains(key) ? describe(o.at(key)) : "nothing"));
    return 0;
  }
  return o.at(key).get<double>();
}

ErrorStats stats(std::vector<double> errors) {
  ErrorStats s;
  s.count = errors.size();
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const auto at = [&](double q) { return errors[std::min(errors.size() - 1, static_cast<std::size_t>(q * (errors.size() - 1) + 0.5))]; };
  s.median = errors.size() % 2 ? errors[errors.size() / 2]
                               : 0.5 * (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]);
  s.p90 = at(0.9);
  s.max = errors.back();
  return s;
}

// The microbenchmark's kernel names say what kind of memory-bound kernel each is.
MemoryKind memory_kind_of(const std::string& kernel) {
  // Eager PyTorch's kernels by TensorIterator path (read_eager_kernels' names).
  if (kernel == "eager-strided") return MemoryKind::strided;
  if (kernel == "eager-broadcast") return MemoryKind::broadcast;
  if (kernel == "eager-silu_chunk" || kernel == "eager-transpose") return MemoryKind::noncontiguous;
  if (kernel == "eager-cast_up") return MemoryKind::cast_up;
  if (kernel == "eager-add_mixed") return MemoryKind::mixed_add;
  if (kernel == "eager-cat_cropped" || kernel == "eager-cat_first" || kernel == "eager-cat_halves")
    return MemoryKind::concat;
  if (kernel.rfind("layernorm", 0) == 0 || kernel.rfind("rmsnorm", 0) == 0) return MemoryKind::norm;
  if (kernel.rfind("softmax", 0) == 0) return MemoryKind::softmax;
  if (kernel.rfind("adam", 0) == 0) return MemoryKind::optimizer;
  return MemoryKind::elementwise;  // copies, activations, reductions
}

bool held_back(std::size_t index, int every) { return every > 0 && index % static_cast<std::size_t>(every) == static_cast<std::size_t>(every) - 1; }

// Host seconds per kernel of the measured transformer blocks ("block ..." cases of
// measure_host.py) in `cases`: host_per_call_s / kernels_per_call, or with rank >= 0 that
// rank's own figures (the *_per_rank arrays of a multi-rank file). These blocks are the
// yardstick a host-side cost measured on one machine is carried to another by.
std::vector<double> block_host_per_kernel(const nlohmann::json& cases, const std::string& path, int rank,
                                          Diagnostics& diag) {
  std::vector<double> v;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    if (!c.is_object() || c.value("case", "").rfind("block ", 0) != 0) continue;
    const auto figure = [&](const char* key) {
      if (rank < 0) return c.value(key, 0.0);
      const auto it = c.find(std::string(key) + "_per_rank");
      if (it == c.end() || !it->is_array() || it->size() <= static_cast<std::size_t>(rank) || !(*it)[rank].is_number())
        return 0.0;
      return (*it)[rank].get<double>();
    };
    const double host = figure("host_per_call_s"), kernels = figure("kernels_per_call");
    if (!(host > 0) || !(kernels > 0)) {
      diag.error(json_path(path, i), rank < 0 ? std::string("expected host_per_call_s > 0 and kernels_per_call > 0")
                                              : fmt::format("expected host_per_call_s_per_rank and kernels_per_call_per_rank "
                                                            "with a figure > 0 for rank {}", rank));
      continue;
    }
    v.push_back(host / kernels);
  }
  if (v.empty()) diag.error(path, "no case named \"block ...\" (measure_host.py's transformer blocks)");
  return v;
}

// A clustersim-host-dispatch file of measure_dtensor_params.py, its cases checked: every
// rank's figures sit in the *_per_rank arrays. Returns the number of ranks.
int ranked_cases(const nlohmann::json& doc, const char* script, Diagnostics& diag) {
  if (!doc.is_object() || doc.value("format", "") != "clustersim-host-dispatch/1") {
    diag.error("/format", fmt::format("expected \"clustersim-host-dispatch/1\" ({})", script));
    diag.throw_if_errors();
  }
  if (!doc.contains("cases") || !doc["cases"].is_array()) {
    diag.error("/cases", fmt::format("expected an array of measured cases ({})", script));
    diag.throw_if_errors();
  }
  const int ranks = doc.contains("environment") && doc["environment"].is_object()
                        ? doc["environment"].value("world_size", 0)
                        : 0;
  if (ranks < 1) diag.error("/environment/world_size", "expected the number of ranks (>= 1)");
  return std::max(ranks, 0);
}

// Rank r's host time per call of case i; 0 (and an error naming the field) where missing.
double rank_host_time(const nlohmann::json& cases, std::size_t i, int r, Diagnostics& diag) {
  const auto fig = cases[i].find("host_per_call_s_per_rank");
  if (fig == cases[i].end() || !fig->is_array() || fig->size() <= static_cast<std::size_t>(r) || !(*fig)[r].is_number() ||
      !((*fig)[r].get<double>() > 0)) {
    diag.error(json_path("/cases", i) + "/host_per_call_s_per_rank", fmt::format("expected a figure > 0 for rank {}", r));
    return 0.0;
  }
  return (*fig)[r].get<double>();
}

}  // namespace

namespace {
// The launch section of a clustersim-microbench document into mb.
void read_launch(const nlohmann::json& doc, Microbenchmarks& mb, Diagnostics& diag) {
  const nlohmann::json none = nlohmann::json::object();
  const auto& l = doc.is_object() && doc.contains("launch") && doc["launch"].is_object() ? doc["launch"] : none;
  if (doc.is_object() && doc.contains("launch") && !doc["launch"].is_object())
    diag.error("/launch", fmt::format("expected an object, got {}", doc["launch"].dump()));
  const auto stated = [&](const char* key) -> const nlohmann::json* {
    return l.contains(key) && l[key].is_object() && l[key].contains("median_s") ? &l[key]["median_s"] : nullptr;
  };
  // A key's median_s in seconds; an error naming it where it is given but not a positive number.
  const auto median = [&](const char* key) {
    const nlohmann::json* v = stated(key);
    if (!v) return 0.0;
    // A launch takes microseconds; a millisecond or more is a unit mistake.
    if (v->is_number() && v->get<double>() > 0 && v->get<double>() < 1e-3) return v->get<double>();
    diag.error(fmt::format("/launch/{}/median_s", key),
               fmt::format("expected seconds between 0 and 1e-3 (a launch), got {}", v->dump()));
    return 0.0;
  };
  mb.launch_gap = median("async_gpu_time_per_launch");
  if (!stated("async_gpu_time_per_launch"))
    diag.error("/launch/async_gpu_time_per_launch/median_s", "missing: no launch overhead");
  mb.sync_launch = median("sync_launch_latency");
  mb.launch_submit = median("async_host_submit_per_launch");
  mb.queued_gap = median("queued_gpu_time_per_launch");
}
}  // namespace

void read_launch_section(const std::string& file, Microbenchmarks& into) {
  const auto doc = read_json_file(file);
  Diagnostics diag(file);
  read_launch(doc, into, diag);
  diag.throw_if_errors();
}

Microbenchmarks read_microbenchmarks(const std::string& file) {
  const auto doc = read_json_file(file);
  Diagnostics diag(file);
  Microbenchmarks mb;
  mb.file = file;
  if (!doc.is_object()) throw InputError(file, "", "expected a clustersim-microbench JSON object");
  const auto& prov = doc.value("provenance", nlohmann::json::object());
  mb.provenance = prov;
  mb.gpu_name = prov.value("gpu_name", "");
  mb.sms = prov.value("sm_count", 0);
  mb.l2 = prov.value("l2_cache_bytes", 0.0);
  if (mb.gpu_name.empty()) diag.error("/provenance/gpu_name", "missing: the data must say which GPU it measured");

  if (doc.contains("gemm") && doc["gemm"].contains("results") && doc["gemm"]["results"].is_array()) {
    const auto& results = doc["gemm"]["results"];
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      const std::string path = json_path("/gemm/results", i);
      const auto dtype = dtype_from(r.value("dtype", ""));
      if (!dtype) continue;  // variants such as fp8 fast accumulation are not compute types of ours
      GemmSample s;
      s.dtype = *dtype;
      s.batch = r.value("batch", 1);
      s.m = r.value("m", 0);
      s.n = r.value("n", 0);
      s.k = r.value("k", 0);
      s.time = positive(r, "time_s", path, diag);
      if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1) diag.error(path, "expected positive batch, m, n, k");
      mb.gemm.push_back(s);
    }
  } else {
    diag.error("/gemm/results", "missing: no GEMM measurements");
  }
  if (doc.contains("membound") && doc["membound"].contains("results") && doc["membound"]["results"].is_array()) {
    const auto& results = doc["membound"]["results"];
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      const std::string path = json_path("/membound/results", i);
      mb.memory.push_back({r.value("kernel", ""), positive(r, "bytes", path, diag), positive(r, "time_s", path, diag)});
    }
  } else {
    diag.error("/membound/results", "missing: no memory-bound kernel measurements");
  }
  read_launch(doc, mb, diag);
  // Pinned copies reach their rate from tens of MiB; activation offload moves whole
  // layers' activations (hundreds of MiB), so the best rate over the sizes is the one.
  if (doc.contains("memcpy") && doc["memcpy"].contains("results") && doc["memcpy"]["results"].is_array()) {
    const auto& results = doc["memcpy"]["results"];
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& r = results[i];
      const std::string dir = r.value("direction", "");
      if (dir != "h2d" && dir != "d2h") continue;
      const std::string path = json_path("/memcpy/results", i);
      const double bw = positive(r, "bandwidth_Bps", path, diag);
      auto& into = dir == "h2d" ? mb.pinned_h2d : mb.pinned_d2h;
      into = std::max(into, bw);
    }
  }
  diag.throw_if_errors();
  return mb;
}

void read_attention_benchmarks(const std::string& file, Microbenchmarks& into) {
  const auto doc = read_json_file(file);
  Diagnostics diag(file);
  const std::string format = doc.is_object() ? doc.value("format", "") : "";
  AttentionKernel kernel = AttentionKernel::flash2;
  if (format == "clustersim-sdpa/1") {
    const std::string backend = doc.value("backend", "");
    if (backend == "cudnn") kernel = AttentionKernel::cudnn;
    else if (backend != "flash")
      throw InputError(file, "/backend", "expected \"flash\" or \"cudnn\", got \"" + backend + "\"");
  } else if (format != "clustersim-sdpa-flash/1") {
    throw InputError(file, "/format", "expected \"clustersim-sdpa-flash/1\" or \"clustersim-sdpa/1\"");
  }
  const auto k = static_cast<std::size_t>(kernel);
  if (!into.attention_files[k].empty())
    throw InputError(file, format == "clustersim-sdpa/1" ? "/backend" : "/format",
                     fmt::format("a second {} attention file (the first: {})", to_string(kernel), into.attention_files[k]));
  const auto& results = doc.value("results", nlohmann::json::array());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.contains("error")) continue;  // the backend did not run this shape
    const std::string path = json_path("/results", i);
    AttentionSample a;
    a.batch_heads = static_cast<std::int64_t>(positive(r, "batch", path, diag) * positive(r, "heads", path, diag));
    a.seq = static_cast<std::int64_t>(positive(r, "seq", path, diag));
    a.head_dim = static_cast<std::int64_t>(positive(r, "head_dim", path, diag));
    a.forward = positive(r, "forward_s", path, diag);
    a.backward = positive(r, "backward_s", path, diag);
    into.attention[k].push_back(a);
  }
  if (into.attention[k].empty()) diag.error("/results", "no attention measurements");
  diag.throw_if_errors();
  into.attention_files[k] = file;
}

void read_eager_kernels(const std::string& file, Microbenchmarks& into) {
  const auto doc = read_json_file(file);
  Diagnostics diag(file);
  if (!doc.is_object() || doc.value("format", "") != "clustersim-eager-kernels/1")
    throw InputError(file, "/format", "expected \"clustersim-eager-kernels/1\"");
  const auto& results = doc.value("results", nlohmann::json::array());
  std::set<std::string> earlier;  // paths an earlier eager file supplied
  for (const auto& m : into.memory)
    if (m.kernel.rfind("eager-", 0) == 0) earlier.insert(m.kernel);
  std::size_t added = 0, known = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const std::string path = json_path("/results", i);
    const std::string kernel = r.value("kernel", "");
    // The contiguous multiply, the fp32 -> bf16 cast and the concatenation of contiguous
    // inputs take the vectorized path that the microbenchmark's elementwise kernels measure.
    if (kernel == "contiguous" || kernel == "cast_down" || kernel == "cat_cache") continue;
    const std::string name = "eager-" + kernel;
    if (memory_kind_of(name) == MemoryKind::elementwise) {
      diag.error(json_path(path, "kernel"),
                 fmt::format("unknown kernel path \"{}\" (expected strided, broadcast, silu_chunk, transpose, cast_up, "
                             "add_mixed, cat_cropped, cat_first, cat_halves, contiguous, cast_down or cat_cache)",
                             kernel));
      continue;
    }
    if (earlier.count(name)) {
      ++known;
      continue;
    }
    into.memory.push_back({name, positive(r, "bytes", path, diag), positive(r, "median_s", path, diag)});
    ++added;
  }
  if (added == 0)
    diag.error("/results", known ? "every kernel path here was read from an earlier eager file"
                                 : "no eager kernel measurements");
  diag.throw_if_errors();
  into.eager_files.push_back(file);
}

namespace {
// The causal work of one attention sample (half the score matrix), forward or backward
// (2.5x: the backward recomputes the scores).
double attention_work(const AttentionSample& s, bool bwd) {
  return (bwd ? 2.5 : 1.0) * 4.0 * double(s.batch_heads) * double(s.seq) * double(s.seq) * double(s.head_dim) * 0.5;
}

// One kernel library's fused-attention curve from its samples (every `holdout_every`-th
// held back): max and s_half by least squares in log time over a grid of s_half, then the
// measured / parametric ratio at each training shape.
AttentionCalibration fit_attention(const std::vector<AttentionSample>& samples, const std::string& file, double peak,
                                   int holdout_every) {
  AttentionCalibration a;
  a.source = file;
  const auto work = attention_work;
  const auto measured = [](const AttentionSample& s, bool bwd) { return bwd ? s.backward : s.forward; };
  std::vector<std::size_t> train;
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (!held_back(i, holdout_every)) train.push_back(i);
  for (bool bwd : {false, true}) {
    double best_loss = 1e300, best_max = 0, best_half = 0;
    for (double half : {0.0, 64.0, 128.0, 256.0, 384.0, 512.0, 768.0, 1024.0, 1536.0, 2048.0}) {
      // Time = work (s + half) / (peak max s): the best max is a geometric mean.
      double acc = 0;
      for (std::size_t i : train) {
        const auto& s = samples[i];
        acc += std::log(work(s, bwd) * (double(s.seq) + half) / (peak * double(s.seq)) / measured(s, bwd));
      }
      const double max = std::exp(acc / double(train.size()));
      double loss = 0;
      for (std::size_t i : train) {
        const auto& s = samples[i];
        const double r = std::log(work(s, bwd) * (double(s.seq) + half) / (peak * max * double(s.seq)) / measured(s, bwd));
        loss += r * r;
      }
      if (loss < best_loss) {
        best_loss = loss;
        best_max = std::min(1.0, max);
        best_half = half;
      }
    }
    (bwd ? a.backward_max : a.forward_max) = best_max;
    (bwd ? a.backward_s_half : a.forward_s_half) = best_half;
  }
  const auto parametric = [&](const AttentionSample& s, bool bwd) {
    const double max = bwd ? a.backward_max : a.forward_max, half = bwd ? a.backward_s_half : a.forward_s_half;
    return work(s, bwd) * (double(s.seq) + half) / (peak * max * double(s.seq));
  };
  for (std::size_t i : train) {
    const auto& s = samples[i];
    a.points.push_back({std::log2(double(s.batch_heads)), std::log2(double(s.seq)), std::log2(double(s.head_dim)),
                        std::log(s.forward / parametric(s, false)), std::log(s.backward / parametric(s, true))});
  }
  return a;
}
}  // namespace

GpuProfile fit_profile(const GpuProfile& base, const Microbenchmarks& data, const FitOptions& options,
                       FitReport* report) {
  GpuProfile p = base;
  if (!options.name.empty()) p.name = options.name;
  // A transferred base keeps its datasheet figures; what the transfer derived is refitted.
  if (base.status == "transferred") p.sources = datasheet_sources(base);
  p.status = "calibrated";
  p.calibration = Calibration{};
  p.calibration.source = data.file;
  p.calibration.provenance = data.provenance;
  if (data.sms > 0) p.sms = data.sms;
  FitReport local;
  FitReport& rep = report ? *report : local;
  rep = FitReport{};
  std::vector<double> memory_errors;

  // Memory-bound kernels: t = (bytes + half) / (bw * eff), fitted per kind of kernel by
  // weighted least squares (relative error) on the samples larger than twice the L2
  // (smaller ones measure the cache). Elementwise kernels also set the defaults.
  {
    const Bytes floor = std::max(2.0 * data.l2, 1.0);
    std::vector<std::size_t> test;
    std::array<std::array<double, 5>, kMemoryKinds.size()> sums{};  // per kind: sw, sx, sy, sxx, sxy
    for (std::size_t i = 0; i < data.memory.size(); ++i) {
      const auto& s = data.memory[i];
      if (s.bytes < floor) continue;
      if (held_back(i, options.holdout_every)) {
        test.push_back(i);
        continue;
      }
      auto& q = sums[static_cast<std::size_t>(memory_kind_of(s.kernel))];
      const double w = 1.0 / (s.time * s.time);
      q[0] += w;
      q[1] += w * s.bytes;
      q[2] += w * s.time;
      q[3] += w * s.bytes * s.bytes;
      q[4] += w * s.bytes * s.time;
    }
    for (MemoryKind k : kMemoryKinds) {
      const auto& q = sums[static_cast<std::size_t>(k)];
      const double det = q[0] * q[3] - q[1] * q[1];
      if (!(q[0] > 0 && det > 0)) continue;
      const double a = (q[0] * q[4] - q[1] * q[2]) / det;  // seconds per byte
      const double c = (q[2] - a * q[1]) / q[0];           // fixed seconds
      if (!(a > 0)) continue;
      const auto i = static_cast<std::size_t>(k);
      p.efficiency.memory_by_kind[i] = std::min(1.0, 1.0 / (a * p.memory_bandwidth));
      p.efficiency.memory_half_size_by_kind[i] = std::max(0.0, c / a);
      if (k == MemoryKind::elementwise) {
        p.efficiency.memory = p.efficiency.memory_by_kind[i];
        p.efficiency.memory_half_size = p.efficiency.memory_half_size_by_kind[i];
      }
    }
    std::vector<double> errors;
    const KernelModel km(p);
    for (std::size_t i : test) {
      const auto& s = data.memory[i];
      const double predicted = km.memory(s.bytes, 1, memory_kind_of(s.kernel)) - p.efficiency.kernel_overhead;
      errors.push_back(std::fabs(predicted - s.time) / s.time);
    }
    rep.memory_efficiency = p.efficiency.memory;
    rep.memory_half_size = p.efficiency.memory_half_size;
    rep.memory_held_back = stats(errors);
    memory_errors = errors;
  }
  // A GPU-bound stream's kernels wait in the queue with the host ahead: the gap the GPU's
  // front end puts between them is the per-kernel cost. Back-to-back launches of empty
  // kernels measure the host's submit rate instead (3.40-3.66 us against 1.31 queued on an
  // H200), the only figure of files that predate the queued measurement.
  rep.kernel_overhead_queued = data.queued_gap > 0;
  p.efficiency.kernel_overhead = rep.kernel_overhead_queued ? data.queued_gap : data.launch_gap;
  p.efficiency.sync_launch_latency = data.sync_launch;
  p.efficiency.launch_submit = data.launch_submit;
  rep.kernel_overhead = p.efficiency.kernel_overhead;
  if (data.pinned_h2d > 0) p.pinned_h2d = data.pinned_h2d;
  if (data.pinned_d2h > 0) p.pinned_d2h = data.pinned_d2h;

  // GEMMs, per compute type.
  std::vector<double> all_errors;
  for (DType t : {DType::fp32, DType::tf32, DType::fp16, DType::bf16, DType::fp8}) {
    if (p.peak(t) <= 0) continue;
    std::vector<std::size_t> train, test;
    for (std::size_t i = 0; i < data.gemm.size(); ++i) {
      if (data.gemm[i].dtype != t) continue;
      (held_back(i, options.holdout_every) ? test : train).push_back(i);
    }
    if (train.size() < 3) continue;
    auto& cal = p.calibration.gemm[static_cast<std::size_t>(t)];
    // For each k_half on a grid, the best gemm_max is the geometric mean of the
    // predicted/measured ratio of the compute-bound time; keep the pair with the least
    // squared log error (memory floor included).
    const auto predict = [&](const GemmSample& s, double gemm_max, double k_half) {
      const double flops = 2.0 * double(s.batch) * s.m * s.n * s.k;
      const double eff = gemm_max * KernelModel::tile_utilisation(p.sms, s.batch, s.m, s.n) * double(s.k) / (double(s.k) + k_half);
      const double bytes = (double(s.m) * s.k + double(s.k) * s.n + double(s.m) * s.n) * double(s.batch) * dtype_bytes(t);
      return std::max(flops / (p.peak(t) * eff), bytes / (p.memory_bandwidth * p.efficiency.memory));
    };
    double best_loss = 1e300;
    for (double k_half : {0.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0}) {
      double gemm_max = 1.0;
      for (int iter = 0; iter < 3; ++iter) {
        double acc = 0;
        for (std::size_t i : train) acc += std::log(predict(data.gemm[i], gemm_max, k_half) / data.gemm[i].time);
        gemm_max = std::clamp(gemm_max * std::exp(acc / double(train.size())), 0.01, 1.0);
      }
      double loss = 0;
      for (std::size_t i : train) {
        const double r = std::log(predict(data.gemm[i], gemm_max, k_half) / data.gemm[i].time);
        loss += r * r;
      }
      if (loss < best_loss) {
        best_loss = loss;
        cal.gemm_max = gemm_max;
        cal.k_half = k_half;
      }
    }
    for (std::size_t i : train) {
      const auto& s = data.gemm[i];
      cal.points.push_back({std::log2(double(s.batch)), std::log2(double(s.m)), std::log2(double(s.n)),
                            std::log2(double(s.k)), std::log(s.time / predict(s, cal.gemm_max, cal.k_half))});
    }
    // Held-back error, parametric alone and with the interpolated correction.
    const KernelModel km(p);
    std::vector<double> param_err, err;
    for (std::size_t i : test) {
      const auto& s = data.gemm[i];
      param_err.push_back(std::fabs(predict(s, cal.gemm_max, cal.k_half) - s.time) / s.time);
      err.push_back(std::fabs(km.gemm_kernel(s.batch, s.m, s.n, s.k, t) - s.time) / s.time);
    }
    all_errors.insert(all_errors.end(), err.begin(), err.end());
    rep.gemm.push_back({t, train.size(), cal.gemm_max, cal.k_half, stats(param_err), stats(err)});
  }
  rep.gemm_held_back = stats(all_errors);
  std::vector<double> every = all_errors;  // grows with memory and attention errors below

  // Fused attention, per kernel library: efficiency = max x s / (s + s_half) over causal
  // work, forward and backward (2.5x the forward work) fitted separately, then the
  // measured ratios (fit_attention). The kernel model reads `attention` (FlashAttention-2);
  // a scenario's kernel choice swaps the cuDNN curve in (strategies/rules.hpp).
  if (p.peak(DType::bf16) > 0)
    for (AttentionKernel kernel : {AttentionKernel::flash2, AttentionKernel::cudnn}) {
      const auto k = static_cast<std::size_t>(kernel);
      if (data.attention[k].empty()) continue;
      auto& a = kernel == AttentionKernel::flash2 ? p.calibration.attention : p.calibration.attention_cudnn;
      a = fit_attention(data.attention[k], data.attention_files[k], p.peak(DType::bf16), options.holdout_every);
      // Held back: the curve as the kernel model evaluates it.
      GpuProfile q = p;
      q.calibration.attention = a;
      const KernelModel km(q);
      std::vector<double> kf, kb;
      for (std::size_t i = 0; i < data.attention[k].size(); ++i) {
        if (!held_back(i, options.holdout_every)) continue;
        const auto& s = data.attention[k][i];
        const double peak = q.peak(DType::bf16);
        kf.push_back(std::fabs(attention_work(s, false) / (peak * km.attention_efficiency(s.batch_heads, s.seq, s.head_dim, false)) - s.forward) / s.forward);
        kb.push_back(std::fabs(attention_work(s, true) / (peak * km.attention_efficiency(s.batch_heads, s.seq, s.head_dim, true)) - s.backward) / s.backward);
      }
      rep.attention_forward_held_back[k] = stats(kf);
      rep.attention_backward_held_back[k] = stats(kb);
      every.insert(every.end(), kf.begin(), kf.end());
      every.insert(every.end(), kb.begin(), kb.end());
      if (kernel == AttentionKernel::flash2) p.efficiency.attention = a.forward_max;
    }
  every.insert(every.end(), memory_errors.begin(), memory_errors.end());
  rep.all_held_back = stats(every);
  // Types without data keep the profile's defaults; bf16's fit is the headline figure.
  const auto& bf16 = p.calibration.gemm[static_cast<std::size_t>(DType::bf16)];
  if (bf16.calibrated()) {
    p.efficiency.gemm_max = bf16.gemm_max;
    p.efficiency.gemm_k_half = bf16.k_half;
  }
  // The driver string from /proc reads "NVRM version: ... 580.159.04 Release Build ...".
  std::string driver = data.provenance.value("nvidia_driver", std::string("?"));
  for (std::size_t i = 0; i + 1 < driver.size(); ++i)
    if (std::isdigit(static_cast<unsigned char>(driver[i])) && driver.find('.', i) != std::string::npos &&
        (i == 0 || driver[i - 1] == ' ')) {
      driver = driver.substr(i, driver.find(' ', i) - i);
      break;
    }
  p.sources.push_back(fmt::format("calibrated from {} ({}, driver {}, CUDA runtime {}, {})", data.file, data.gpu_name,
                                  driver,
                                  data.provenance.value("cuda_runtime_version", 0),
                                  data.provenance.value("date_utc", std::string("?"))));
  if (data.pinned_h2d > 0 || data.pinned_d2h > 0)
    p.sources.push_back(fmt::format("pcie.pinned_h2d {:.1f} GB/s, pcie.pinned_d2h {:.1f} GB/s: pinned cudaMemcpyAsync, best over "
                                    "the copy sizes of {} (memcpy)",
                                    data.pinned_h2d / 1e9, data.pinned_d2h / 1e9, data.file));
  return p;
}

HostDispatch fit_host_dispatch(const std::string& file) {
  const nlohmann::json doc = read_json_file(file);
  Diagnostics diag(file);
  if (!doc.is_object() || doc.value("format", "") != "clustersim-host-dispatch/1") {
    diag.error("/format", "expected \"clustersim-host-dispatch/1\"");
    diag.throw_if_errors();
  }
  const auto overhead = [&](const char* variant) {
    const auto units = doc.find("fsdp_per_unit");
    const std::string path = std::string("/fsdp_per_unit/") + variant + "/host_overhead_per_unit_vs_plain_s";
    if (units == doc.end() || !units->contains(variant) || !(*units)[variant].contains("host_overhead_per_unit_vs_plain_s")) {
      diag.error(path, "missing");
      return 0.0;
    }
    const double v = (*units)[variant]["host_overhead_per_unit_vs_plain_s"].get<double>();
    if (!(v >= 0)) diag.error(path, fmt::format("expected >= 0, got {}", v));
    return v;
  };
  HostDispatch h;
  h.source = file;
  const auto blocks = doc.find("blocks");
  if (blocks == doc.end() || !blocks->is_array()) diag.error("/blocks", "expected an array of measured cases");
  else h.eager_per_kernel = median_of(block_host_per_kernel(*blocks, "/blocks", -1, diag));
  // The DTensor MLP (ColwiseParallel fc1, RowwiseParallel fc2) against the same plain MLP:
  // what its two parallel-style modules add beyond their extra kernels (the functional
  // collectives' copies and NCCL kernels) at the eager rate, forward and backward.
  const auto mlp_case = [&](const std::string& name) -> const nlohmann::json* {
    const auto it = doc.find("dtensor");
    if (it == doc.end() || !it->is_array()) return nullptr;
    for (const auto& c : *it)
      if (c.is_object() && c.value("case", "") == name) return &c;
    return nullptr;
  };
  std::vector<double> module_f, module_b;
  for (const char* mode : {"fp32", "fp32-autocast-bf16"}) {
    const auto* pf = mlp_case(std::string("mlp plain fwd ") + mode);
    const auto* pb = mlp_case(std::string("mlp plain fwd+bwd ") + mode);
    const auto* tf = mlp_case(std::string("mlp dtensor-tp fwd ") + mode);
    const auto* tb = mlp_case(std::string("mlp dtensor-tp fwd+bwd ") + mode);
    if (!pf || !pb || !tf || !tb) {
      diag.error("/dtensor", fmt::format("expected the cases \"mlp plain|dtensor-tp fwd|fwd+bwd {}\"", mode));
      continue;
    }
    const auto host = [](const nlohmann::json* c) { return c->value("host_per_call_s", 0.0); };
    const auto kern = [](const nlohmann::json* c) { return c->value("kernels_per_call", 0.0); };
    const double eager = h.eager_per_kernel, modules = 2;
    const double f = (host(tf) - host(pf) - (kern(tf) - kern(pf)) * eager) / modules;
    const double b = ((host(tb) - host(tf)) - (host(pb) - host(pf)) - ((kern(tb) - kern(tf)) - (kern(pb) - kern(pf))) * eager) / modules;
    if (!(f > 0) || !(b > 0)) {
      diag.error("/dtensor", fmt::format("{}: expected the DTensor MLP to cost more host time than the plain one "
                                         "(per module {} s forward, {} s backward)", mode, f, b));
      continue;
    }
    module_f.push_back(f);
    module_b.push_back(b);
  }
  h.dtensor_module_forward = median_of(module_f);
  h.dtensor_module_backward = median_of(module_b);
  h.ddp_per_layer = overhead("ddp");
  h.fsdp_per_unit = overhead("fsdp1");
  h.fsdp_mixed_per_unit = overhead("fsdp1-bf16");
  h.fsdp2_per_unit = overhead("fsdp2");
  diag.throw_if_errors();
  return h;
}

InferenceHost fit_inference_host(const std::vector<std::string>& files) {
  // A number at obj[key] (0 where absent, null or not a number: the caller reports it).
  const auto number = [](const nlohmann::json& obj, const char* key) {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  const auto text = [](const nlohmann::json& obj, const char* key) {
    const auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::vector<double> per_kernel, forward;
  for (const auto& file : files) {
    const auto doc = read_json_file(file);
    Diagnostics diag(file);
    if (!doc.is_object() || text(doc, "format") != "clustersim-inference-host/1")
      throw InputError(file, "/format", "expected \"clustersim-inference-host/1\"");
    if (!doc.contains("paired") || !doc["paired"].is_object() || doc["paired"].empty())
      throw InputError(file, "/paired", "expected the paired per-layer figures (measure_inference_host.py with "
                                        "interleaved repeats)");
    if (!doc.contains("cases") || !doc["cases"].is_array()) throw InputError(file, "/cases", "expected an array");
    const auto& cases = doc["cases"];
    for (const auto& [width, kinds] : doc["paired"].items()) {
      for (const char* kind : {"decode", "prefill"}) {
        const std::string path = "/paired/" + width + "/" + kind;
        if (!kinds.is_object() || !kinds.contains(kind) || !kinds[kind].is_object()) {
          diag.error(path, "expected the paired figures of this forward");
          continue;
        }
        const auto& k = kinds[kind];
        // per_layer_fast_s is null where no pair of repeats ran at the host's fast speed.
        const double layer = number(k, "per_layer_fast_s"), launches = number(k, "launches_per_layer");
        if (!(layer > 0) || !(launches > 0)) {
          diag.error(path, "expected per_layer_fast_s > 0 and launches_per_layer > 0 (null: no pair of repeats "
                           "ran at the host's fast speed)");
          continue;
        }
        const double rate = layer / launches;
        per_kernel.push_back(rate);
        // The shorter model's own case: its fast median and launches.
        double fewest = 0, host = 0, all = 0;
        for (const auto& c : cases) {
          const double layers = c.is_object() ? number(c, "layers") : 0.0;
          if (layers > 0 && text(c, "width_of") == width && text(c, "kind") == kind && (fewest == 0 || layers < fewest)) {
            fewest = layers;
            host = number(c, "fast_median_s");
            all = number(c, "launches");
          }
        }
        if (!(fewest > 0) || !(host > 0) || !(all > 0)) {
          diag.error("/cases", fmt::format("expected the {} {} case of the fewest layers with fast_median_s and launches",
                                           width, kind));
          continue;
        }
        const double outside_launches = all - fewest * launches;
        forward.push_back(std::max(0.0, host - fewest * layer - outside_launches * rate));
      }
    }
    diag.throw_if_errors();
  }
  if (per_kernel.empty()) throw InputError("<command line>", "--inference-host", "no inference host measurements");
  return {median_of(per_kernel), median_of(forward)};
}

GemmLaunches read_gemm_launches(const std::string& file) {
  const auto doc = read_json_file(file);
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "clustersim-gemm-launches/1")
    throw InputError(file, "/format", "expected \"clustersim-gemm-launches/1\"");
  if (!doc.contains("points") || !doc["points"].is_array() || doc["points"].empty())
    throw InputError(file, "/points", "expected a non-empty array of [M, N, K, kernels per call]");
  Diagnostics diag(file);
  GemmLaunches g;
  g.source = file;
  const auto& pts = doc["points"];
  for (std::size_t i = 0; i < pts.size(); ++i) {
    const auto& q = pts[i];
    bool ok = q.is_array() && q.size() == 4;
    for (std::size_t j = 0; ok && j < 4; ++j) ok = q[j].is_number() && q[j].get<double>() > 0 && std::isfinite(q[j].get<double>());
    if (ok) ok = q[3].get<double>() >= 1;
    if (!ok) {
      diag.error(json_path("/points", i), fmt::format("expected [M, N, K, kernels] of positive numbers, kernels >= 1, got {}",
                                                      q.dump()));
      continue;
    }
    g.points.push_back({std::log2(q[0].get<double>()), std::log2(q[1].get<double>()), std::log2(q[2].get<double>()),
                        q[3].get<double>()});
  }
  diag.throw_if_errors();
  return g;
}

Seconds fit_dtensor_bias(const std::string& file, Seconds eager_per_kernel) {
  const nlohmann::json doc = read_json_file(file);
  Diagnostics diag(file);
  if (!doc.is_object() || doc.value("format", "") != "clustersim-dtensor-bias/1") {
    diag.error("/format", "expected \"clustersim-dtensor-bias/1\"");
    diag.throw_if_errors();
  }
  const auto positive = [&](const nlohmann::json& obj, const std::string& path, const char* key) {
    const auto it = obj.find(key);
    if (it == obj.end() || !it->is_number() || !(it->get<double>() > 0)) {
      diag.error(path + "/" + key, it == obj.end() ? std::string("missing") : fmt::format("expected a number > 0, got {}", it->dump()));
      return 0.0;
    }
    return it->get<double>();
  };
  const double layers = positive(doc, "", "layers");
  const double biased = positive(doc, "", "biased_modules_per_layer");
  const auto ref = doc.find("reference");
  double ref_step = 0, ref_kernels = 0;
  if (ref == doc.end() || !ref->is_object()) {
    diag.error("/reference", "expected the host-bound reference run (step_time_s, kernels_per_step)");
  } else {
    ref_step = positive(*ref, "/reference", "step_time_s");
    ref_kernels = positive(*ref, "/reference", "kernels_per_step");
  }
  std::vector<double> on, off;
  const auto runs = doc.find("runs");
  if (runs == doc.end() || !runs->is_array()) {
    diag.error("/runs", "expected an array of runs");
  } else {
    for (std::size_t i = 0; i < runs->size(); ++i) {
      const auto& r = (*runs)[i];
      const std::string path = json_path("/runs", i);
      if (!r.is_object() || !r.contains("bias") || !r["bias"].is_boolean()) {
        diag.error(path + "/bias", "expected true or false");
        continue;
      }
      (r["bias"].get<bool>() ? on : off).push_back(positive(r, path, "step_time_s"));
    }
    if (on.empty() || off.empty()) diag.error("/runs", "expected runs with and without biases");
  }
  if (!(eager_per_kernel > 0)) diag.error("/reference", "the profile's eager host time per kernel is needed to carry the cost over");
  diag.throw_if_errors();
  const double per_module = (median_of(on) - median_of(off)) / (layers * biased);
  if (!(per_module > 0)) {
    diag.error("/runs", fmt::format("expected the biased steps to take longer (median {} s against {} s)", median_of(on),
                                    median_of(off)));
    diag.throw_if_errors();
  }
  return per_module * eager_per_kernel / (ref_step / ref_kernels);
}

Seconds fit_dtensor_optimizer(const std::vector<std::string>& files, Seconds eager_per_kernel) {
  std::vector<double> per_param;
  for (const std::string& file : files) {
    const nlohmann::json doc = read_json_file(file);
    Diagnostics diag(file);
    const int ranks = ranked_cases(doc, "measure_dtensor_params.py", diag);
    const nlohmann::json& cases = doc["cases"];
    // The fused AdamW step over K ColwiseParallel Linears, DTensor or plain, K = 8 and 32.
    struct Step {
      std::size_t index;
      double params;
    };
    std::map<std::tuple<std::string, int, bool>, Step> steps;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& c = cases[i];
      if (!c.is_object() || c.value("part", "") != "optimizer" || c.value("kind", "") != "colwise") continue;
      const std::string path = json_path("/cases", i);
      const auto params = c.find("param_tensors");
      if (params == c.end() || !params->is_number() || !(params->get<double>() > 0)) {
        diag.error(path + "/param_tensors", "expected the number of parameter tensors the step updates (> 0)");
        continue;
      }
      steps[{c.value("model", ""), c.value("modules", 0), c.value("bias", false)}] = {i, params->get<double>()};
    }
    for (int r = 0; r < ranks; ++r) {
      const double rate = median_of(block_host_per_kernel(cases, "/cases", r, diag));  // the blocks beside the stacks
      for (bool bias : {false, true}) {
        const auto host = [&](const char* model, int k) -> std::optional<std::pair<double, double>> {
          const auto it = steps.find({model, k, bias});
          if (it == steps.end()) {
            diag.error("/cases", fmt::format("no fused AdamW step of {} {} ColwiseParallel Linears (bias {})", k, model, bias));
            return std::nullopt;
          }
          const double t = rank_host_time(cases, it->second.index, r, diag);
          if (!(t > 0)) return std::nullopt;
          return std::pair{t, it->second.params};
        };
        const auto d8 = host("dtensor", 8), d32 = host("dtensor", 32), p8 = host("plain", 8), p32 = host("plain", 32);
        if (!d8 || !d32 || !p8 || !p32 || !(rate > 0)) continue;
        const double added = d32->second - d8->second;
        if (!(added > 0) || p32->second - p8->second != added) {
          diag.error("/cases", "expected the K = 32 steps to update more parameter tensors than the K = 8 ones, "
                               "DTensor and plain alike");
          continue;
        }
        // Per parameter: the slope over K of the DTensor step beyond the plain one's, at
        // this rank's host speed, carried to the profile's.
        per_param.push_back(((d32->first - d8->first) - (p32->first - p8->first)) / added * eager_per_kernel / rate);
      }
    }
    diag.throw_if_errors();
  }
  if (!(eager_per_kernel > 0))
    throw InputError("<command line>", "--dtensor-optimizer", "needs the profile's eager host time per kernel (--host)");
  const double v = median_of(per_param);
  if (!(v > 0))
    throw InputError(files.front(), "/cases",
                     fmt::format("expected the DTensor optimizer steps to cost more host time than the plain ones "
                                 "(median {} s per parameter)", v));
  return v;
}

std::pair<Seconds, Seconds> fit_dtensor_loss(const std::vector<std::string>& files, Seconds eager_per_kernel) {
  std::vector<double> forward, backward;
  for (const std::string& file : files) {
    const nlohmann::json doc = read_json_file(file);
    Diagnostics diag(file);
    const int ranks = ranked_cases(doc, "measure_dtensor_params.py --loss-only", diag);
    const nlohmann::json& cases = doc["cases"];
    for (int r = 0; r < ranks; ++r) {
      const double rate = median_of(block_host_per_kernel(cases, "/cases", r, diag));
      const auto host = [&](const std::string& name) -> double {
        for (std::size_t i = 0; i < cases.size(); ++i) {
          if (cases[i].is_object() && cases[i].value("case", "") == name) return rank_host_time(cases, i, r, diag);
        }
        diag.error("/cases", fmt::format("no case \"{}\"", name));
        return 0.0;
      };
      const double pf = host("loss plain forward"), pb = host("loss plain forward+backward"),
                   tf = host("loss dtensor forward"), tb = host("loss dtensor forward+backward");
      if (!(rate > 0) || !(pf > 0) || !(pb > 0) || !(tf > 0) || !(tb > 0)) continue;
      // Beyond the plain ops, at this rank's host speed, carried to the profile's.
      forward.push_back((tf - pf) * eager_per_kernel / rate);
      backward.push_back(((tb - tf) - (pb - pf)) * eager_per_kernel / rate);
    }
    diag.throw_if_errors();
  }
  if (!(eager_per_kernel > 0))
    throw InputError("<command line>", "--dtensor-loss", "needs the profile's eager host time per kernel (--host)");
  const double f = median_of(forward), b = median_of(backward);
  if (!(f > 0) || !(b > 0))
    throw InputError(files.front(), "/cases",
                     fmt::format("expected the DTensor loss to cost more host time than the plain one (median {} s "
                                 "forward, {} s backward)", f, b));
  return {f, b};
}

OverlapInterference fit_overlap_interference(const std::string& file) {
  const nlohmann::json doc = read_json_file(file);
  Diagnostics diag(file);
  if (!doc.is_object() || doc.value("format", "").rfind("clustersim-overlap", 0) != 0) {
    diag.error("/format", "expected a clustersim-overlap-bench file");
    diag.throw_if_errors();
  }
  std::vector<double> compute, comm;
  const auto runs = doc.find("runs");
  if (runs == doc.end() || !runs->is_array()) diag.error("/runs", "expected an array");
  else
    for (std::size_t i = 0; i < runs->size(); ++i) {
      const auto& run = (*runs)[i];
      if (!run.contains("overlap") || !run["overlap"].is_array()) {
        diag.error(json_path(json_path("/runs", i), "overlap"), "expected an array");
        continue;
      }
      for (const auto& o : run["overlap"]) {
        if (o.value("compute", "").rfind("gemm", 0) != 0 || o.value("bytes", 0.0) < 64.0 * (1 << 20)) continue;
        const double c = o.value("compute_slowdown", 0.0), n = o.value("comm_slowdown", 0.0);
        if (c > 0) compute.push_back(c);
        if (n > 0) comm.push_back(n);
      }
    }
  if (compute.empty() || comm.empty()) diag.error("/runs", "no GEMM beside a collective of at least 64 MiB");
  diag.throw_if_errors();
  OverlapInterference f;
  f.source = file;
  f.compute = std::max(1.0, median_of(compute));
  f.comm = std::max(1.0, median_of(comm));
  return f;
}

}  // namespace clustersim

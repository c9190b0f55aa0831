// The serving batch-time model (strategies/serving_batch) against closed forms and
// against the iteration times measured on an H100
// (calibration/data/h100-sxm5-80gb/serving-batches-*.json).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "costmodel/cluster.hpp"
#include "model_specs.hpp"
#include "scenarios/json_reader.hpp"
#include "strategies/serving_batch.hpp"

using namespace clustersim;

namespace {
ClusterModel gpu_cluster(const std::string& gpu, std::int64_t gpus = 1) {
  ClusterSpec spec;
  spec.gpu = gpu;
  spec.gpus_per_node = gpus;
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  return c;
}
ClusterModel h100(std::int64_t gpus = 1) { return gpu_cluster("h100-sxm5-80gb", gpus); }

ModelSpec llama8b() { return test::llama3_8b(); }

// transformers' eager Llama over a contiguous DynamicCache (torch.cat every step).
EngineSpec transformers_engine() {
  EngineSpec e;
  e.launch = LaunchMode::eager;
  e.kernels = EngineKernels::transformers;
  e.kv_layout = KvLayout::concat;
  return e;
}

EngineSpec graphs_engine() {
  EngineSpec e;
  e.launch = LaunchMode::cuda_graphs;
  e.kernels = EngineKernels::fused;
  return e;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

TEST_CASE("serving batch: decode attention reads each request's KV cache once per step", "[serving]") {
  const ClusterModel c = h100();
  const ModelSpec m = llama8b();
  const BatchTimeModel model(m, c, graphs_engine(), 1, 1);
  const KernelModel km(c.gpu);
  // Going from context C to 2C adds b x C tokens of K and V (8 kv heads x 128 x 2 B, x2)
  // per layer, streamed at the memory-bound rate; everything else is unchanged.
  const std::int64_t b = 32, C = 2048;
  const double added = double(m.layers) * double(b) * C * 2 * 8 * 128 * 2;
  const double expected = km.memory_stream(added);
  const double computed = model.decode(b, 2 * C).total - model.decode(b, C).total;
  std::printf("decode b=32: C -> 2C adds %.1f GiB of KV reads: expected %.4f ms, computed %.4f ms\n",
              added / (1 << 30), expected * 1e3, computed * 1e3);
  CHECK(computed == Approx(expected).epsilon(1e-9));
}

TEST_CASE("serving batch: small decode batches are bound by reading the weights", "[serving]") {
  const ClusterModel c = h100();
  const BatchTimeModel model(llama8b(), c, graphs_engine(), 1, 1);
  // Every weight is read once per step: 2 bytes x (8.03 B - the embedding table, which is
  // only gathered) at the HBM rate the profile reaches.
  const double weights = (8.030261248e9 - 128256.0 * 4096) * 2;
  const double floor = weights / c.gpu.memory_bandwidth;
  const double at_eff = weights / (c.gpu.memory_bandwidth * c.gpu.efficiency.memory);
  const BatchTime t = model.decode(1, 128);
  std::printf("decode b=1: weights %.2f GB, datasheet floor %.2f ms, at profile efficiency %.2f ms, computed %.2f ms\n",
              weights / 1e9, floor * 1e3, at_eff * 1e3, t.total * 1e3);
  CHECK(t.total > floor);
  // Above the weights' stream: each GEMM's launch overhead, the norms, rotary and
  // residuals; well below a compute-bound time.
  CHECK(t.linear >= at_eff);
  CHECK(t.linear <= 1.35 * at_eff);
  // Up to a few dozen requests the step barely grows (the GEMMs stay memory-bound).
  CHECK(model.decode(32, 128).total < 1.15 * t.total);
}

TEST_CASE("serving batch: long prefills are compute-bound GEMMs", "[serving]") {
  const ClusterModel c = h100();
  const ModelSpec m = llama8b();
  const BatchTimeModel model(m, c, graphs_engine(), 1, 1);
  const KernelModel km(c.gpu);
  const std::int64_t T = 8192;
  // 2 x (non-embedding parameters) FLOPs per token at the GEMM efficiency of the MLP's
  // largest GEMM (a lower bound of the time, since smaller GEMMs are less efficient).
  const double flops = 2.0 * (double(m.layers) * (4096.0 * (4096 + 2 * 1024) + 4096.0 * 4096 + 3.0 * 4096 * 14336)) * T;
  const double eff = km.gemm_efficiency(1, T, 2 * 14336, 4096);
  const double expected = flops / (c.gpu.peak(DType::bf16) * eff);
  const BatchTime t = model.prefill(1, T);
  std::printf("prefill 8192 tokens: GEMM closed form %.1f ms (eff %.2f), linear part %.1f ms, total %.1f ms\n",
              expected * 1e3, eff, t.linear * 1e3, t.total * 1e3);
  CHECK(t.linear >= 0.98 * expected);
  CHECK(t.linear <= 1.25 * expected);
  CHECK(t.attention > 0);
}

TEST_CASE("serving batch: transformers' eager forward launches its profiled kernels at the inference host rate", "[serving]") {
  // transformers' Llama decode (B 1, a contiguous DynamicCache, SDPA's own GQA): per layer two
  // RMSNorms of eight kernels, seven GEMMs, ten rotary kernels, two residual adds, silu and its
  // multiply, the cache's two concatenations and SDPA: 40, as profiled (41 with cuBLAS's split-K
  // reduction; serving-batch-profile-2026-11-28.json); outside the layers the embedding, the
  // rotary cos/sin (ten), the final norm (eight) and the logits: 20. The host floor is their
  // launches at the inference rate per kernel plus the forward's host time outside them.
  const ClusterModel c = h100();
  EngineSpec e = transformers_engine();
  ModelSpec m = llama8b();
  m.layers = 16;
  const BatchTime t = BatchTimeModel(m, c, e, 1, 1).decode(1, 128);
  const auto& h = c.gpu.host;
  REQUIRE(h.inference_per_kernel > 0);
  const double expected = (16.0 * 40 + 20) * h.inference_per_kernel + h.inference_forward;
  std::printf("transformers' 16-layer decode: host floor expected %.3f ms ((16 x 40 + 20) x %.2f us + %.3f ms), "
              "computed %.3f ms\n",
              expected * 1e3, h.inference_per_kernel * 1e6, h.inference_forward * 1e3, t.launch * 1e3);
  CHECK(t.launch == Approx(expected).epsilon(1e-12));
  // The fused graph launches fewer kernels: fused QKV and gate-up, one-pass norms and rotary.
  e.kernels = EngineKernels::fused;
  const BatchTime f = BatchTimeModel(m, c, e, 1, 1).decode(1, 128);
  CHECK(f.launch < 0.6 * t.launch);
}

TEST_CASE("serving batch: the host launches cuBLAS's split-K reductions too, as measured per GEMM shape", "[serving]") {
  // The H200's profile carries the kernels one bf16 linear launches at each shape
  // (calibration/data/h200-sxm-141gb/gemm-launches-2026-11-28.json). An 8B decode step (one
  // token) runs q and o (4096 x 4096), k and v (1024 x 4096), gate and up (14336 x 4096), down
  // (4096 x 14336) a layer and the logits (128256 x 4096): the host floor is the 40 kernels a
  // layer and 20 outside of the profile-less model plus what each GEMM launches beyond one, at
  // the inference rate. (measure_inference_host.py counted 45 a layer on that H200: 40 + 5.)
  const ClusterModel c = gpu_cluster("h200-sxm-141gb", 1);
  REQUIRE_FALSE(c.gpu.calibration.gemm_launches.points.empty());
  const auto doc = read_json_file(std::string(CLUSTERSIM_SOURCE_DIR) +
                                  "/calibration/data/h200-sxm-141gb/gemm-launches-2026-11-28.json");
  const auto measured = [&](double m, double n, double k) {
    for (const auto& p : doc.at("points"))
      if (p[0] == m && p[1] == n && p[2] == k) return p[3].get<double>();
    FAIL("no measured point " << m << " x " << n << " x " << k);
    return 0.0;
  };
  const ModelSpec m = llama8b();
  double layer = 0;
  for (const auto& [n, k] : std::vector<std::pair<double, double>>{
           {4096, 4096}, {1024, 4096}, {1024, 4096}, {4096, 4096}, {14336, 4096}, {14336, 4096}, {4096, 14336}})
    layer += measured(1, n, k) - 1;
  const double head = measured(1, 128256, 4096) - 1;
  const auto& h = c.gpu.host;
  const double expected = (32.0 * (40 + layer) + 20 + head) * h.inference_per_kernel + h.inference_forward;
  const BatchTime t = BatchTimeModel(m, c, transformers_engine(), 1, 1).decode(1, 128);
  std::printf("8B decode on the H200: %.0f extra launches a layer, %.0f in the head; host floor expected %.3f ms, "
              "computed %.3f ms\n", layer, head, expected * 1e3, t.launch * 1e3);
  CHECK(layer == 5);
  CHECK(t.launch == Approx(expected).epsilon(1e-12));
  // A prefill of 2,048 tokens fills the GPU: no GEMM of the layer splits K.
  GemmLaunches g = c.gpu.calibration.gemm_launches;
  CHECK(g.per_call(2048, 4096, 4096) == measured(2048, 4096, 4096));
  // Between measured points: the nearest in log2 space. At 4096 x 4096 cuBLAS splits K up to
  // 48 tokens and not from 64: 52 tokens lie nearer 48 (log2 0.12 against 0.30), 56 nearer 64
  // (0.19 against 0.22).
  REQUIRE(measured(48, 4096, 4096) == 2);
  REQUIRE(measured(64, 4096, 4096) == 1);
  CHECK(g.per_call(52, 4096, 4096) == 2);
  CHECK(g.per_call(56, 4096, 4096) == 1);
  CHECK(GemmLaunches{}.per_call(1, 4096, 4096) == 1.0);
}

TEST_CASE("serving batch: a prefill chunk over a past cache launches transformers' mask and repeat_kv", "[serving]") {
  // A chunk of C tokens over P cached ones gets a materialized boolean mask (transformers'
  // causal skip needs no past, or C = 1): built once a forward (seven kernels), turned into
  // an additive mask in every SDPA call (three), and, with masked-repeat-kv, repeat_kv's two
  // copies a layer (serving-batch-profile-chunk-2026-11-28.json: 1,469 launches for the 8B's
  // 512-token chunk over 2,048, the 33 memsets aside). A prefill with no past has none of them.
  const ClusterModel c = h100();
  EngineSpec e = transformers_engine();
  e.gqa = GqaMode::masked_repeat_kv;
  const ModelSpec m = llama8b();
  const BatchTimeModel model(m, c, e, 1, 1);
  BatchShape chunk;
  chunk.prefills.push_back(PrefillChunk{512, 2048});
  chunk.sampled = 1;
  BatchShape fresh;
  fresh.prefills.push_back(PrefillChunk{512, 0});
  fresh.sampled = 1;
  const BatchTime tc = model.time(chunk), tf = model.time(fresh);
  const auto& h = c.gpu.host;
  const double extra = (32.0 * (3 + 2) + 7) * h.inference_per_kernel;
  const double launches = (tc.launch - h.inference_forward) / h.inference_per_kernel;
  std::printf("8B 512-token chunk over 2,048: launches expected 32 x 45 + 20 + 7 = 1,467, computed %.0f; "
              "extra host time over a fresh prefill expected %.3f ms, computed %.3f ms\n",
              launches, extra * 1e3, (tc.launch - tf.launch) * 1e3);
  CHECK(launches == Approx(32.0 * 45 + 20 + 7).epsilon(1e-9));
  CHECK(tc.launch - tf.launch == Approx(extra).epsilon(1e-9));
  // The mask: 512 x 2,560 booleans written once (seven kernels), then read and written as bf16
  // in each of the 32 layers (three kernels, TensorIterator's unvectorized path).
  const KernelModel km(c.gpu);
  const double elements = 512.0 * 2560.0;
  const double build = km.memory(elements, 7), per_layer = km.memory(elements * 3, 3, MemoryKind::noncontiguous);
  std::printf("its mask: built %.1f us (expected %.1f), converted %.1f us a layer (expected %.1f); in the forward "
              "%.3f ms (expected %.3f)\n",
              model.sdpa_mask_time(chunk).build * 1e6, build * 1e6, model.sdpa_mask_time(chunk).per_layer * 1e6,
              per_layer * 1e6, tc.mask * 1e3, (build + 32 * per_layer) * 1e3);
  CHECK(model.sdpa_mask_time(chunk).build == Approx(build).epsilon(1e-12));
  CHECK(model.sdpa_mask_time(chunk).per_layer == Approx(per_layer).epsilon(1e-12));
  CHECK(tc.mask == Approx(build + 32 * per_layer).epsilon(1e-12));
  CHECK(tf.mask == 0);
  CHECK(tc.attention > tc.mask);
  // One query over the cache is a decode step: transformers skips the mask.
  BatchShape one;
  one.prefills.push_back(PrefillChunk{1, 2048});
  one.sampled = 1;
  BatchShape dec;
  dec.decodes = 1;
  dec.decode_context = 2048;
  dec.sampled = 1;
  CHECK(model.time(one).launch == Approx(model.time(dec).launch).epsilon(1e-12));
}

TEST_CASE("serving batch: tensor parallelism splits the KV cache and adds two all-reduces per layer", "[serving]") {
  const ClusterModel c = h100(8);
  const ModelSpec m = llama8b();
  const BatchTimeModel one(m, c, graphs_engine(), 1, 1), two(m, c, graphs_engine(), 2, 1);
  CHECK(one.kv_bytes_per_token() == 2.0 * 8 * 128 * 2 * 32);  // 128 KiB
  CHECK(two.kv_bytes_per_token() == one.kv_bytes_per_token() / 2);
  CHECK(one.kv_bytes_of_request(100) == 100 * one.kv_bytes_per_token());
  const std::int64_t T = 512;
  const double ar = collective_time(c, Collective::all_reduce, T * 4096.0 * 2, Group{2, 2, 1}, 1.0);
  const double ag = collective_time(c, Collective::all_gather, 1 * 128256.0 * 2, Group{2, 2, 1}, 1.0);
  const double expected = 2 * 32 * ar + ar + ag;  // per layer twice, the embedding's, the logits' gather
  const BatchTime t = two.prefill(1, T);
  std::printf("tp=2 prefill 512: collectives expected %.3f ms, computed %.3f ms\n", expected * 1e3, t.comm * 1e3);
  CHECK(t.comm == Approx(expected).epsilon(1e-9));
  CHECK(t.linear < one.prefill(1, T).linear);
}

TEST_CASE("serving batch: KV capacity is what weights and workspace leave, in whole blocks", "[serving]") {
  const ClusterModel c = h100();
  const ModelSpec m = llama8b();
  EngineSpec e = graphs_engine();
  e.memory_fraction = 0.9;
  const BatchTimeModel model(m, c, e, 1, 1);
  const KvCapacity k = model.kv_capacity(16, 8192, 256);
  const double weights = 8.030261248e9 * 2;
  const double budget = c.gpu.usable_memory() * 0.9;
  const auto expected = static_cast<std::int64_t>(std::floor((budget - weights - k.workspace) / (131072.0 * 16)));
  std::printf("llama-8b on one H100: budget %.2f GiB, weights %.2f GiB, workspace %.2f GiB, %lld blocks of 16 "
              "(expected %lld): %.0f k tokens\n",
              budget / (1 << 30), k.weights / (1 << 30), k.workspace / (1 << 30), (long long)k.blocks,
              (long long)expected, k.blocks * 16 / 1e3);
  CHECK(k.weights == Approx(weights).epsilon(1e-9));
  CHECK(k.blocks == expected);
  CHECK(model.kv_capacity(16, 8192, 256).blocks * 2 < BatchTimeModel(m, h100(2), e, 2, 1).kv_capacity(16, 8192, 256).blocks);
  ModelSpec huge = m;
  huge.layers = 400;
  CHECK_FALSE(BatchTimeModel(huge, c, e, 1, 1).kv_capacity(16, 8192, 256).fits());
}

namespace {

// One case of measure_batches.py (clustersim-serving-batches/1) timed by the batch-time model in
// the engine those measurements ran: transformers' eager Llama, DynamicCache (torch.cat every
// step; its decode cells cropped the cache back after every step, leaving views, until the third
// lease's table made them contiguous again: cache_handling "crop" against "crop-contiguous"),
// sdpa, where transformers 5.17 passes enable_gqa to SDPA when the call needs no mask (decode
// steps and the prefills: the profiles' copy kernels are the norms' casts only,
// serving-batch-profile-2026-11-28.json) and runs repeat_kv when it does (the chunked cells' chunks
// over a past cache): gqa masked-repeat-kv; no scheduler around the forward.
// The predicted iteration time, and whether the model has the GPU, not the host's launches,
// set it (for a chunked cell: at the median chunk).
struct MeasuredBatchPrediction {
  double total = 0;
  bool gpu_bound = false;
};

MeasuredBatchPrediction predict_measured_cell(const nlohmann::json& doc, const nlohmann::json& cs, std::int64_t& size,
                                              const std::string& gpu = "h100-sxm5-80gb") {
  EngineSpec e = transformers_engine();
  if (cs.value("cache_handling", "") == "crop") e.kv_layout = KvLayout::concat_view;
  e.gqa = GqaMode::masked_repeat_kv;
  const std::string name = cs.at("model");
  const auto& md = doc.at("models").at(name);
  ModelSpec m;
  m.family = ModelFamily::llama;
  m.hidden = md.at("hidden_size");
  m.layers = md.at("num_hidden_layers");
  m.heads = md.at("num_attention_heads");
  m.kv_heads = md.at("num_key_value_heads");
  m.ffn_hidden = md.at("intermediate_size");
  m.vocab = md.at("vocab_size");
  m.tie_embeddings = md.at("tie_word_embeddings");
  m.seq_len = 8192;
  const BatchTimeModel model(m, gpu_cluster(gpu), e, 1, 1);
  const std::string kind = cs.at("kind");
  const std::int64_t B = cs.at("B");
  if (kind == "prefill") {
    size = cs.at("L");
    const BatchTime t = model.prefill(B, size);
    return {t.total, t.gpu >= t.launch};
  }
  if (kind == "decode") {
    size = cs.at("C");
    BatchShape s;
    s.decodes = B;
    s.decode_context = double(B) * double(size + 1);
    s.sampled = B;
    const BatchTime t = model.time(s);
    return {t.total, t.gpu >= t.launch};
  }
  // Chunks after the first: the median over positions 1.. of the predicted times.
  size = cs.at("K");
  const std::int64_t chunks = cs.at("chunks");
  std::vector<double> p;
  BatchShape mid;
  for (std::int64_t i = 1; i < chunks; ++i) {
    BatchShape s;
    s.prefills.push_back({size, i * size});
    s.sampled = 1;
    p.push_back(model.time(s).total);
    if (i == (chunks + 1) / 2) mid = s;
  }
  const BatchTime t = model.time(mid);
  return {median(p), t.gpu >= t.launch};
}

double predict_measured_batch(const nlohmann::json& doc, const nlohmann::json& cs, std::int64_t& size) {
  return predict_measured_cell(doc, cs, size).total;
}

double p90_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() * 9 / 10];
}

}  // namespace

TEST_CASE("serving batch: measured H100 iteration times (transformers eager), median error", "[serving][accuracy][measured]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto doc = read_json_file(root + "/calibration/data/h100-sxm5-80gb/serving-batches-2026-11-26.json");
  std::vector<double> errors;
  std::printf("\n%-9s %-8s %5s %6s %10s %10s %7s\n", "model", "kind", "B", "L/C/K", "measured", "predicted", "error");
  for (const auto& cs : doc.at("cases")) {
    if (cs.contains("error")) continue;
    std::int64_t size = 0;
    const double predicted = predict_measured_batch(doc, cs, size), measured = cs.at("median_s");
    const double err = (predicted - measured) / measured;
    errors.push_back(std::fabs(err));
    std::printf("%-9s %-8s %5lld %6lld %8.2fms %8.2fms %+6.1f%%\n", cs.at("model").get<std::string>().c_str(),
                cs.at("kind").get<std::string>().c_str(), (long long)cs.at("B").get<std::int64_t>(), (long long)size,
                measured * 1e3, predicted * 1e3, 100 * err);
  }
  const double med = median(errors);
  std::printf("median |error| %.1f%%, p90 %.1f%% over %zu cases (issue goal: median <= 5%%)\n", 100 * med,
              100 * p90_of(errors), errors.size());
  CHECK(errors.size() >= 45);
  // 20.8 %: this first table's process was neither pinned nor probed, and most of its repeats
  // ran in the host's slow stretches (README.md, "The host's two speeds"); the profile's host
  // rate is the fast state's. (12.8 % while that rate carried torch.profiler's slowdown.)
  CHECK(med <= 0.22);
}

TEST_CASE("serving batch: the same cells with the host's speed probed, fast-host repeats", "[serving][accuracy][measured]") {
  // measure_batches.py with its host-speed probe (2026-11-28, pinned to one CPU), on four leases:
  // every repeat carries the time of a fixed pure-Python work unit run just before it, and a
  // repeat is fast when that is below probe_fast_ratio x the fastest probe of the process. The
  // profile's inference host cost per kernel was measured at the host's fast speed (on a fourth
  // lease: measure_inference_host.py); the cells' fast repeats are the ones to hold it against
  // (calibration/serving/README.md, "The host's two speeds"). The leases' hosts differ beyond the
  // two speeds: the same host-bound cells' fast repeats ran 1.3-1.5x longer on the second lease
  // than on the first. Cells are split by what the model says sets their time (the GPU's
  // kernels or the host's launches) and each side is reported on its own: the GPU side is what
  // the kernel model answers for; the host side carries the lease's host. The third lease's
  // decode cells kept a contiguous cache (cache_handling crop-contiguous), the first two's a
  // crop() view (predicted with kv_cache concat-view).
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  struct Lease {
    double all = 0, fast = 0, gpu = 0, host = 0;
  };
  std::vector<Lease> leases;
  for (const char* file : {"serving-batches-2026-11-28.json", "serving-batches-run2-2026-11-28.json",
                           "serving-batches-run3-2026-11-28.json", "serving-batches-run4-2026-11-28.json"}) {
    const auto doc = read_json_file(root + "/calibration/data/h100-sxm5-80gb/" + file);
    std::vector<double> all_err, fast_err, gpu_err, host_err;
    std::printf("\n%s\n%-9s %-8s %5s %6s %10s %12s %10s %8s %8s %5s\n", file, "model", "kind", "B", "L/C/K",
                "all reps", "fast reps (n)", "predicted", "vs all", "vs fast", "bound");
    for (const auto& cs : doc.at("cases")) {
      if (cs.contains("error")) continue;
      std::int64_t size = 0;
      const MeasuredBatchPrediction p = predict_measured_cell(doc, cs, size);
      const double predicted = p.total, all = cs.at("median_s");
      const int fast_n = cs.value("fast_n", 0);
      // Fewer than 3 fast repeats: the cell's median over all stands (its host ran slow throughout).
      const double fast = fast_n >= 3 ? cs.at("fast_median_s").get<double>() : all;
      all_err.push_back(std::fabs(predicted - all) / all);
      fast_err.push_back(std::fabs(predicted - fast) / fast);
      (p.gpu_bound ? gpu_err : host_err).push_back(fast_err.back());
      std::printf("%-9s %-8s %5lld %6lld %8.2fms %8.2fms (%2d) %8.2fms %+7.1f%% %+7.1f%% %5s\n",
                  cs.at("model").get<std::string>().c_str(), cs.at("kind").get<std::string>().c_str(),
                  (long long)cs.at("B").get<std::int64_t>(), (long long)size, all * 1e3, fast * 1e3, fast_n,
                  predicted * 1e3, 100 * (predicted - all) / all, 100 * (predicted - fast) / fast,
                  p.gpu_bound ? "GPU" : "host");
    }
    REQUIRE(fast_err.size() >= 45);
    REQUIRE(gpu_err.size() >= 10);
    REQUIRE(host_err.size() >= 10);
    leases.push_back({median(all_err), median(fast_err), median(gpu_err), median(host_err)});
    std::printf("median |error| against every repeat %.1f%% (p90 %.1f%%), against the fast-host repeats %.1f%% "
                "(p90 %.1f%%) over %zu cases (issue goal: median <= 5%%); fast repeats of the %zu GPU-bound cells "
                "%.1f%% (p90 %.1f%%), of the %zu host-bound %.1f%% (p90 %.1f%%)\n",
                100 * median(all_err), 100 * p90_of(all_err), 100 * median(fast_err), 100 * p90_of(fast_err),
                fast_err.size(), gpu_err.size(), 100 * median(gpu_err), 100 * p90_of(gpu_err), host_err.size(),
                100 * median(host_err), 100 * p90_of(host_err));
  }
  // Where the model stands (calibration/serving/README.md, "The profiler's shadow"): the
  // profile's inference host rate (14.2 us a launch) was measured in processes torch.profiler
  // had not run in, on a fifth lease. Against the fast repeats: the fourth lease (measured
  // before that rate, so held out) 2.7 % over every cell (GPU-bound 3.2 %, host-bound 1.9 %):
  // the 5 %. The first lease 8.4 % (its host 2-5 % slower in the fast state). The
  // third lease's CPU was slower (fastest probe 0.279 ms against 0.242-0.259 on the others):
  // 18.0 %, host-bound 24.6 %. The second lease ran the --inference-host prelude, whose
  // torch.profiler left every later launch slower: host-bound 35.9 %. GPU-bound cells 3.5 /
  // 6.3 / 4.7 / 3.2 %.
  REQUIRE(leases.size() == 4);
  for (const Lease& l : leases) CHECK(l.gpu <= 0.08);
  CHECK(leases[3].fast <= 0.05);
  CHECK(leases[0].fast <= 0.10);
  CHECK(leases[2].fast <= 0.20);
  CHECK(leases[1].fast <= 0.28);
}

TEST_CASE("serving batch: measured H200 iteration times against its own calibration", "[serving][accuracy][measured]") {
  // calibration/data/h200-sxm-141gb/serving-batches-2026-11-28.json: the same 50 cells on one
  // H200 (measure_batches.py, probed and pinned), predicted with the profile fitted to that
  // H200's microbenchmarks, whose inference host rate measure_inference_host.py took right
  // after the table on the same lease; and with the datasheet profile transferred from the
  // H100 (h200-sxm-141gb-datasheet), which carries the H100 host's rate.
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto doc = read_json_file(root + "/calibration/data/h200-sxm-141gb/serving-batches-2026-11-28.json");
  std::vector<double> fast_err, gpu_err, host_err, tr_err, tr_gpu_err;
  std::printf("\n%-9s %-8s %5s %6s %12s %10s %8s %5s %12s %8s\n", "model", "kind", "B", "L/C/K", "fast reps (n)",
              "predicted", "vs fast", "bound", "transferred", "vs fast");
  for (const auto& cs : doc.at("cases")) {
    if (cs.contains("error")) continue;
    std::int64_t size = 0;
    const MeasuredBatchPrediction p = predict_measured_cell(doc, cs, size, "h200-sxm-141gb");
    const MeasuredBatchPrediction t = predict_measured_cell(doc, cs, size, "h200-sxm-141gb-datasheet");
    const int fast_n = cs.value("fast_n", 0);
    const double fast = fast_n >= 3 ? cs.at("fast_median_s").get<double>() : cs.at("median_s").get<double>();
    fast_err.push_back(std::fabs(p.total - fast) / fast);
    tr_err.push_back(std::fabs(t.total - fast) / fast);
    (p.gpu_bound ? gpu_err : host_err).push_back(fast_err.back());
    if (p.gpu_bound) tr_gpu_err.push_back(tr_err.back());
    std::printf("%-9s %-8s %5lld %6lld %8.2fms (%2d) %8.2fms %+7.1f%% %5s %10.2fms %+7.1f%%\n",
                cs.at("model").get<std::string>().c_str(), cs.at("kind").get<std::string>().c_str(),
                (long long)cs.at("B").get<std::int64_t>(), (long long)size, fast * 1e3, fast_n, p.total * 1e3,
                100 * (p.total - fast) / fast, p.gpu_bound ? "GPU" : "host", t.total * 1e3, 100 * (t.total - fast) / fast);
  }
  REQUIRE(fast_err.size() >= 45);
  REQUIRE(gpu_err.size() >= 10);
  REQUIRE(host_err.size() >= 10);
  std::printf("calibrated: median |error| against the fast repeats %.1f%% (p90 %.1f%%) over %zu cells; GPU-bound %.1f%% "
              "(%zu), host-bound %.1f%% (%zu). Transferred from the H100: %.1f%%, GPU-bound %.1f%%\n",
              100 * median(fast_err), 100 * p90_of(fast_err), fast_err.size(), 100 * median(gpu_err), gpu_err.size(),
              100 * median(host_err), host_err.size(), 100 * median(tr_err), 100 * median(tr_gpu_err));
  // 2026-11-28: 3.9 % over every cell; GPU-bound 2.4 % (5.5 % with the back-to-back launch gap
  // of 3.4 us a kernel in place of the queued 1.3), host-bound 4.9 % (9.5 % before the host
  // counted cuBLAS's split-K reductions and memsets, measure_gemm_launches.py: the 8B's decode
  // launches 5 more kernels a layer than its graph has). The 1B's host-bound cells still run
  // 3-14 % slower than predicted: this lease's table ran slower on the host than its own
  // measure_inference_host.py run right after it. Transferred from the H100: 4.3 %, GPU-bound 5.3 %.
  CHECK(median(gpu_err) <= 0.05);
  CHECK(median(fast_err) <= 0.05);
}

TEST_CASE("serving batch: the measured engine SDPA table steps with the kernel's waves", "[serving]") {
  // 32 heads, units of 128 queries of one head, 132 resident CTAs: q <= 512 is 1 wave
  // (4 x 32 = 128 units), 513..1024 is 2 (160..256 units), 2112 is 5 (17 x 32 = 544 units).
  EngineAttentionPath a;
  a.enabled = true;
  a.heads = 32;
  a.head_dim = 128;
  a.query_rows_per_cta = 128;
  a.resident_ctas = 132;
  a.sdpa = {{64, 4096, 0.8e-3}, {512, 4096, 1e-3},   {513, 4096, 2e-3},
            {1024, 4096, 2.2e-3}, {512, 16384, 4e-3}, {1024, 16384, 8e-3}};
  const EngineSdpaTable t(a);
  CHECK(t.waves(32, 512) == 1);
  CHECK(t.waves(32, 513) == 2);
  CHECK(t.waves(32, 2048) == 4);
  CHECK(t.waves(32, 2112) == 5);
  // At a measured point: its time.
  CHECK(t.time(32, 513, 4096) == Approx(2e-3));
  CHECK(t.time(32, 1024, 16384) == Approx(8e-3));
  // Within one wave count: the time per wave linear in q. q = 768 is 2 waves, between 513
  // (1.0 ms a wave) and 1024 (1.1 ms a wave).
  const double f = (768.0 - 513.0) / (1024.0 - 513.0), mid = 2 * (1e-3 + f * (1.1e-3 - 1e-3));
  std::printf("768 queries x 4096 keys: expected %.4g s (2 waves), table %.4g s\n", mid, t.time(32, 768, 4096));
  CHECK(t.time(32, 768, 4096) == Approx(mid));
  // Not across a wave step: q = 300 (1 wave) lies between 64 and 512, not 512 and 513.
  const double one = 0.8e-3 + (300.0 - 64.0) / (512.0 - 64.0) * (1e-3 - 0.8e-3);
  CHECK(t.time(32, 300, 4096) == Approx(one));
  // A wave count with no measured point: the nearest point's time per wave, times the waves
  // (2112 queries: 5 waves of 1024's 1.1 ms).
  CHECK(t.time(32, 2112, 4096) == Approx(5 * 1.1e-3));
  // Linear in the keys between measured counts; proportional beyond them.
  CHECK(t.time(32, 512, 10240) == Approx(2.5e-3));
  CHECK(t.time(32, 512, 32768) == Approx(8e-3));
  CHECK(t.time(32, 512, 2048) == Approx(0.5e-3));
  // Fewer heads per GPU (tp 2): the same query rows x heads at the table's 32 heads.
  CHECK(t.time(16, 1024, 16384) == Approx(t.time(32, 512, 16384)));
}


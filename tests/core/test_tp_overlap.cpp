// Tensor-parallel communication overlapped with its GEMMs (Transformer Engine's userbuffers,
// training.framework.tp_comm_overlap): the ring exchange's and the pipelined reduce-scatter's
// closed forms, the pairing on a Llama layer, the estimator's breakdown with and without the
// knob, and the scenario errors. Each prints the expectation beside the value.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "costmodel/hardware.hpp"
#include "costmodel/kernels.hpp"
#include "scenario_doc.hpp"
#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "strategies/op_timing.hpp"
#include "strategies/rules.hpp"

using namespace clustersim;
using nlohmann::json;
using clustersim::test::problems_of;
using clustersim::test::scenario_from;
using i64 = std::int64_t;

namespace {
void show(const char* what, double expected, double computed) {
  std::printf("%-72s expected %.9g, computed %.9g\n", what, expected, computed);
}

// A Llama-3-70B-shaped model (2 layers), TP 4 with sequence parallelism on one H100 node.
json llama_doc(bool overlap, const char* precision = "mixed-bf16") {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "llama"}, {"hidden", 8192},  {"layers", 2},     {"heads", 64},          {"kv_heads", 8},
                  {"seq_len", 8192},   {"vocab", 128256}, {"ffn_hidden", 28672}, {"attention", "flash"}};
  doc["training"] = {{"global_batch", 8},
                     {"micro_batch", 1},
                     {"precision", precision},
                     {"recompute", "none"},
                     {"framework", {{"name", "megatron"}, {"tp_comm_overlap", overlap}}}};
  doc["cluster"] = {{"gpu", "h100-sxm5-80gb"}, {"nodes", 1}, {"gpus_per_node", 8}, {"intra_node", {{"fabric", "nvswitch"}}}};
  doc["plan"] = {{"dp", 2}, {"tp", 4}, {"pp", 1}, {"zero", 1}, {"sequence_parallel", true}};
  return doc;
}
}  // namespace

TEST_CASE("tp overlap: a ring exchange exposes what each neighbour copy takes beyond a GEMM chunk", "[rules][tp_overlap]") {
  // tp 4: 3 copies of one shard each, the GEMM in 4 chunks.
  show("copies 300 us, GEMM 400 us (chunk 100 us = copy 100 us): hidden", 0.0, ring_exchange_exposed(300e-6, 400e-6, 4));
  CHECK(ring_exchange_exposed(300e-6, 400e-6, 4) == Approx(0.0).margin(1e-15));
  show("copies 300 us, GEMM 200 us: 3 x (100 - 50) us", 150e-6, ring_exchange_exposed(300e-6, 200e-6, 4));
  CHECK(ring_exchange_exposed(300e-6, 200e-6, 4) == Approx(150e-6));
  show("no GEMM: the copies in full", 300e-6, ring_exchange_exposed(300e-6, 0.0, 4));
  CHECK(ring_exchange_exposed(300e-6, 0.0, 4) == Approx(300e-6));
  CHECK(ring_exchange_exposed(300e-6, 200e-6, 1) == 0.0);
}

TEST_CASE("tp overlap: a pipelined reduce-scatter exposes its last chunk and slows the GEMM on fewer SMs", "[rules][tp_overlap]") {
  // 132 SMs, 16 for the communication: the GEMM takes 132/116 as long; 4 splits.
  const PipelinedReduceScatter p = pipelined_reduce_scatter(400e-6, 800e-6, 4, 16, 132);
  const double extra = 800e-6 * (132.0 / 116.0 - 1.0);
  show("GEMM on 116 of 132 SMs: its extra time", extra, p.gemm_extra);
  CHECK(p.gemm_extra == Approx(extra));
  show("reduce-scatter chunks 100 us under GEMM chunks 228 us: the last one", 100e-6, p.exposed);
  CHECK(p.exposed == Approx(100e-6));
  // Reduce-scatter chunks longer than the GEMM's: r + 3 (r - g').
  const PipelinedReduceScatter q = pipelined_reduce_scatter(1600e-6, 400e-6, 4, 0, 132);
  show("reduce-scatter chunks 400 us over GEMM chunks 100 us: 400 + 3 x 300 us", 1300e-6, q.exposed);
  CHECK(q.exposed == Approx(1300e-6));
  CHECK(q.gemm_extra == 0.0);
}

TEST_CASE("tp overlap: each sequence-parallel collective of a Llama layer meets its GEMM", "[rules][tp_overlap]") {
  for (const char* precision : {"mixed-bf16", "mixed-fp8"}) {
    INFO(precision);
    const Scenario s = scenario_from(llama_doc(true, precision));
    const Estimator est = make_estimator(s);
    const ClusterModel& cluster = est.cluster();
    const KernelModel km(cluster.gpu);
    const ModelGraph g = build_model_graph(s.model, 1, graph_style(s.training.precision));
    const Block& layer = g.blocks[static_cast<std::size_t>(g.layers.front())];
    const ShardingContext ctx{4, 1, true, est.precision().compute, est.precision().weight_gemm, 1};
    std::vector<OpTiming> alone, t;
    for (const Op& op : layer.ops) alone.push_back(time_op(op, ctx, km));
    t = alone;
    const Group tp = plan_groups(cluster, s.plan).tp;
    const auto collective = [&](const CommStep& c) { return tp_collective_time(cluster, tp, c); };
    const TpOverlapSettings settings = tp_overlap_settings(cluster.gpu, est.precision().weight_gemm);
    CHECK(settings.reduce_scatter_ring == (std::string(precision) == "mixed-fp8"));
    overlap_tp_comm(layer.ops, t, ctx, km, collective, settings, cluster.gpu.interference);
    int gathers = 0, scatters = 0;
    for (std::size_t i = 0; i < layer.ops.size(); ++i) {
      const Op& op = layer.ops[i];
      if (op.kind == OpKind::tp_enter) {
        ++gathers;
        REQUIRE(t[i].forward_comm.overlapped());
        REQUIRE(t[i].backward_comm.overlapped());
        // The next matmul, a column-parallel GEMM, runs as 4 GEMMs of a quarter of its rows.
        std::size_t j = i + 1;
        while (layer.ops[j].kind != OpKind::matmul) ++j;
        Op quarter = layer.ops[j];
        quarter.m /= 4;
        const double chunks = 4 * time_op(quarter, ctx, km).forward;
        show(("forward of " + layer.ops[j].name + ": 4 GEMMs of a quarter").c_str(), chunks, t[j].forward);
        CHECK(t[j].forward == Approx(chunks));
        const double expected = ring_exchange_exposed(collective(t[i].forward_comm), chunks, 4);
        show(("all-gather before " + layer.ops[j].name + ", exposed").c_str(), expected, t[i].forward_comm.exposed);
        CHECK(t[i].forward_comm.exposed == Approx(expected));
        CHECK(t[i].forward_comm.exposed <= collective(t[i].forward_comm));
        const double bulk =
            overlap_exposed(alone[j].backward - alone[j].weight_grad, collective(t[i].forward_comm), cluster.gpu.interference) +
            overlap_exposed(alone[j].weight_grad, collective(t[i].backward_comm), cluster.gpu.interference);
        show("backward: re-gather beside the input gradient, reduce-scatter beside the weight gradient", bulk,
             t[i].backward_comm.exposed);
        CHECK(t[i].backward_comm.exposed == Approx(bulk));
      }
      if (op.kind == OpKind::tp_exit) {
        ++scatters;
        REQUIRE(t[i].forward_comm.overlapped());
        REQUIRE(t[i].backward_comm.overlapped());
        CHECK(t[i].forward_comm.exposed >= 0);
        CHECK(t[i].forward_comm.exposed <= collective(t[i].forward_comm) * 1.000001);
      }
    }
    CHECK(gathers == 2);
    CHECK(scatters == 2);
  }
}

TEST_CASE("tp overlap: the knob moves tensor-parallel time out of the step, and only where it applies", "[rules][tp_overlap]") {
  const Scenario off = scenario_from(llama_doc(false)), on = scenario_from(llama_doc(true));
  const Prediction a = make_estimator(off).estimate(off.plan), b = make_estimator(on).estimate(on.plan);
  std::printf("tp comm exposed: alone %.6f s, overlapped %.6f s; step %.6f -> %.6f s\n", a.breakdown.tp_comm_exposed,
              b.breakdown.tp_comm_exposed, a.iteration_time, b.iteration_time);
  CHECK(b.breakdown.tp_comm_exposed < 0.5 * a.breakdown.tp_comm_exposed);
  CHECK(b.iteration_time < a.iteration_time);
  // Without sequence parallelism the knob changes nothing (userbuffers need it).
  json d0 = llama_doc(false), d1 = llama_doc(true);
  d0["plan"]["sequence_parallel"] = d1["plan"]["sequence_parallel"] = false;
  const Scenario n0 = scenario_from(d0), n1 = scenario_from(d1);
  CHECK(make_estimator(n1).estimate(n1.plan).iteration_time == make_estimator(n0).estimate(n0.plan).iteration_time);
}

TEST_CASE("tp overlap: the knob is a boolean of megatron, and its errors name the field", "[scenario][tp_overlap]") {
  json d = llama_doc(true);
  d["training"]["framework"] = {{"name", "pytorch-fsdp"}, {"tp_comm_overlap", true}};
  const std::string p = problems_of(d);
  INFO(p);
  CHECK(p.find("/training/framework/tp_comm_overlap") != std::string::npos);
  d = llama_doc(true);
  d["training"]["framework"]["tp_comm_overlap"] = "yes";
  const std::string q = problems_of(d);
  INFO(q);
  CHECK(q.find("/training/framework/tp_comm_overlap") != std::string::npos);
}

TEST_CASE("tp overlap: the ring-exchange rule against the ring measured end to end on 4 H100s", "[accuracy][tp_overlap]") {
  // calibration/training/measure_ring_exchange.py (2026-11-27, three runs on nvidia-h100-x4 hosts): the
  // all-gather + column-parallel GEMM of Llama 3 70B and GPT-3 175B layers at TP 4, bf16 and
  // fp8, run as TE's ring exchange (copy engines, the GEMM in 4 chunks). The rule from the
  // measured pieces (one ring step of copies, one GEMM chunk) against the measured ring.
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  std::vector<double> errors;
  const std::optional<GpuProfile> h100 = find_gpu_profile("h100-sxm5-80gb");
  REQUIRE(h100);
  const KernelModel km(*h100);  // holds a reference to the profile
  for (const char* run :
       {"ring-exchange-2026-11-27.json", "ring-exchange-run2-2026-11-27.json", "ring-exchange-run3-2026-11-27.json"}) {
  const json doc = read_json_file(root + "/calibration/data/h100-sxm5-80gb/" + run);
  REQUIRE(doc.at("format") == "clustersim-ring-exchange/1");
  std::printf("%s\n", run);
  for (const auto& r : doc.at("results")) {
    const i64 t = r.at("tp").get<i64>();
    const double chunk = r.at("chunk_s").get<double>(), step = r.at("copy_step_s").get<double>();
    const double rule = double(t) * chunk + ring_exchange_exposed(double(t - 1) * step, double(t) * chunk, t);
    const double ring = r.at("ring_s").get<double>();
    errors.push_back(std::fabs(rule / ring - 1));
    // The kernel model's price of running the GEMM in t chunks, beside the measured one.
    const DType g = r.at("dtype") == "fp8" ? DType::fp8 : DType::bf16;
    const i64 m = r.at("m").get<i64>(), n = r.at("n").get<i64>(), k = r.at("k").get<i64>();
    const double model_ratio = double(t) * km.gemm(1, m / t, n, k, g) / km.gemm(1, m, n, k, g);
    std::printf("%-10s %5lld %-4s %-4s ring %7.1f us, rule %7.1f us (%+5.1f%%); t chunks / whole: measured %.3f, "
                "kernel model %.3f\n",
                r.at("model").get<std::string>().c_str(), (long long)m, r.at("gemm").get<std::string>().c_str(),
                r.at("dtype").get<std::string>().c_str(), ring * 1e6, rule * 1e6, 100 * (rule / ring - 1),
                double(t) * chunk / r.at("whole_s").get<double>(), model_ratio);
    // Reached 2026-11-27: the kernel model prices the chunks 0.10 below to 0.19 above the measured
    // ratio (1.02-1.16): it over-charges the QKV chunks (fp8 1.23-1.28 against 1.05-1.09) and
    // under-charges the large FC1 ones (0.92-0.97 against 1.02-1.04).
    CHECK(std::fabs(model_ratio - double(t) * chunk / r.at("whole_s").get<double>()) <= 0.25);
  }
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  std::printf("rule against the measured ring: median |error| %.1f%%, max %.1f%% over %zu shapes\n", 100 * median,
              100 * errors.back(), errors.size());
  // Reached 2026-11-27 over the three runs (36 rings; the third with 21 rounds a ring): 2.3 %,
  // 25.3 % (the first two runs alone: 1.8 %, 25.3 %). The worst: Llama 3 70B's fp8
  // QKV (-18.8 / -24.3 %), whose 71 us chunks are shorter than the 92 us copies, where the copies
  // and the GEMM slow each other, which the rule leaves out; and GPT-3's fp8 QKV at 2,048 tokens,
  // 384 us in the first run (-1.4 %) and 499 us in the second (-25.3 %): with chunks of about
  // 95 us the ring's per-step synchronisation across the GPUs can expose tens of us a step.
  CHECK(median <= 0.03);
  CHECK(errors.back() <= 0.30);
}

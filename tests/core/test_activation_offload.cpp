// Activation offload (training.activation_offload_layers; rules.hpp activation_offload):
// the rule against its closed form (memory that leaves the GPU, the copies' exposed time
// on a slow and a fast PCIe link), the estimator's memory and time with and without it,
// the calibrated pinned bandwidth in the H100 profile, and the scenario errors naming the
// JSON path. Each prints the expectation beside the value.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>

#include "costmodel/hardware.hpp"
#include "scenario_doc.hpp"
#include "scenarios/json_reader.hpp"
#include "costmodel/kernels.hpp"
#include "strategies/estimator.hpp"
#include "strategies/op_timing.hpp"
#include "strategies/plan_space.hpp"
#include "strategies/rules.hpp"

using namespace clustersim;
using nlohmann::json;
using clustersim::test::scenario_from;
using clustersim::test::problems_of;

namespace {
void show(const char* what, double expected, double computed) {
  std::printf("%-72s expected %.9g, computed %.9g\n", what, expected, computed);
}

json gpt_doc(std::int64_t offload) {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "gpt"}, {"hidden", 4096}, {"layers", 8}, {"heads", 32}, {"seq_len", 4096}, {"vocab", 51200}};
  doc["training"] = {{"global_batch", 8}, {"micro_batch", 2}, {"precision", "mixed-bf16"}, {"recompute", "none"}};
  if (offload > 0) doc["training"]["activation_offload_layers"] = offload;
  doc["cluster"] = {{"gpu", "h100-sxm5-80gb"}, {"nodes", 1}, {"gpus_per_node", 2}, {"intra_node", {{"fabric", "nvswitch"}}}};
  doc["plan"] = {{"dp", 1}, {"tp", 1}, {"pp", 2}, {"schedule", "1f1b"}};
  return doc;
}

}  // namespace

TEST_CASE("activation offload: memory saved = offloaded layers x saved bytes, copies exposed beyond the next layer",
          "[rules][offload]") {
  // Four layers of 1 GB saved activations, 10 ms forward and 20 ms backward each; three go.
  const std::vector<OffloadLayer> layers(4, OffloadLayer{1e9, 0.010, 0.020});
  const double kept = 1e9, fwd = 0.010, bwd = 0.020;
  // Slow PCIe (Gen3 x16, 12 GB/s each way): every copy outlasts the next layer's compute.
  {
    const double bw = 12e9;
    const ActivationOffload o = activation_offload(layers, 3, bw, bw);
    show("slow link: layers offloaded", 3, double(o.layers));
    show("slow link: bytes off the GPU per micro-batch (3 x 1 GB)", 3 * kept, o.offloaded);
    show("slow link: copy buffer (two layers)", 2 * kept, o.buffer);
    show("slow link: D2H exposed, 3 x (1 GB / 12 GB/s - 10 ms)", 3 * (kept / bw - fwd), o.exposed_forward);
    show("slow link: H2D exposed, 3 x (1 GB / 12 GB/s - 20 ms)", 3 * (kept / bw - bwd), o.exposed_backward);
    CHECK(o.layers == 3);
    CHECK(o.offloaded == Approx(3 * kept));
    CHECK(o.buffer == Approx(2 * kept));
    CHECK(o.exposed_forward == Approx(3 * (kept / bw - fwd)).epsilon(1e-12));
    CHECK(o.exposed_backward == Approx(3 * (kept / bw - bwd)).epsilon(1e-12));
  }
  // Fast link (200 GB/s): a copy takes 5 ms, hidden behind the next layer's 10 ms forward.
  {
    const ActivationOffload o = activation_offload(layers, 3, 200e9, 200e9);
    show("fast link: exposed forward + backward", 0, o.exposed_forward + o.exposed_backward);
    CHECK(o.exposed_forward == 0);
    CHECK(o.exposed_backward == 0);
    CHECK(o.d2h.at(0) == Approx(kept / 200e9));
  }
  // In between (80 GB/s, 12.5 ms a copy): the forward exposes 2.5 ms per layer, the backward nothing.
  {
    const ActivationOffload o = activation_offload(layers, 3, 80e9, 80e9);
    show("80 GB/s: D2H exposed 3 x 2.5 ms", 3 * 0.0025, o.exposed_forward);
    CHECK(o.exposed_forward == Approx(3 * 0.0025).epsilon(1e-9));
    CHECK(o.exposed_backward == 0);
  }
  // The last layer never goes, and a chunk of one layer offloads nothing.
  CHECK(activation_offload(layers, 9, 80e9, 80e9).layers == 3);
  CHECK(activation_offload({layers[0]}, 1, 80e9, 80e9).layers == 0);
  CHECK(activation_offload(layers, 0, 80e9, 80e9).offloaded == 0);
}

TEST_CASE("activation offload: the H100 profile has the calibrated pinned bandwidth, other GPUs their datasheet PCIe",
          "[offload][calibration]") {
  const auto h100 = find_gpu_profile("h100-sxm5-80gb");
  REQUIRE(h100);
  // calibration/data/h100-sxm5-80gb/microbench-*.json: pinned H2D 55.4 GB/s, D2H 55.3 GB/s at 1 GiB.
  show("H100 pinned H2D (microbench memcpy, 1 GiB)", 55.3765177e9, h100->host_copy_bandwidth(true));
  show("H100 pinned D2H (microbench memcpy, 1 GiB)", 55.2745769e9, h100->host_copy_bandwidth(false));
  CHECK(h100->host_copy_bandwidth(true) == Approx(55.3765177e9).epsilon(1e-6));
  CHECK(h100->host_copy_bandwidth(false) == Approx(55.2745769e9).epsilon(1e-6));
  CHECK(h100->pcie_bandwidth == Approx(64e9));  // the link's datasheet rate stays for the NIC path
  const auto a100 = find_gpu_profile("a100-sxm4-80gb");
  REQUIRE(a100);
  show("A100 host copies: its datasheet PCIe", a100->pcie_bandwidth, a100->host_copy_bandwidth(true));
  CHECK(a100->pinned_h2d == 0);
  CHECK(a100->host_copy_bandwidth(true) == a100->pcie_bandwidth);
  CHECK(a100->host_copy_bandwidth(false) == a100->pcie_bandwidth);
}

TEST_CASE("activation offload: the estimator's memory and exposed copies follow the rule", "[estimator][offload]") {
  const Scenario base = scenario_from(gpt_doc(0));
  const Scenario off = scenario_from(gpt_doc(2));
  const Estimator eb = make_estimator(base), eo = make_estimator(off);
  const Prediction pb = eb.estimate(base.plan), po = eo.estimate(off.plan);
  // Stage 0 holds layers 0-3 and the embedding; 1F1B keeps min(m, p - s) = 2 micro-batches on it.
  const std::int64_t m = pb.micro_batches;
  const double in_flight = micro_batches_in_flight(Schedule::one_f_one_b, 2, 1, m, 0);
  // One layer's saved activations from op_timing (no recompute: every op's saved tensors).
  const ModelGraph g = build_model_graph(base.model, 2, graph_style(base.training));
  const KernelModel km(eb.cluster().gpu);
  const ShardingContext ctx{1, 1, false, eb.precision().compute, eb.precision().weight_gemm, 1.0};
  Bytes saved_layer = 0;
  for (const Op& op : g.blocks[static_cast<std::size_t>(g.layers.front())].ops) saved_layer += time_op(op, ctx, km).saved;
  const double saved_expected = in_flight * 2 * saved_layer;
  show("stage 0 activations saved = in flight x 2 layers x per-layer saved bytes", saved_expected,
       pb.stages[0].memory.activations - po.stages[0].memory.activations);
  // The copy buffer (2 layers) adds what exceeds one micro-batch's kept activations: here
  // the 2 layers and the embedding left on the GPU, so nothing.
  const double kept_after = po.stages[0].memory.activations / in_flight;
  const double buffer_extra = std::max(0.0, 2 * saved_layer - kept_after);
  show("stage 0 temporary grows by max(0, copy buffer (2 layers) - kept per micro-batch)", buffer_extra,
       po.stages[0].memory.temporary - pb.stages[0].memory.temporary);
  CHECK(pb.stages[0].memory.activations - po.stages[0].memory.activations == Approx(saved_expected).epsilon(1e-9));
  CHECK(po.stages[0].memory.temporary - pb.stages[0].memory.temporary == Approx(buffer_extra).margin(1e-3));
  // A GPT layer saves 34 s b h + 5 a s^2 b bytes without flash attention (Korthikanti et al.);
  // the graph's flash attention keeps the 34 s b h part and a few small tensors.
  const double sbh = 4096.0 * 2 * 4096;
  show("per-layer saved bytes / (s b h) (Korthikanti: 34 with flash attention)", 34, saved_layer / sbh);
  CHECK(saved_layer / sbh > 30);
  CHECK(saved_layer / sbh < 40);
  // Time: the exposed copies per micro-batch, from the rule with the per-layer times.
  const double copy = saved_layer / 55.2745769e9;
  const double layer_f = pb.stages[0].forward / 4, layer_b = pb.stages[0].backward / 4;  // embedding's share is tiny
  show("stage 0 D2H exposed per micro-batch ~ 2 x (copy - layer forward)", 2 * std::max(0.0, copy - layer_f),
       po.stages[0].offload_forward);
  show("stage 0 H2D exposed per micro-batch ~ 2 x (copy - layer backward)",
       2 * std::max(0.0, saved_layer / 55.3765177e9 - layer_b), po.stages[0].offload_backward);
  CHECK(po.stages[0].offload_forward == Approx(2 * std::max(0.0, copy - layer_f)).epsilon(0.02).margin(1e-6));
  CHECK(po.stages[0].offload_backward ==
        Approx(2 * std::max(0.0, saved_layer / 55.3765177e9 - layer_b)).epsilon(0.02).margin(1e-6));
  std::printf("iteration time %.6f s without offload, %.6f s with (offload_exposed_s %.6f, fill and drain included)\n",
              pb.iteration_time, po.iteration_time, po.breakdown.offload_exposed);
  CHECK(po.breakdown.offload_exposed > 0);
  CHECK(po.iteration_time > pb.iteration_time);
  CHECK(po.memory_per_gpu < pb.memory_per_gpu);
  // Without offload nothing changes: no offload keys move any other plan.
  CHECK(pb.breakdown.offload_exposed == 0);
}

TEST_CASE("activation offload: errors name the field and the bad value", "[scenario][offload]") {
  json d = gpt_doc(0);
  d["training"]["activation_offload_layers"] = -1;
  std::string p = problems_of(d);
  INFO(p);
  CHECK(p.find("/training/activation_offload_layers") != std::string::npos);
  CHECK(p.find("-1") != std::string::npos);
  d["training"]["activation_offload_layers"] = "two";
  p = problems_of(d);
  CHECK(p.find("/training/activation_offload_layers") != std::string::npos);
  // pp 2 over 8 layers: 4 per stage, at most 3 may go.
  d["training"]["activation_offload_layers"] = 4;
  p = problems_of(d);
  INFO(p);
  CHECK(p.find("/training/activation_offload_layers") != std::string::npos);
  CHECK(p.find("at most 3") != std::string::npos);
  d["training"]["activation_offload_layers"] = 3;
  CHECK(problems_of(d).empty());
  d["training"]["activation_offoad_layers"] = 3;  // misspelt: the nearest key is suggested
  p = problems_of(d);
  CHECK(p.find("activation_offload_layers") != std::string::npos);
}

TEST_CASE("activation offload: the manual plan space costs its plans with the offload", "[plan_space][offload]") {
  const Scenario s = scenario_from(gpt_doc(2));
  const Estimator est = make_estimator(s);
  const auto plans = enumerate_plans(s);
  REQUIRE(!plans.empty());
  int offloading = 0;
  for (const auto& pt : plans) {
    const Prediction e = est.estimate(pt.plan, pt.micro_batch, pt.recompute);
    if (e.breakdown.offload_exposed > 0) ++offloading;
  }
  std::printf("%d of %zu manual plans offload\n", offloading, plans.size());
  CHECK(offloading > 0);
}

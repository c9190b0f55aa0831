// Analytical estimator: closed forms for the bubble, ZeRO and activation memory, and
// the bookkeeping (the breakdown adds up to the iteration time).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "scenario_doc.hpp"
#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "strategies/rules.hpp"

using namespace clustersim;
using nlohmann::json;
using clustersim::test::scenario_from;

namespace {

json gpt_doc(std::int64_t layers, std::int64_t vocab = 51200) {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "gpt"}, {"hidden", 4096}, {"layers", layers}, {"heads", 32}, {"seq_len", 2048},
                  {"vocab", vocab}, {"attention", "standard"}, {"dropout", 0.1}};
  doc["training"] = {{"global_batch", 512}, {"micro_batch", 1}, {"precision", "mixed-bf16"}, {"recompute", "none"}};
  doc["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 0}};
  return doc;
}

Prediction run(const json& doc) {
  const Scenario s = scenario_from(doc);
  return make_estimator(s).estimate(s.plan);
}

}  // namespace

TEST_CASE("the time breakdown adds up to the iteration time", "[estimator]") {
  std::vector<json> docs;
  docs.push_back(parse_json_text(default_scenario_text(), "<test>"));
  json d = gpt_doc(32);
  d["plan"] = {{"dp", 2}, {"tp", 4}, {"pp", 2}, {"schedule", "interleaved"}, {"virtual_stages", 4}, {"zero", 1}};
  docs.push_back(d);
  d["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 3}};
  docs.push_back(d);
  for (const auto& doc : docs) {
    const Prediction e = run(doc);
    CHECK(e.breakdown.total() == Approx(e.iteration_time).epsilon(1e-12));
    CHECK(e.tokens_per_s == Approx(512.0 * 2048 / e.iteration_time).epsilon(1e-12));
  }
}

TEST_CASE("pipeline bubble of uniform stages: (p-1)/(m+p-1), interleaved (p-1)/v", "[estimator]") {
  // A tiny vocabulary makes the embedding and head negligible: stages are uniform.
  json doc = gpt_doc(32, 128);
  doc["training"]["global_batch"] = 64;
  doc["plan"] = {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"schedule", "gpipe"}};
  const Prediction g = run(doc);
  const double m = 32, p = 4;
  const double expected = (p - 1) / (m + p - 1);
  const double bubble = g.breakdown.bubble / (g.iteration_time - g.breakdown.dp_comm_exposed - g.breakdown.optimizer);
  INFO("gpipe: expected bubble fraction " << expected << ", estimated " << bubble);
  CHECK(bubble == Approx(expected).epsilon(0.01));

  doc["plan"]["schedule"] = "interleaved";
  doc["plan"]["virtual_stages"] = 4;
  const Prediction i = run(doc);
  const double v = 4;
  const double expected_i = (p - 1) / v / (m + (p - 1) / v);
  const double bubble_i = i.breakdown.bubble / (i.iteration_time - i.breakdown.dp_comm_exposed - i.breakdown.optimizer);
  INFO("interleaved: expected " << expected_i << ", estimated " << bubble_i);
  CHECK(bubble_i == Approx(expected_i).epsilon(0.01));
}

TEST_CASE("uneven stages: lighten-ends takes a layer off the stages holding the embedding and the head", "[estimator]") {
  // 30 layers on 4 stages: (30 + 2) / 4 = 8 layer-equivalents, so 7, 8, 8, 7 layers.
  json doc = gpt_doc(30);
  doc["plan"] = {{"dp", 4}, {"tp", 1}, {"pp", 4}, {"layers_per_stage", "lighten-ends"}};
  const Prediction ends = run(doc);
  REQUIRE(ends.stages.size() == 4);
  CHECK(ends.stages[0].layers == 7);
  CHECK(ends.stages[1].layers == 8);
  CHECK(ends.stages[2].layers == 8);
  CHECK(ends.stages[3].layers == 7);
  CHECK(ends.stages[3].first_layer == 23);
  // A middle stage holds 8 GPT layers of 12 h^2 + 13 h parameters each.
  const double h = 4096, V = 51200, s = 2048;
  const double layer = 12 * h * h + 13 * h;
  std::printf("middle stage parameters: expected 8 (12 h^2 + 13 h) = %.6g, estimated %.6g\n", 8 * layer,
              ends.stages[1].params_per_gpu);
  CHECK(ends.stages[1].params_per_gpu == Approx(8 * layer).epsilon(1e-12));
  // The first: 7 layers, the word and position embeddings (V h + s h).
  std::printf("first stage parameters: expected 7 layers + (V + s) h = %.6g, estimated %.6g\n", 7 * layer + (V + s) * h,
              ends.stages[0].params_per_gpu);
  CHECK(ends.stages[0].params_per_gpu == Approx(7 * layer + (V + s) * h).epsilon(1e-6));

  // The same layers with the last stage holding one more (7, 8, 7, 8): its forward grows by
  // exactly one layer's (a middle stage's / 8), and it becomes the slowest stage.
  doc["plan"]["layers_per_stage"] = json::array({7, 8, 7, 8});
  const Prediction heavy = run(doc);
  const double one_layer = ends.stages[1].forward / 8;
  std::printf("last stage forward, one layer more: expected +%.6g s, estimated +%.6g s\n", one_layer,
              heavy.stages[3].forward - ends.stages[3].forward);
  CHECK(heavy.stages[3].forward - ends.stages[3].forward == Approx(one_layer).epsilon(1e-9));
  std::printf("iteration: lighten-ends %.4f s, 7-8-7-8 %.4f s\n", ends.iteration_time, heavy.iteration_time);
  CHECK(ends.iteration_time < heavy.iteration_time);
  // Memory per stage follows the stage's own layers: the middle stage's activations are
  // 8 layers' worth for its p - 1 = 3 micro-batches in flight (1F1B).
  CHECK(heavy.stages[1].memory.activations == Approx(ends.stages[1].memory.activations).epsilon(1e-12));
  CHECK(heavy.stages[2].memory.activations == Approx(ends.stages[2].memory.activations * 7 / 8).epsilon(1e-12));
}

TEST_CASE("ZB-H1: the bubble shrinks to (p-1)(F + B - 2W) at 1F1B's memory", "[estimator]") {
  // Uniform stages (tiny vocabulary), no data-parallel traffic on the critical path: the
  // pipeline part of the iteration is m t + (p-1) max(F, t - 2W) per the rule.
  json doc = gpt_doc(32, 128);
  doc["training"]["global_batch"] = 64;
  doc["plan"] = {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"schedule", "1f1b"}};
  const Prediction one = run(doc);
  doc["plan"]["schedule"] = "zb-h1";
  const Prediction zb = run(doc);
  const StagePrediction& s = zb.stages[1];
  const double t = s.per_micro_batch(), F = s.forward + (s.tp_comm + s.ep_comm + s.p2p) / 2, W = s.weight_grad;
  REQUIRE(W > 0);
  REQUIRE(W < s.backward);
  // A weight-gradient GEMM has the FLOPs of the forward GEMM: W is close to the GEMM part of F.
  std::printf("ZB-H1 stage 1: F %.4g s, B %.4g s, W %.4g s\n", s.forward, s.backward, W);
  const double p = 4;
  std::printf("ZB-H1 bubble: expected (p-1) max(F, t - 2W) = %.6g s, estimated %.6g s (1F1B %.6g s)\n",
              (p - 1) * std::max(F, t - 2 * W), zb.breakdown.bubble, one.breakdown.bubble);
  // The first and last stages (embedding, head) differ slightly from the middle ones.
  CHECK(zb.breakdown.bubble == Approx((p - 1) * std::max(F, t - 2 * W)).epsilon(0.02));
  // Against 1F1B's (p-1) t: the share max(F, t - 2W) / t (about half here: the TP
  // collectives and pipeline sends on the critical path are not deferred).
  CHECK(zb.breakdown.bubble / one.breakdown.bubble == Approx(std::max(F, t - 2 * W) / t).epsilon(0.02));
  CHECK(zb.memory_per_gpu == Approx(one.memory_per_gpu).epsilon(1e-12));
}

TEST_CASE("DualPipe: the rules' makespan of half-stage chunks, two parameter copies, p + 1 chunks of activations", "[estimator][dualpipe]") {
  json doc = gpt_doc(32, 128);
  doc["training"]["global_batch"] = 64;
  doc["plan"] = {{"dp", 2}, {"tp", 2}, {"pp", 4}, {"schedule", "1f1b"}, {"zero", 1}};
  const Prediction one = run(doc);
  doc["plan"]["schedule"] = "dualpipe";
  const Prediction dual = run(doc);
  const std::int64_t m = dual.micro_batches, p = 4;
  REQUIRE(m == 32);
  // The pipeline part: the rule's makespan over each rank's chunks (half of its figures).
  std::vector<DualPipeChunk> chunks;
  for (const auto& st : dual.stages) {
    const double comm = (st.tp_comm + st.ep_comm + st.p2p) / 4;
    chunks.push_back({st.forward / 2, comm, (st.backward + st.recompute) / 2, comm, st.weight_grad / 2});
  }
  // (The pairs overlap compute with communication: the GPU's measured interference slows both.)
  const double pipeline = dualpipe_makespan(chunks, m, make_estimator(scenario_from(doc)).cluster().gpu.interference);
  const auto& bd = dual.breakdown;
  const double pipe_est = dual.iteration_time - bd.dp_comm_exposed - bd.optimizer - bd.host_bound;
  std::printf("DualPipe p 4 m 32: pipeline expected %.6g s, estimated %.6g s; bubble %.6g s (1F1B %.6g s)\n", pipeline,
              pipe_est, bd.bubble, one.breakdown.bubble);
  CHECK(pipe_est == Approx(pipeline).epsilon(1e-9));
  CHECK(bd.bubble < one.breakdown.bubble);
  // Each rank holds stage s and stage p-1-s: the layers of two stages, 2x the weights;
  // their ZeRO-1 shards spread over 2 dp copies.
  for (std::int64_t s = 0; s < p; ++s) {
    const auto& d = dual.stages[static_cast<std::size_t>(s)];
    const auto& o1 = one.stages[static_cast<std::size_t>(s)];
    const auto& o2 = one.stages[static_cast<std::size_t>(p - 1 - s)];
    CHECK(d.layers == o1.layers + o2.layers);
    CHECK(d.params_per_gpu == Approx(o1.params_per_gpu + o2.params_per_gpu).epsilon(1e-12));
    CHECK(d.memory.weights == Approx(o1.memory.weights + o2.memory.weights).epsilon(1e-12));
    CHECK(d.memory.optimizer_states == Approx((o1.memory.optimizer_states + o2.memory.optimizer_states) / 2).epsilon(1e-12));
  }
  // Activations: p + 1 chunks of half of both stages' (middle ranks: equal stages).
  const auto& d1 = dual.stages[1];
  const double per_chunk_one = one.stages[1].memory.activations / 3.0;  // 1F1B keeps p - 1 = 3 on stage 1
  std::printf("DualPipe stage 1 activations: expected %.6g B, estimated %.6g B\n", 5 * per_chunk_one, d1.memory.activations);
  CHECK(d1.memory.activations == Approx(5 * per_chunk_one).epsilon(1e-9));
  // The model's FLOPs do not double with the copies.
  CHECK(dual.hardware_flops == Approx(one.hardware_flops).epsilon(1e-12));
}

TEST_CASE("mixed-fp8 on a GPU without fp8 units is refused, naming /training/precision", "[estimator][fp8]") {
  for (const char* gpu : {"v100-sxm2-32gb", "a100-sxm4-80gb"}) {
    json doc = gpt_doc(8);
    doc["training"]["precision"] = "mixed-fp8";
    doc["cluster"]["gpu"] = gpu;
    const Scenario s = scenario_from(doc);
    INFO(gpu);
    try {
      (void)make_estimator(s);
      FAIL("expected an InputError");
    } catch (const InputError& e) {
      std::printf("%s: %s\n", gpu, e.what());
      CHECK_THAT(std::string(e.what()), Catch::Contains("/training/precision") && Catch::Contains("has no"));
    }
  }
  // On an H100 the weight GEMMs run at the fp8 rate: the iteration is faster than mixed-bf16's.
  json doc = gpt_doc(8);
  doc["cluster"]["gpu"] = "h100-sxm5-80gb";
  const Prediction bf16 = run(doc);
  doc["training"]["precision"] = "mixed-fp8";
  const Prediction fp8 = run(doc);
  std::printf("gpt 8 layers on h100: mixed-bf16 %.4f s, mixed-fp8 %.4f s\n", bf16.iteration_time, fp8.iteration_time);
  CHECK(fp8.iteration_time < bf16.iteration_time);
}

TEST_CASE("ZeRO stages shard optimizer states, then gradients, then weights", "[estimator]") {
  json doc = gpt_doc(8);
  const Prediction z0 = run(doc);
  const double P = z0.stages[0].params_per_gpu;
  CHECK(P == Approx(z0.parameters).epsilon(1e-12));  // dp only: every GPU holds the model
  // mixed-bf16: bf16 weights, fp32 grads, fp32 master + two Adam states.
  CHECK(z0.memory.weights == Approx(2 * P).epsilon(1e-12));
  CHECK(z0.memory.gradients == Approx(4 * P).epsilon(1e-12));
  CHECK(z0.memory.optimizer_states == Approx(12 * P).epsilon(1e-12));
  doc["plan"]["zero"] = 1;
  const Prediction z1 = run(doc);
  CHECK(z1.memory.optimizer_states == Approx(12 * P / 16).epsilon(1e-12));
  CHECK(z1.memory.gradients == Approx(4 * P).epsilon(1e-12));
  doc["plan"]["zero"] = 2;
  const Prediction z2 = run(doc);
  CHECK(z2.memory.gradients == Approx(4 * P / 16).epsilon(1e-12));
  CHECK(z2.memory.weights == Approx(2 * P).epsilon(1e-12));
  doc["plan"]["zero"] = 3;
  const Prediction z3 = run(doc);
  CHECK(z3.memory.weights == Approx(2 * P / 16).epsilon(1e-12));
}

TEST_CASE("activation memory per layer: (34 s b h + 5 a s^2 b)/t under TP with SP", "[estimator]") {
  // The difference between 4 and 2 layers isolates two layers' saved activations.
  auto per_layer = [](bool sp, const char* recompute) {
    json a = gpt_doc(4), b = gpt_doc(2);
    for (json* d : {&a, &b}) {
      (*d)["plan"] = {{"dp", 4}, {"tp", 4}, {"pp", 1}, {"sequence_parallel", sp}};
      (*d)["training"]["recompute"] = recompute;
    }
    return (run(a).memory.activations - run(b).memory.activations) / 2;
  };
  const double s = 2048, b = 1, h = 4096, a = 32, t = 4;
  const double with_sp = (34 * s * b * h + 5 * a * s * s * b) / t;
  const double without_sp = s * b * h * (10 + 24 / t) + 5 * a * s * s * b / t;
  INFO("SP: expected " << with_sp << " bytes/layer");
  CHECK(per_layer(true, "none") == Approx(with_sp).epsilon(1e-9));
  INFO("no SP: expected " << without_sp << " bytes/layer");
  CHECK(per_layer(false, "none") == Approx(without_sp).epsilon(1e-9));
  // Selective recompute drops the 5 a s^2 b term; full recompute keeps only the input.
  CHECK(per_layer(true, "selective") == Approx(34 * s * b * h / t).epsilon(1e-9));
  CHECK(per_layer(true, "full") == Approx(2 * s * b * h / t).epsilon(1e-9));
}

TEST_CASE("recompute trades memory for time", "[estimator]") {
  json doc = gpt_doc(8);
  const Prediction none = run(doc);
  doc["training"]["recompute"] = "full";
  const Prediction full = run(doc);
  CHECK(full.memory.activations < none.memory.activations);
  CHECK(full.iteration_time > none.iteration_time);
  // Every layer's forward runs again; the embedding and the logits do not.
  CHECK(full.breakdown.compute_recompute < full.breakdown.compute_forward);
  CHECK(full.breakdown.compute_recompute > 0.8 * full.breakdown.compute_forward);
  // Hardware FLOPs: 4 passes over the layers, 3 over the logits (Megatron's 96 B s l h^2
  // (1 + s/6h + V/16lh) against 72 B s l h^2 (1 + s/6h + V/12lh) without recompute).
  const double s = 2048, l = 8, h = 4096, V = 51200, B = 512;
  const double paper_full = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  const double paper_none = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  CHECK(full.hardware_flops == Approx(paper_full).epsilon(1e-9));
  CHECK(none.hardware_flops == Approx(paper_none).epsilon(1e-9));
  CHECK(full.model_flops == Approx(none.model_flops).epsilon(1e-12));
}

TEST_CASE("overlapping the gradient reduction with backward hides most of it", "[estimator]") {
  json doc = gpt_doc(8);
  doc["plan"]["overlap_grad_reduce"] = false;
  const Prediction exposed = run(doc);
  doc["plan"]["overlap_grad_reduce"] = true;
  const Prediction overlapped = run(doc);
  CHECK(overlapped.breakdown.dp_comm_exposed < exposed.breakdown.dp_comm_exposed);
  CHECK(overlapped.iteration_time < exposed.iteration_time);
}

TEST_CASE("a plan that does not fit says by how much", "[estimator]") {
  json doc = gpt_doc(48);
  doc["model"]["hidden"] = 8192;
  doc["model"]["heads"] = 64;
  doc["cluster"]["nodes"] = 1;
  doc["cluster"]["gpus_per_node"] = 1;
  doc["cluster"].erase("inter_node");
  doc["plan"] = {{"dp", 1}, {"tp", 1}, {"pp", 1}};
  const Prediction e = run(doc);
  CHECK_FALSE(e.fits);
  CHECK(e.overflow == Approx(e.memory_per_gpu - e.memory_capacity));
  CHECK(e.overflow > 0);
}

TEST_CASE("expert parallelism splits experts and adds all-to-all", "[estimator]") {
  json doc = gpt_doc(4);
  doc["model"]["family"] = "moe";
  doc["model"]["experts"] = 16;
  doc["model"]["top_k"] = 2;
  doc["model"]["attention"] = "flash";
  doc["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"ep", 1}};
  const Prediction e1 = run(doc);
  doc["plan"]["ep"] = 8;
  const Prediction e8 = run(doc);
  CHECK(e1.breakdown.ep_comm_exposed == 0);
  CHECK(e8.breakdown.ep_comm_exposed > 0);
  CHECK(e8.stages[0].params_per_gpu < e1.stages[0].params_per_gpu);
  CHECK(e8.parameters == e1.parameters);
}

TEST_CASE("estimates are deterministic", "[estimator]") {
  const json doc = parse_json_text(default_scenario_text(), "<test>");
  CHECK(to_json(run(doc)).dump() == to_json(run(doc)).dump());
}

TEST_CASE("tied embeddings split over stages of one node sync over NVLink, not a missing network", "[estimator]") {
  // One node, no inter_node section: the first and last stage all-reduce the shared
  // embedding gradient over NVLink (this used to take the absent NICs: infinite time).
  json doc = gpt_doc(8);
  doc["cluster"] = {{"gpu", "h100-sxm5-80gb"}, {"nodes", 1}, {"gpus_per_node", 8}};
  doc["training"]["global_batch"] = 16;
  doc["plan"] = {{"dp", 2}, {"tp", 2}, {"pp", 2}};
  const Prediction e = run(doc);
  std::printf("GPT, 8 GPUs of one node, pp 2, tied embeddings: %.4f s, %.1f TFLOP/s per GPU\n", e.iteration_time,
              e.tflops_per_gpu);
  CHECK(std::isfinite(e.iteration_time));
  CHECK(std::isfinite(e.tflops_per_gpu));
  CHECK(e.iteration_time > 0);
  // The tied all-reduce over NVLink is a small part of the data-parallel time.
  doc["model"]["tie_embeddings"] = false;
  const Prediction untied = run(doc);
  std::printf("exposed data-parallel time: tied %.6f s, untied %.6f s\n", e.breakdown.dp_comm_exposed,
              untied.breakdown.dp_comm_exposed);
  CHECK(e.breakdown.dp_comm_exposed - untied.breakdown.dp_comm_exposed < 0.01 * e.iteration_time);
}

TEST_CASE("launch_blocking: every kernel pays the blocking gap in place of the asynchronous one", "[estimator]") {
  // One GPU, one micro-batch size large enough that the host never bounds the
  // asynchronous run: blocking launches add, per micro-batch, each kernel's
  // (launch_blocking_gap - kernel_overhead); the host's own time is then in that gap.
  json doc = gpt_doc(4);
  doc["training"] = {{"global_batch", 8}, {"micro_batch", 4}, {"precision", "mixed-bf16"}, {"recompute", "none"},
                     {"framework", {{"name", "megatron"}}}};
  doc["plan"] = {{"dp", 1}, {"tp", 1}, {"pp", 1}, {"zero", 0}};
  doc["cluster"] = {{"gpu", "a100-sxm4-80gb"}, {"nodes", 1}, {"gpus_per_node", 1}};
  const Scenario async_s = scenario_from(doc);
  Estimator async_est = make_estimator(async_s);
  const Prediction async_p = async_est.estimate(async_s.plan);
  REQUIRE(async_p.breakdown.host_bound == 0);
  doc["training"]["framework"]["launch_blocking"] = true;
  const Prediction blocking = run(doc);
  const GpuProfile& gpu = async_est.cluster().gpu;
  const StagePrediction& st = async_p.stages.front();
  const double kernels = st.host / gpu.host.eager_per_kernel;  // kernels of one micro-batch
  const double m = 2;
  // The added time; the optimizer step's kernels (once per iteration, not in st.host)
  // pay the gap too, so the computed figure may exceed this by a few percent.
  const double expected = m * kernels * (launch_blocking_gap(gpu.efficiency, gpu.host) - gpu.efficiency.kernel_overhead);
  const double added = blocking.iteration_time - async_p.iteration_time;
  std::printf("launch_blocking, %.0f kernels per micro-batch: added time expected %.6f s, computed %.6f s "
              "(asynchronous step %.6f s)\n",
              kernels, expected, added, async_p.iteration_time);
  CHECK(blocking.breakdown.host_bound == 0);
  CHECK(added == Approx(expected).epsilon(0.05));
}

TEST_CASE("autograd's gradient accumulation: (m - 1) adds of every weight a GPU holds, a tied embedding's once", "[estimator]") {
  // Plain PyTorch DDP under autocast, 4 micro-batches: the weight update carries 3 adds of every
  // fp32 gradient (rules.hpp autograd_grad_accumulation); with one micro-batch, none. A tied
  // embedding is one weight on this GPU (pp 1): its gradient is accumulated once.
  json doc = gpt_doc(4);
  doc["cluster"] = {{"gpu", "h100-sxm5-80gb"}, {"nodes", 1}, {"gpus_per_node", 2}};
  doc["training"] = {{"global_batch", 32}, {"micro_batch", 4}, {"precision", "amp-bf16"}, {"recompute", "none"},
                     {"framework", "pytorch-ddp"}};
  doc["model"]["dropout"] = 0.0;
  doc["plan"] = {{"dp", 2}, {"tp", 1}, {"pp", 1}, {"zero", 0}};
  const auto optimizer = [&](const json& d) { return run(d).stages.front().optimizer; };
  json one = doc;
  one["training"]["global_batch"] = 8;  // m = 1
  json untied = doc, untied_one = one;
  untied["model"]["tie_embeddings"] = false;
  untied_one["model"]["tie_embeddings"] = false;
  const Scenario s = scenario_from(doc);
  const Estimator est = make_estimator(s);
  const KernelModel km(est.cluster().gpu);
  const double embedding = 51200.0 * 4096;  // the tied weight
  const double tied_adds = autograd_grad_accumulation(km, embedding, 4, est.precision());
  const double extra_tied = optimizer(doc) - optimizer(one), extra_untied = optimizer(untied) - optimizer(untied_one);
  std::printf("m = 4 against m = 1: weight update +%.3f ms tied, +%.3f ms untied; the untied head's adds expected "
              "%.3f ms, difference %.3f ms\n",
              extra_tied * 1e3, extra_untied * 1e3, tied_adds * 1e3, (extra_untied - extra_tied) * 1e3);
  CHECK(extra_tied > 0);
  CHECK(extra_untied - extra_tied == Approx(tied_adds).epsilon(1e-9));
  // Megatron sums into its own buffers (priced in the graph): no autograd adds in the update.
  json megatron = doc;
  megatron["training"]["framework"] = "megatron";
  megatron["training"]["precision"] = "mixed-bf16";
  json megatron_one = megatron;
  megatron_one["training"]["global_batch"] = 8;
  CHECK(optimizer(megatron) == Approx(optimizer(megatron_one)).epsilon(1e-12));
}

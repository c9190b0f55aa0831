// Context parallelism (plan.cp: ring and all-to-all attention) and hybrid sharding (HSDP),
// each rule against its closed form: the ring's exposed sends, the Ulysses all-to-all
// bytes, the memory divided by cp, the rank order, the HSDP groups and bytes, and the
// scenario errors naming the JSON path. Each prints the expectation beside the value.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>

#include "costmodel/kernels.hpp"
#include "scenario_doc.hpp"
#include "scenarios/json_reader.hpp"
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

// A Llama-3-8B-shaped model (4 layers) with long sequences on two 8-GPU H100 nodes.
json llama_doc() {
  json doc = parse_json_text(default_scenario_text(), "<test>");
  doc["model"] = {{"family", "llama"}, {"hidden", 4096},  {"layers", 4},     {"heads", 32},         {"kv_heads", 8},
                  {"seq_len", 32768},  {"vocab", 128256}, {"ffn_hidden", 14336}, {"attention", "flash"}};
  doc["training"] = {{"global_batch", 16}, {"micro_batch", 1}, {"precision", "mixed-bf16"}, {"recompute", "none"}};
  doc["cluster"] = {{"gpu", "h100-sxm5-80gb"},
                    {"nodes", 2},
                    {"gpus_per_node", 8},
                    {"intra_node", {{"fabric", "nvswitch"}}},
                    {"inter_node", {{"topology", "fat-tree"}, {"nics_per_node", 8}, {"nic_bandwidth", "400Gbps"},
                                    {"latency", "5us"}}}};
  doc["plan"] = {{"dp", 2}, {"tp", 2}, {"pp", 1}, {"cp", 4}, {"zero", 1}, {"sequence_parallel", true}};
  return doc;
}


const Op& flash_attention(const ModelGraph& g) {
  for (const Op& op : g.blocks[static_cast<std::size_t>(g.layers.front())].ops)
    if (op.kind == OpKind::attention) return op;
  FAIL("no attention op");
  return g.blocks.front().ops.front();
}
}  // namespace

TEST_CASE("context parallelism: ring sends the K, V block in cp - 1 steps beside each block's attention", "[rules][cp]") {
  const Scenario s = scenario_from(llama_doc());
  const ClusterModel cluster = make_estimator(s).cluster();
  const KernelModel km(cluster.gpu);
  const ModelGraph g = build_model_graph(s.model, 1, graph_style(s.training.precision));
  const Op& fa = flash_attention(g);
  ShardingContext ctx{2, 1, true, DType::bf16, DType::bf16, 1};
  ctx.cp = 4;
  const OpTiming o = time_op(fa, ctx, km);
  // K and V of this GPU: seq/cp tokens, kv_heads/tp heads of 128, bf16.
  const double kv_block = 2.0 * (32768 / 4) * (8 / 2) * 128 * 2;
  show("ring: K, V block sent per step (bytes)", kv_block, o.context.forward_bytes);
  CHECK(o.context.steps == 3);
  CHECK(o.context.forward_bytes == Approx(kv_block).epsilon(1e-12));
  show("ring backward: K, V and the partial dK, dV (bytes)", 2 * kv_block, o.context.backward_bytes);
  CHECK(o.context.backward_bytes == Approx(2 * kv_block).epsilon(1e-12));
  // cp block kernels of (seq/cp)^2 causal work over heads/tp heads.
  const double step = km.attention_forward(32 / 2, 32768 / 4, 32768 / 4, 128, true, fa.fwd_bytes / 8, DType::bf16);
  show("ring: attention forward = cp block kernels (s)", 4 * step, o.forward);
  CHECK(o.forward == Approx(4 * step).epsilon(1e-12));
  // One cp GPU does 1/cp of the whole sequence's causal FLOPs.
  ShardingContext whole{2, 1, true, DType::bf16, DType::bf16, 1};
  CHECK(o.forward_flops == Approx(time_op(fa, whole, km).forward_flops / 4).epsilon(1e-12));

  // Exposed per pass: (cp - 1) max(0, send - attention step), with factors of 1.
  CHECK(ring_attention_exposed(2e-3, 1.5e-3, 3) == Approx(3 * 0.5e-3).epsilon(1e-12));
  CHECK(ring_attention_exposed(1e-3, 1.5e-3, 3) == 0);
  CHECK(ring_attention_exposed(5e-3, 1e-3, 0) == 0);

  // One layer in the estimator: its cp time is the ring's exposed forward + backward, the
  // send priced as a pair on one node (cp 4 x tp 2 fits a node of 8).
  const Estimator est = make_estimator(s);
  const ContextGroups cg = context_groups(cluster, s.plan);
  const Seconds send_f = collective_time(cluster, Collective::send_recv, kv_block, Group{2, 2}, cg.cp_share);
  const Seconds send_b = collective_time(cluster, Collective::send_recv, 2 * kv_block, Group{2, 2}, cg.cp_share);
  CHECK(cg.cp.size == 4);
  CHECK(cg.cp.per_node == 4);
  const Seconds expected = ring_attention_exposed(send_f, o.forward / 4, 3, cluster.gpu.interference) +
                           ring_attention_exposed(send_b, o.backward / 4, 3, cluster.gpu.interference);
  const Prediction e = est.estimate(s.plan);
  show("ring: one stage's exposed cp time per micro-batch, 4 layers (s)", 4 * expected, e.stages[0].cp_comm);
  CHECK(e.stages[0].cp_comm == Approx(4 * expected).epsilon(1e-9));
  CHECK(e.breakdown.cp_comm_exposed == Approx(double(e.micro_batches) * e.stages[0].cp_comm).epsilon(1e-12));
  CHECK(e.breakdown.total() == Approx(e.iteration_time).epsilon(1e-12));
}

TEST_CASE("context parallelism: ring sends larger than a block's attention are exposed step by step", "[rules][cp]") {
  // Short sequences, cp over both nodes: each step's send crosses the network and the
  // block's attention is small, so every step exposes send - attention.
  json doc = llama_doc();
  doc["model"]["seq_len"] = 4096;
  doc["plan"] = {{"dp", 1}, {"tp", 1}, {"pp", 1}, {"cp", 16}, {"zero", 1}};
  const Scenario s = scenario_from(doc);
  const Estimator est = make_estimator(s);
  const ClusterModel& cluster = est.cluster();
  const ModelGraph g = build_model_graph(s.model, 1, graph_style(s.training.precision));
  ShardingContext ctx{1, 1, false, DType::bf16, DType::bf16, 1};
  ctx.cp = 16;
  const OpTiming o = time_op(flash_attention(g), ctx, KernelModel(cluster.gpu));
  const ContextGroups cg = context_groups(cluster, s.plan);
  REQUIRE(cg.cp.nodes() == 2);
  const Seconds send = collective_time(cluster, Collective::send_recv, o.context.forward_bytes, Group{2, 1}, cg.cp_share);
  const Seconds step = o.forward / 16;
  show("ring over 2 nodes: send per step (s)", send, send);
  show("ring over 2 nodes: attention per step (s)", step, step);
  REQUIRE(send > step);
  const Seconds exposed = ring_attention_exposed(send, step, 15, cluster.gpu.interference);
  CHECK(exposed > 0);
}

TEST_CASE("context parallelism: Ulysses all-to-alls move q, k, v and the output of the GPU's tokens", "[rules][cp]") {
  json doc = llama_doc();
  doc["plan"]["cp_algorithm"] = "all-to-all";
  const Scenario s = scenario_from(doc);
  const Estimator est = make_estimator(s);
  const KernelModel km(est.cluster().gpu);
  const ModelGraph g = build_model_graph(s.model, 1, graph_style(s.training.precision));
  const Op& fa = flash_attention(g);
  ShardingContext ctx{2, 1, true, DType::bf16, DType::bf16, 1};
  ctx.cp = 4;
  ctx.cp_algorithm = CpAlgorithm::all_to_all;
  const OpTiming o = time_op(fa, ctx, km);
  // q and the output: hidden/tp features; k and v: kv_heads/tp x 128; seq/cp tokens, bf16.
  const double tokens = 32768.0 / 4;
  const double expected = tokens * (2 * 4096 / 2 + 2 * (8 / 2) * 128) * 2;
  show("Ulysses: forward all-to-all bytes per rank (q, k, v, output)", expected, o.context.forward_bytes);
  CHECK(o.context.calls == 4);
  CHECK(o.context.steps == 0);
  CHECK(o.context.forward_bytes == Approx(expected).epsilon(1e-12));
  CHECK(o.context.backward_bytes == Approx(expected).epsilon(1e-12));
  // Whole sequences of heads/(tp cp) heads.
  const double attn = km.attention_forward(32 / 8, 32768, 32768, 128, true, fa.fwd_bytes / 8, DType::bf16);
  show("Ulysses: attention on whole sequences of heads/(tp cp) (s)", attn, o.forward);
  CHECK(o.forward == Approx(attn).epsilon(1e-12));
  // The estimator's cp time: 4 all-to-alls each way per layer, not overlapped.
  const ContextGroups cg = context_groups(est.cluster(), s.plan);
  const Seconds a2a = collective_time(est.cluster(), Collective::all_to_all, expected / 4, cg.cp, cg.cp_share);
  const Prediction e = est.estimate(s.plan);
  show("Ulysses: exposed cp time per micro-batch, 4 layers (s)", 4 * 8 * a2a, e.stages[0].cp_comm);
  CHECK(e.stages[0].cp_comm == Approx(4 * 8 * a2a).epsilon(1e-9));
}

TEST_CASE("context parallelism: activations divided by cp, ZeRO shards over dp x cp", "[rules][cp]") {
  json one = llama_doc();
  one["plan"] = {{"dp", 8}, {"tp", 2}, {"pp", 1}, {"zero", 1}, {"sequence_parallel", true}};
  const Scenario s1 = scenario_from(one);
  const Scenario s4 = scenario_from(llama_doc());  // dp 2 x cp 4
  const Prediction e1 = make_estimator(s1).estimate(s1.plan), e4 = make_estimator(s4).estimate(s4.plan);
  show("activations per GPU: cp 1 / cp 4", e1.memory.activations / 4, e4.memory.activations);
  CHECK(e4.memory.activations == Approx(e1.memory.activations / 4).epsilon(1e-9));
  show("optimizer states: ZeRO-1 over dp x cp = 8 GPUs either way", e1.memory.optimizer_states, e4.memory.optimizer_states);
  CHECK(e4.memory.optimizer_states == Approx(e1.memory.optimizer_states).epsilon(1e-12));
  CHECK(e4.memory.weights == Approx(e1.memory.weights).epsilon(1e-12));
  // Same model FLOPs per iteration; each cp GPU does 1/cp of a sequence's work.
  CHECK(e4.model_flops == Approx(e1.model_flops).epsilon(1e-12));
}

TEST_CASE("context parallelism: rank order tp, cp, dp, pp and the groups", "[rules][cp]") {
  // Megatron-Core's order: rank = ((stage dp + replica) cp + cp_rank) tp + tp_rank.
  CHECK(plan_rank(2, 2, 4, 1, 1, 3, 1) == ((1 * 2 + 1) * 4 + 3) * 2 + 1);
  CHECK(plan_rank(4, 2, 1, 3, 1) == plan_rank(4, 2, 1, 1, 3, 0, 1));
  const Scenario s = scenario_from(llama_doc());  // dp 2 x cp 4 x tp 2 on 2 x 8 GPUs
  const Estimator est = make_estimator(s);
  const ClusterModel& c = est.cluster();
  const PlanGroups g = plan_groups(c, s.plan);
  CHECK(gradient_ranks(s.plan) == 8);
  CHECK(g.dp.size == 8);      // gradients over dp x cp
  CHECK(g.dp.per_node == 4);  // 8 GPUs / tp 2
  CHECK(g.pp_cross_node);
  const ContextGroups cg = context_groups(c, s.plan);
  CHECK(cg.cp.stride == 2);
  CHECK(cg.cp_share == Approx(0.5));
}

TEST_CASE("hybrid sharding: reduce-scatter in the shard group, all-reduce of the shard across groups", "[rules][hsdp]") {
  const PrecisionRules amp = precision_rules(Precision::amp_bf16, OptimizerKind::adam);
  const double P = 1e9;
  const GradientSync full = gradient_sync(P, 0, amp, 3, 16);
  CHECK(full.replica_reduce_bytes == 0);
  const GradientSync h = gradient_sync(P, 0, amp, 3, 16, 8);
  CHECK(h.reduce == Collective::reduce_scatter);
  show("HSDP: reduce-scatter bytes in the shard group (fp32 grads)", 4 * P, h.reduce_bytes);
  CHECK(h.reduce_bytes == Approx(4 * P));
  show("HSDP: all-reduce bytes of the shard across 2 groups", 4 * P / 8, h.replica_reduce_bytes);
  CHECK(h.replica_reduce_bytes == Approx(4 * P / 8));
  CHECK(h.gather_per_pass == Approx(4 * P));  // fp32 parameters gathered in the group
  // Groups: 16 data-parallel GPUs over 2 nodes of 8, shard groups of 8 (a node each).
  const HybridGroups hg = hybrid_groups(Group{16, 8}, 8, 8);
  CHECK(hg.shard.size == 8);
  CHECK(hg.shard.per_node == 8);
  CHECK(hg.replicas.size == 2);
  CHECK(hg.replicas.per_node == 1);
  CHECK(hg.shard_share == 1.0);
  CHECK(hg.replica_share == Approx(1.0 / 8));
  // Shard groups of 4: two per node, their replica groups two members per node.
  const HybridGroups h4 = hybrid_groups(Group{16, 8}, 4, 8);
  CHECK(h4.replicas.size == 4);
  CHECK(h4.replicas.per_node == 2);
  CHECK(h4.shard_share == Approx(0.5));
}

TEST_CASE("hybrid sharding: memory sharded over the shard group only", "[rules][hsdp]") {
  json doc = llama_doc();
  doc["model"]["seq_len"] = 2048;
  doc["training"] = {{"global_batch", 32}, {"micro_batch", 1}, {"precision", "amp-bf16"}, {"recompute", "full"},
                     {"framework", {{"name", "pytorch-fsdp"}, {"sharding", "hybrid"}}}};
  doc["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 3}};
  const Scenario hybrid = scenario_from(doc);
  CHECK(shard_group_size(hybrid.training.framework, hybrid.plan, 8) == 8);  // default: a node's GPUs
  doc["training"]["framework"]["sharding"] = "full";
  const Scenario full = scenario_from(doc);
  const Prediction eh = make_estimator(hybrid).estimate(hybrid.plan), ef = make_estimator(full).estimate(full.plan);
  show("HSDP optimizer states: full shard x 16 / 8", ef.memory.optimizer_states * 2, eh.memory.optimizer_states);
  CHECK(eh.memory.optimizer_states == Approx(2 * ef.memory.optimizer_states).epsilon(1e-12));
  CHECK(eh.memory.weights == Approx(2 * ef.memory.weights).epsilon(1e-12));
  CHECK(eh.memory.gradients == Approx(2 * ef.memory.gradients).epsilon(1e-12));
  // shard_size 16 is full sharding.
  doc["training"]["framework"] = {{"name", "pytorch-fsdp"}, {"sharding", "hybrid"}, {"shard_size", 16}};
  const Scenario all = scenario_from(doc);
  const Prediction ea = make_estimator(all).estimate(all.plan);
  CHECK(ea.memory.total() == Approx(ef.memory.total()).epsilon(1e-12));
  CHECK(ea.iteration_time == Approx(ef.iteration_time).epsilon(1e-12));
}

TEST_CASE("context parallelism and hybrid sharding: errors name the field", "[scenario][cp][hsdp]") {
  json doc = llama_doc();
  doc["plan"]["cp"] = 3;
  CHECK_THAT(problems_of(doc), Catch::Contains("/plan: dp*tp*pp*cp = 2*2*1*3 = 12"));
  doc = llama_doc();
  doc["model"]["seq_len"] = 4100;  // divisible by 4, not by 2 cp = 8
  CHECK_THAT(problems_of(doc), Catch::Contains("/plan/cp: ring attention's causal load balancing"));
  doc["plan"]["cp_algorithm"] = "all-to-all";
  CHECK(problems_of(doc).empty());
  doc = llama_doc();
  doc["plan"]["cp_algorithm"] = "all-to-all";
  doc["model"]["kv_heads"] = 2;  // one per tp rank: cannot split over cp 4
  CHECK_THAT(problems_of(doc), Catch::Contains("/plan/cp: all-to-all context parallelism splits the key/value heads"));
  doc = llama_doc();
  doc["plan"]["cp_algorithm"] = "allgather";
  CHECK_THAT(problems_of(doc), Catch::Contains("/plan/cp_algorithm"));
  doc = llama_doc();
  doc["model"]["attention"] = "standard";
  CHECK_THAT(problems_of(doc), Catch::Contains("/plan/cp: context parallelism (cp 4) runs on fused (flash) attention"));
  json w = parse_json_text(default_scenario_text(), "<test>");
  w["model"] = {{"family", "wresnet"}, {"depth", 50}, {"channels", 64}, {"width", 2}};
  w["plan"] = {{"dp", 4}, {"tp", 1}, {"pp", 1}, {"cp", 4}};
  CHECK_THAT(problems_of(w), Catch::Contains("/plan/cp: context parallelism splits a sequence over attention"));

  doc = llama_doc();
  doc["training"] = {{"global_batch", 32}, {"micro_batch", 1}, {"precision", "amp-bf16"},
                     {"framework", {{"name", "pytorch-fsdp"}, {"sharding", "hybrid"}, {"shard_size", 3}}}};
  doc["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 3}};
  CHECK_THAT(problems_of(doc), Catch::Contains("/training/framework/shard_size: shard_size (3) must divide"));
  doc["training"]["framework"] = {{"name", "pytorch-fsdp"}, {"sharding", "grad-op"}};
  CHECK_THAT(problems_of(doc), Catch::Contains("/plan/zero: training.framework.sharding \"grad-op\" is ZeRO-2"));
  doc["training"]["framework"] = {{"name", "pytorch-fsdp"}, {"sharding", "full"}, {"shard_size", 8}};
  CHECK_THAT(problems_of(doc), Catch::Contains("/training/framework/shard_size: only \"sharding\": \"hybrid\""));
  doc["training"]["framework"] = {{"name", "pytorch-ddp"}, {"sharding", "full"}};
  doc["plan"]["zero"] = 0;
  CHECK_THAT(problems_of(doc), Catch::Contains("/training/framework/sharding: \"sharding\" is a knob of pytorch-fsdp"));
}

TEST_CASE("context parallelism: the manual plan space varies cp where it divides the sequence", "[cp][plan_space]") {
  json doc = llama_doc();
  doc["plan"] = {{"dp", 16}, {"tp", 1}, {"pp", 1}, {"zero", 1}};
  const Scenario s = scenario_from(doc);
  PlanSpaceOptions o;
  o.vary_micro_batch = false;
  o.vary_schedule = false;
  const std::size_t without = enumerate_plans(s, o).size();
  o.vary_context_parallel = true;
  const std::vector<PlanPoint> with = enumerate_plans(s, o);
  bool ring = false, ulysses = false;
  for (const PlanPoint& pt : with) {
    CHECK(pt.plan.dp * pt.plan.tp * pt.plan.pp * pt.plan.cp == 16);
    ring = ring || (pt.plan.cp > 1 && pt.plan.cp_algorithm == CpAlgorithm::ring);
    ulysses = ulysses || (pt.plan.cp > 1 && pt.plan.cp_algorithm == CpAlgorithm::all_to_all);
    // Ulysses splits the kv heads (8) over tp x cp: at most 8 ways.
    if (pt.plan.cp_algorithm == CpAlgorithm::all_to_all && pt.plan.cp > 1) CHECK(pt.plan.tp * pt.plan.cp <= 8);
  }
  CHECK(ring);
  CHECK(ulysses);
  CHECK(with.size() > without);
}

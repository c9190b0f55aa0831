// Analytical estimator. Rank order follows Megatron-LM: tensor-parallel ranks are
// adjacent GPUs, then data-parallel, then pipeline stages. So a TP group sits inside a
// node when tp <= gpus_per_node, a DP group has gpus_per_node/tp members per node, and
// pipeline neighbours are dp*tp ranks apart.
#include "strategies/estimator.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "costmodel/collectives.hpp"
#include "costmodel/kernels.hpp"
#include "strategies/op_timing.hpp"

namespace clustersim {
namespace {

using i64 = std::int64_t;

// Megatron's gradient buckets (40M elements); the last one cannot hide behind compute.
constexpr double kBucketElements = 40e6;

}  // namespace

Seconds TimeBreakdown::total() const {
  return compute_forward + compute_backward + compute_recompute + tp_comm_exposed + ep_comm_exposed +
         pp_comm_exposed + bubble + dp_comm_exposed + optimizer;
}

Estimator::Estimator(ModelSpec model, TrainingSpec training, ClusterModel cluster)
    : model_(std::move(model)),
      training_(training),
      cluster_(std::move(cluster)),
      rules_(precision_rules(training.precision, training.optimizer)) {}

const ModelGraph& Estimator::graph(i64 micro_batch) const {
  auto it = graphs_.find(micro_batch);
  if (it == graphs_.end())
    it = graphs_.emplace(micro_batch, build_model_graph(model_, micro_batch, graph_style(training_.precision))).first;
  return it->second;
}

// Recompute applies to the repeated layers only: Megatron checkpoints transformer
// layers, never the embedding or the logits and loss.
Estimator::BlockCost Estimator::cost_block(const Block& block, const PlanSpec& plan, Recompute requested,
                                           bool is_layer) const {
  const Recompute rc = is_layer ? requested : Recompute::none;
  const KernelModel km(cluster_.gpu);
  const ShardingContext ctx{plan.tp, plan.ep, plan.sequence_parallel && plan.tp > 1, rules_.compute};
  const PlanGroups groups = plan_groups(cluster_, plan);
  const auto comm_time = [&](const CommStep& step) -> Seconds {
    switch (step.group) {
      case CommGroup::tp: return collective_time(cluster_, step.kind, step.bytes, groups.tp, 1.0);
      case CommGroup::ep: return collective_time(cluster_, step.kind, step.bytes, groups.ep, groups.ep_share);
      case CommGroup::none: return 0.0;
    }
    return 0.0;
  };

  BlockCost c;
  Bytes saved_all = 0, saved_core = 0;
  for (const Op& op : block.ops) {
    const OpTiming o = time_op(op, ctx, km);
    const Seconds comm_f = comm_time(o.forward_comm), comm_b = comm_time(o.backward_comm);
    const bool ep_comm = o.forward_comm.group == CommGroup::ep || o.backward_comm.group == CommGroup::ep;
    c.forward += o.forward;
    c.backward += o.backward;
    (ep_comm ? c.ep : c.tp_forward) += comm_f;
    (ep_comm ? c.ep : c.tp_backward) += comm_b;
    c.hardware_flops += 3.0 * o.forward_flops;
    if (recomputed(op, requested, is_layer)) {
      c.recompute += o.forward;
      (ep_comm ? c.ep : c.tp_recompute) += comm_f;
      c.hardware_flops += o.forward_flops;
    }
    saved_all += o.saved;
    if (op.core_attention) saved_core += o.saved;
    c.params += o.params;
  }
  const Bytes boundary = block.output_bytes / (ctx.sequence_parallel ? double(plan.tp) : 1.0);
  const Bytes transient = block.transient_bytes / double(plan.tp);
  switch (rc) {
    case Recompute::none:
      c.saved = saved_all;
      c.working = 2 * boundary + transient;
      break;
    case Recompute::selective:
      c.saved = saved_all - saved_core;
      c.working = saved_core + 2 * boundary + transient;
      break;
    case Recompute::full:
      c.saved = boundary;
      c.working = saved_all + 2 * boundary + transient;
      break;
  }
  return c;
}

const std::vector<Estimator::BlockCost>& Estimator::block_costs(i64 micro_batch, const PlanSpec& plan,
                                                                 Recompute rc) const {
  const Key key{micro_batch, plan.tp, plan.sequence_parallel && plan.tp > 1, plan.ep, static_cast<int>(rc)};
  auto it = costs_.find(key);
  if (it != costs_.end()) return it->second;
  const ModelGraph& g = graph(micro_batch);
  std::vector<BlockCost> costs;
  costs.reserve(g.blocks.size());
  for (std::size_t i = 0; i < g.blocks.size(); ++i) {
    const bool is_layer = std::find(g.layers.begin(), g.layers.end(), static_cast<int>(i)) != g.layers.end();
    costs.push_back(cost_block(g.blocks[i], plan, rc, is_layer));
  }
  return costs_.emplace(key, std::move(costs)).first->second;
}

Estimate Estimator::estimate(const PlanSpec& plan, i64 micro_batch, Recompute rc) const {
  const ModelGraph& g = graph(micro_batch);
  const auto& costs = block_costs(micro_batch, plan, rc);
  const KernelModel km(cluster_.gpu);
  const PlanGroups groups = plan_groups(cluster_, plan);
  const i64 p = plan.pp;
  const i64 v = plan.schedule == Schedule::interleaved ? plan.virtual_stages : 1;
  const i64 t = plan.tp;
  const bool sp = plan.sequence_parallel && t > 1;
  const i64 m = training_.global_batch / (plan.dp * micro_batch);
  if (m < 1) throw std::invalid_argument("plan leaves no micro-batch per data-parallel replica");
  const double dp = double(plan.dp);

  // Pipeline p2p: with tp > 1 Megatron sends 1/tp of the activation per rank over its
  // own link and all-gathers it over NVLink on arrival (scatter-gather optimisation).
  Seconds p2p = 0;
  if (p > 1) {
    const Bytes act = g.blocks[static_cast<std::size_t>(g.layers.front())].output_bytes;
    const Group pair{2, groups.pp_cross_node ? 1 : 2};
    Seconds one = collective_time(cluster_, Collective::send_recv, act / double(t), pair, 1.0);
    if (t > 1 && !sp) one += collective_time(cluster_, Collective::all_gather, act, groups.tp, 1.0);
    p2p = 2.0 * double(v) * one;  // activation forward, gradient backward, per model chunk
  }

  Estimate e;
  e.micro_batches = m;
  e.parameters = g.params();
  e.memory_capacity = cluster_.gpu.usable_memory();
  const i64 L = static_cast<i64>(g.layers.size());
  i64 next_layer = 0;
  double flops_per_mb = 0;  // one micro-batch through every stage, one GPU of each TP group
  std::vector<int> blocks;
  for (i64 s = 0; s < p; ++s) {
    StageEstimate st;
    st.first_layer = static_cast<int>(next_layer);
    st.layers = static_cast<int>(L / p + (s < L % p ? 1 : 0));
    next_layer += st.layers;
    blocks.clear();
    if (s == 0) blocks.insert(blocks.end(), g.pre.begin(), g.pre.end());
    for (int l = st.first_layer; l < st.first_layer + st.layers; ++l) blocks.push_back(g.layers[static_cast<std::size_t>(l)]);
    if (s == p - 1) blocks.insert(blocks.end(), g.post.begin(), g.post.end());

    Bytes saved = 0, working = 0, largest_params = 0;
    for (int b : blocks) {
      const BlockCost& c = costs[static_cast<std::size_t>(b)];
      st.forward += c.forward;
      st.backward += c.backward;
      st.recompute += c.recompute;
      st.tp_comm += c.tp_forward + c.tp_backward + c.tp_recompute;
      st.ep_comm += c.ep;
      st.params_per_gpu += c.params;
      saved += c.saved;
      working = std::max(working, c.working);
      largest_params = std::max(largest_params, c.params);
      flops_per_mb += c.hardware_flops;
      if (plan.zero == 3 && plan.dp > 1) {
        // Parameters are gathered before forward and again before backward, prefetched
        // behind the previous block's compute.
        const Seconds ag = collective_time(cluster_, Collective::all_gather, c.params * rules_.weight_bytes,
                                           groups.dp, groups.dp_share);
        st.zero3_gather += std::max(0.0, ag - c.forward) + std::max(0.0, ag - (c.backward + c.recompute));
      }
    }
    // Tied embeddings live on one GPU when the first and last stage coincide.
    if (p == 1 && g.tied_params > 0) st.params_per_gpu -= g.tied_params / double(t);
    st.p2p = p2p;

    // Memory of this stage.
    const double P = st.params_per_gpu;
    auto& mem = st.memory;
    mem.weights = P * rules_.weight_bytes / (plan.zero == 3 ? dp : 1.0);
    mem.gradients = P * rules_.grad_bytes / (plan.zero >= 2 ? dp : 1.0);
    mem.optimizer_states = P * (rules_.master_bytes + rules_.optimizer_state_bytes) / (plan.zero >= 1 ? dp : 1.0);
    double in_flight = 1;  // micro-batches whose activations are alive at once
    if (p > 1) {
      switch (plan.schedule) {
        case Schedule::gpipe: in_flight = double(m); break;
        case Schedule::one_f_one_b: in_flight = double(std::min<i64>(m, p - s)); break;
        case Schedule::interleaved:
          // Megatron's warm-up on rank s: 2(p-s-1) + (v-1)p chunk forwards, plus one.
          in_flight = double(std::min<i64>(m * v, 2 * (p - s - 1) + (v - 1) * p + 1)) / double(v);
          break;
      }
    }
    mem.activations = in_flight * saved;
    mem.temporary = working + P * rules_.autocast_copy_bytes +
                    (plan.zero == 3 ? 2 * largest_params * rules_.weight_bytes : 0.0);
    if (!rules_.persistent_grads && m == 1) {
      // Gradients are allocated in backward and freed after the step: the peak is the
      // larger of the activation peak (no gradients yet) and the optimizer step (all
      // gradients, no activations).
      MemoryBreakdown activation_peak = mem, step_peak = mem;
      activation_peak.gradients = 0;
      step_peak.activations = step_peak.temporary = 0;
      mem = activation_peak.total() >= step_peak.total() ? activation_peak : step_peak;
    }

    // Gradient reduction and optimizer step of this stage, after its last micro-batch.
    const Bytes grad_bytes = P * rules_.grad_comm_bytes;
    Seconds reduce = 0, gather = 0;
    if (plan.dp > 1) {
      if (plan.zero == 0) {
        reduce = collective_time(cluster_, Collective::all_reduce, grad_bytes, groups.dp, groups.dp_share);
      } else {
        reduce = collective_time(cluster_, Collective::reduce_scatter, grad_bytes, groups.dp, groups.dp_share);
        if (plan.zero < 3)
          gather = collective_time(cluster_, Collective::all_gather, P * rules_.weight_bytes, groups.dp, groups.dp_share);
      }
    }
    if (p > 1 && g.tied_params > 0 && (s == 0 || s == p - 1))
      reduce += collective_time(cluster_, Collective::all_reduce, g.tied_params / double(t) * rules_.grad_comm_bytes,
                                Group{2, 1}, 1.0 / double(cluster_.gpus_per_node));
    st.dp_exposed = reduce + gather;
    if (plan.overlap_grad_reduce && plan.dp > 1) {
      // Buckets reduce while the last micro-batch runs backward; parameter gathers of
      // ZeRO-1/2 overlap the next forward. The last bucket is always exposed.
      const double last_bucket = std::min(1.0, kBucketElements / std::max(1.0, P));
      st.dp_exposed = std::max(reduce * last_bucket, reduce - (st.backward + st.recompute)) +
                      std::max(gather * last_bucket, gather - st.forward);
    }
    // The step reads and writes every state once; the gradient-norm pass reads grads.
    const double step_params = P / (plan.zero >= 1 ? dp : 1.0);
    st.optimizer = km.memory(step_params * (rules_.optimizer_step_bytes() + rules_.grad_bytes), 8, MemoryKind::optimizer);
    e.stages.push_back(st);
  }

  // Pipeline makespan from per-stage micro-batch times: fill/drain costs the sum of the
  // other stages once (1/v of it when interleaved), steady state the slowest stage.
  std::size_t crit = 0;
  Seconds sum = 0;
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    sum += e.stages[s].per_micro_batch();
    if (e.stages[s].per_micro_batch() > e.stages[crit].per_micro_batch()) crit = s;
  }
  const StageEstimate& c = e.stages[crit];
  const Seconds slowest = c.per_micro_batch();
  const Seconds pipeline = double(m) * slowest + (sum - slowest) / double(v);
  Seconds tail = 0;
  std::size_t tail_stage = 0;
  for (std::size_t s = 0; s < e.stages.size(); ++s)
    if (e.stages[s].dp_exposed + e.stages[s].optimizer > tail) {
      tail = e.stages[s].dp_exposed + e.stages[s].optimizer;
      tail_stage = s;
    }

  auto& bd = e.breakdown;
  const double md = double(m);
  bd.compute_forward = md * c.forward;
  bd.compute_backward = md * c.backward;
  bd.compute_recompute = md * c.recompute;
  bd.tp_comm_exposed = md * c.tp_comm;
  bd.ep_comm_exposed = md * c.ep_comm;
  bd.pp_comm_exposed = md * c.p2p;
  bd.bubble = pipeline - md * slowest;
  bd.dp_comm_exposed = md * c.zero3_gather + e.stages[tail_stage].dp_exposed;
  bd.optimizer = e.stages[tail_stage].optimizer;
  e.iteration_time = pipeline + tail;

  // Throughput and FLOPs. Every GPU of a TP group does 1/t of the sharded work.
  const double gpus = double(cluster_.total_gpus());
  e.hardware_flops = flops_per_mb * double(t) * dp * md;
  e.model_flops = g.model_flops() * dp * md;
  e.samples_per_s = double(training_.global_batch) / e.iteration_time;
  e.tokens_per_s = e.samples_per_s * double(g.tokens_per_sample);
  e.tflops_per_gpu = e.hardware_flops / e.iteration_time / gpus / 1e12;
  e.model_tflops_per_gpu = e.model_flops / e.iteration_time / gpus / 1e12;
  e.mfu = e.model_tflops_per_gpu * 1e12 / cluster_.gpu.peak(rules_.compute);

  for (const auto& st : e.stages)
    if (st.memory.total() > e.memory.total()) e.memory = st.memory;
  e.memory_per_gpu = e.memory.total();
  e.fits = e.memory_per_gpu <= e.memory_capacity;
  e.overflow = e.fits ? 0.0 : e.memory_per_gpu - e.memory_capacity;
  return e;
}

Estimator make_estimator(const Scenario& s) {
  Diagnostics diag(s.source);
  ClusterModel cluster = resolve_cluster(s.cluster, diag);
  diag.throw_if_errors();
  const PrecisionRules rules = precision_rules(s.training.precision, s.training.optimizer);
  if (cluster.gpu.peak(rules.compute) <= 0)
    diag.error("/training/precision",
               fmt::format("{} has no {} units; choose a precision it supports", cluster.gpu.name, to_string(rules.compute)));
  diag.throw_if_errors();
  return Estimator(s.model, s.training, std::move(cluster));
}

nlohmann::json to_json(const Estimate& e) {
  using nlohmann::json;
  const auto& b = e.breakdown;
  const auto& m = e.memory;
  json stages = json::array();
  for (const auto& s : e.stages)
    stages.push_back({{"first_layer", s.first_layer}, {"layers", s.layers}, {"forward_s", s.forward},
                      {"backward_s", s.backward}, {"recompute_s", s.recompute}, {"tp_comm_s", s.tp_comm},
                      {"ep_comm_s", s.ep_comm}, {"p2p_s", s.p2p}, {"zero3_gather_s", s.zero3_gather},
                      {"per_micro_batch_s", s.per_micro_batch()}, {"dp_exposed_s", s.dp_exposed},
                      {"optimizer_s", s.optimizer}, {"params_per_gpu", s.params_per_gpu},
                      {"memory_bytes", s.memory.total()}});
  return json{
      {"iteration_time_s", e.iteration_time},
      {"tokens_per_s", e.tokens_per_s},
      {"samples_per_s", e.samples_per_s},
      {"tflops_per_gpu", e.tflops_per_gpu},
      {"model_tflops_per_gpu", e.model_tflops_per_gpu},
      {"mfu", e.mfu},
      {"memory_per_gpu_bytes", e.memory_per_gpu},
      {"memory_capacity_bytes", e.memory_capacity},
      {"fits", e.fits},
      {"overflow_bytes", e.overflow},
      {"micro_batches", e.micro_batches},
      {"parameters", e.parameters},
      {"hardware_flops_per_iteration", e.hardware_flops},
      {"model_flops_per_iteration", e.model_flops},
      {"breakdown",
       {{"compute_forward_s", b.compute_forward},
        {"compute_backward_s", b.compute_backward},
        {"compute_recompute_s", b.compute_recompute},
        {"tp_comm_exposed_s", b.tp_comm_exposed},
        {"ep_comm_exposed_s", b.ep_comm_exposed},
        {"pp_comm_exposed_s", b.pp_comm_exposed},
        {"bubble_s", b.bubble},
        {"dp_comm_exposed_s", b.dp_comm_exposed},
        {"optimizer_s", b.optimizer}}},
      {"memory",
       {{"weights_bytes", m.weights},
        {"gradients_bytes", m.gradients},
        {"optimizer_states_bytes", m.optimizer_states},
        {"activations_bytes", m.activations},
        {"temporary_bytes", m.temporary}}},
      {"stages", stages},
  };
}

}  // namespace clustersim

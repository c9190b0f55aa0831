// Analytical estimator: per-op costs from op_timing, plan-level rules from rules.hpp,
// combined in closed form (pipeline makespan, overlap of the gradient reduction).
#include "strategies/estimator.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <stdexcept>

#include "costmodel/collectives.hpp"
#include "costmodel/kernels.hpp"
#include "strategies/op_timing.hpp"
#include "strategies/rules.hpp"

namespace clustersim {
namespace {

using i64 = std::int64_t;

}  // namespace

Estimator::Estimator(ModelSpec model, TrainingSpec training, ClusterModel cluster)
    : model_(std::move(model)),
      training_(training),
      cluster_(std::move(cluster)),
      rules_(precision_rules(training)) {}

const ModelGraph& Estimator::graph(i64 micro_batch) const {
  return totals(micro_batch).graph;
}

const Estimator::GraphTotals& Estimator::totals(i64 micro_batch) const {
  auto it = graphs_.find(micro_batch);
  if (it == graphs_.end()) {
    GraphTotals t{build_model_graph(model_, micro_batch, graph_style(training_))};
    t.params = t.graph.params();
    t.model_flops = t.graph.model_flops();
    it = graphs_.emplace(micro_batch, std::move(t)).first;
  }
  return it->second;
}

Estimator::BlockCost Estimator::cost_block(const Block& block, const PlanSpec& plan, Recompute requested,
                                           bool is_layer) const {
  const Recompute rc = block_recompute(requested, is_layer);
  const KernelModel km(cluster_.gpu);
  const PlanGroups groups = plan_groups(cluster_, plan);
  const ShardingContext ctx{plan.tp, plan.ep, plan.sequence_parallel && plan.tp > 1, rules_.compute, rules_.weight_gemm,
                            expert_all_to_all_share(model_.top_k, model_.max_nodes_per_token, groups.ep.nodes())};
  ShardingContext ctx_cp = ctx;
  ctx_cp.cp = plan.cp;
  ctx_cp.cp_algorithm = plan.cp_algorithm;
  const ContextGroups cgroups = context_groups(cluster_, plan);
  // Context parallelism's exchange around an attention op, the part not hidden (ring) or
  // all of it (all-to-all), forward and backward.
  const auto context_time = [&](const OpTiming& o, bool forward) -> Seconds {
    const ContextExchange& x = o.context;
    if (!x.active()) return 0.0;
    const Bytes bytes = forward ? x.forward_bytes : x.backward_bytes;
    if (x.algorithm == CpAlgorithm::ring) {
      const Group pair{2, cgroups.cp.nodes() > 1 ? 1 : 2};
      const Seconds send = collective_time(cluster_, Collective::send_recv, bytes, pair, cgroups.cp_share);
      return ring_attention_exposed(send, (forward ? o.forward : o.backward) / double(plan.cp), x.steps,
                                    cluster_.gpu.interference);
    }
    return double(x.calls) * collective_time(cluster_, Collective::all_to_all, bytes / x.calls, cgroups.cp, cgroups.cp_share);
  };
  const auto comm_time = [&](const CommStep& step) -> Seconds {
    switch (step.group) {
      case CommGroup::tp: return tp_collective_time(cluster_, groups.tp, step);
      case CommGroup::ep: return collective_time(cluster_, step.kind, step.bytes, groups.ep, groups.ep_share);
      case CommGroup::none: return 0.0;
    }
    return 0.0;
  };

  std::vector<OpTiming> timings;
  timings.reserve(block.ops.size());
  for (const Op& op : block.ops) timings.push_back(time_op(op, ctx_cp, km));
  if (tp_comm_overlapped(training_.framework, plan))
    overlap_tp_comm(block.ops, timings, ctx_cp, km, comm_time, tp_overlap_settings(cluster_.gpu, rules_.weight_gemm),
                    cluster_.gpu.interference);

  BlockCost c;
  Bytes saved_all = 0, saved_core = 0;
  for (std::size_t i = 0; i < block.ops.size(); ++i) {
    const Op& op = block.ops[i];
    const OpTiming& o = timings[i];
    const Seconds comm_f = o.forward_comm.overlapped() ? o.forward_comm.exposed : comm_time(o.forward_comm),
                  comm_b = o.backward_comm.overlapped() ? o.backward_comm.exposed : comm_time(o.backward_comm);
    const bool ep_comm = o.forward_comm.group == CommGroup::ep || o.backward_comm.group == CommGroup::ep;
    c.forward += o.forward;
    c.backward += o.backward;
    c.weight_grad += o.weight_grad;
    (ep_comm ? c.ep : c.tp_forward) += comm_f;
    (ep_comm ? c.ep : c.tp_backward) += comm_b;
    c.hardware_flops += 3.0 * o.forward_flops;
    const int comm_kernels_f = (o.forward_comm.active() ? 1 : 0) + context_kernels(o.context),
              comm_kernels_b = (o.backward_comm.active() ? 1 : 0) + context_kernels(o.context);
    const Seconds cp_f = context_time(o, true);
    c.cp += cp_f + context_time(o, false);
    const bool recomputed = op_recomputed(op, requested, is_layer);
    c.launches += op_launches(op, comm_kernels_f, comm_kernels_b, recomputed, training_.framework, cluster_.gpu.host, plan.tp);
    if (recomputed) {
      c.recompute += o.forward;
      (ep_comm ? c.ep : c.tp_recompute) += comm_f;
      c.cp += cp_f;
      c.hardware_flops += o.forward_flops;
    }
    saved_all += o.saved;
    if (op.core_attention) saved_core += o.saved;
    c.params += o.params;
    if (o.params > 0) c.weight_params.push_back(o.params);
    if (op.expert) c.expert_params += o.params;
    if (fp8_cast_params(op, rules_.compute, rules_.weight_gemm) > 0) {
      c.fp8_params += o.params;
      if (op.expert) c.expert_fp8_params += o.params;
    }
  }
  const double cp = double(std::max<i64>(1, plan.cp));
  const Bytes boundary = block.output_bytes / (ctx.sequence_parallel ? double(plan.tp) : 1.0) / cp;
  const Bytes transient = block.transient_bytes / double(plan.tp) / cp;
  const KeptActivations kept = kept_activations(rc, saved_all, saved_core, boundary, transient);
  c.saved = kept.kept;
  c.working = kept.working;
  return c;
}

const std::vector<Estimator::BlockCost>& Estimator::block_costs(i64 micro_batch, const PlanSpec& plan,
                                                                 Recompute rc) const {
  const Key key{micro_batch, plan.tp, plan.sequence_parallel && plan.tp > 1, plan.ep, static_cast<int>(rc),
                plan.cp, static_cast<int>(plan.cp_algorithm)};
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

Prediction Estimator::estimate(const PlanSpec& plan, i64 micro_batch, Recompute rc) const {
  if (plan.searched())
    throw std::logic_error("the estimator takes manual knobs: resolve {\"search\"} and {\"file\"} plans first (resolve_plan)");
  const ModelGraph& g = graph(micro_batch);
  const auto& costs = block_costs(micro_batch, plan, rc);
  const KernelModel km(cluster_.gpu);
  const PlanGroups groups = plan_groups(cluster_, plan);
  const i64 p = plan.pp;
  const i64 v = plan.schedule == Schedule::interleaved ? plan.virtual_stages : 1;
  // DualPipe: each rank runs two model chunks, stage s and stage p-1-s, and holds both.
  const bool dual = plan.schedule == Schedule::dualpipe;
  const i64 chunks = dual ? 2 : v, copies = model_copies(plan.schedule);
  // A stage's data-parallel group: its dp replicas times the copies of its parameters.
  Group dp_group = groups.dp;
  dp_group.size *= copies;
  const i64 t = plan.tp;
  const bool sp = plan.sequence_parallel && t > 1;
  const i64 m = training_.global_batch / (plan.dp * micro_batch);
  if (m < 1) throw std::invalid_argument("plan leaves no micro-batch per data-parallel replica");
  const double dp = double(plan.dp);
  // Gradients are reduced over dp x cp GPUs; ZeRO shards over them, or over HSDP's shard group.
  // DualPipe's two copies of a stage reduce their gradients together.
  const i64 ranks = gradient_ranks(plan);
  const i64 shard = training_.framework.hybrid() ? shard_group_size(training_.framework, plan, groups.dp.per_node) : ranks;
  const HybridGroups hybrid = hybrid_groups(groups.dp, shard, cluster_.gpus_per_node);
  const Group& shard_group = shard < ranks ? hybrid.shard : dp_group;
  const double shard_share = shard < ranks ? hybrid.shard_share : groups.dp_share;
  // Whether blocks gather their weights before each pass (ZeRO-3); checked once per plan.
  const bool gathers_per_pass = gradient_sync(1, 0, rules_, plan.zero, ranks, shard).gather_per_pass > 0;

  // Pipeline sends of the activation forward and its gradient backward, per model chunk.
  Seconds p2p = 0;
  if (p > 1) {
    const PipelineSend send =
        pipeline_send(g.blocks[static_cast<std::size_t>(g.layers.front())].output_bytes / double(std::max<i64>(1, plan.cp)),
                      t, sp, training_.framework.name);
    const Group pair{2, groups.pp_cross_node ? 1 : 2};
    const Seconds transfer = collective_time(cluster_, Collective::send_recv, send.per_rank, pair, 1.0);
    const Bytes gathered = std::max(send.gather_after, send.regather_output);
    const Seconds gather = gathered > 0 ? collective_time(cluster_, Collective::all_gather, gathered, groups.tp, 1.0) : 0.0;
    p2p = pipeline_comm_per_micro_batch(send, transfer, gather, chunks);
  }

  Prediction e;
  e.method = "analytical";
  e.micro_batches = m;
  e.parameters = totals(micro_batch).params;
  e.memory_capacity = cluster_.gpu.usable_memory();
  const i64 L = static_cast<i64>(g.layers.size());
  // Virtual stage c*p + s (chunk c of stage s) holds layers [first[vs], first[vs] + per[vs]).
  const std::vector<i64> per_vstage = layers_per_virtual_stage(L, p, v, plan.layers_per_stage);
  std::vector<i64> first_of(per_vstage.size(), 0);
  for (std::size_t vs = 1; vs < per_vstage.size(); ++vs) first_of[vs] = first_of[vs - 1] + per_vstage[vs - 1];
  double flops_per_mb = 0;  // one micro-batch through every stage, one GPU of each TP group
  std::vector<int> blocks;
  std::vector<std::vector<int>> chunk_layers;  // per model chunk, its repeated layers in order
  for (i64 s = 0; s < p; ++s) {
    StagePrediction st;
    st.first_layer = static_cast<int>(first_of[static_cast<std::size_t>(s)]);
    blocks.clear();
    chunk_layers.assign(static_cast<std::size_t>(chunks), {});
    for (i64 c = 0; c < chunks; ++c) {
      const auto vs = static_cast<std::size_t>(dual ? dualpipe_stage(p, s, int(c)) : c * p + s);
      if (vs == 0) blocks.insert(blocks.end(), g.pre.begin(), g.pre.end());
      for (i64 l = first_of[vs]; l < first_of[vs] + per_vstage[vs]; ++l) {
        blocks.push_back(g.layers[static_cast<std::size_t>(l)]);
        chunk_layers[static_cast<std::size_t>(c)].push_back(g.layers[static_cast<std::size_t>(l)]);
      }
      if (vs + 1 == per_vstage.size()) blocks.insert(blocks.end(), g.post.begin(), g.post.end());
      st.layers += static_cast<int>(per_vstage[vs]);
    }

    Bytes saved = 0, working = 0, largest_params = 0, largest_fp8_params = 0, largest_gathered = -1;
    double expert_params = 0, fp8_params = 0, expert_fp8_params = 0;
    StageLaunches launches;
    for (int b : blocks) {
      const BlockCost& c = costs[static_cast<std::size_t>(b)];
      for (double w : c.weight_params) st.grad_accumulation += autograd_grad_accumulation(km, w, m, rules_);
      launches += c.launches;
      st.forward += c.forward;
      st.backward += c.backward;
      st.weight_grad += c.weight_grad;
      st.recompute += c.recompute;
      st.tp_comm += c.tp_forward + c.tp_backward + c.tp_recompute;
      st.ep_comm += c.ep;
      st.cp_comm += c.cp;
      st.params_per_gpu += c.params;
      expert_params += c.expert_params;
      fp8_params += c.fp8_params;
      expert_fp8_params += c.expert_fp8_params;
      saved += c.saved;
      working = std::max(working, c.working);
      if (const Bytes gathered = gathered_block_bytes(c.params, c.fp8_params, rules_, plan.zero); gathered > largest_gathered) {
        largest_gathered = gathered;
        largest_params = c.params;
        largest_fp8_params = c.fp8_params;
      }
      flops_per_mb += c.hardware_flops;
      if (gathers_per_pass)
        if (const GradientSync block_sync = gradient_sync(c.params, c.fp8_params, rules_, plan.zero, ranks, shard); block_sync.gather_per_pass > 0)
        st.zero3_gather += zero3_gather_exposed(
            collective_time(cluster_, Collective::all_gather, block_sync.gather_per_pass, shard_group, shard_share),
            c.forward, c.backward + c.recompute, cluster_.gpu.interference);
    }
    // Activation offload, per model chunk: the copies' exposed time per micro-batch, the
    // activations that leave the GPU and the copy buffers.
    Bytes offload_buffer = 0;
    if (training_.activation_offload_layers > 0)
      for (const auto& layers : chunk_layers) {
        std::vector<OffloadLayer> in;
        for (int b : layers) {
          const BlockCost& c = costs[static_cast<std::size_t>(b)];
          in.push_back({c.saved, c.forward + c.tp_forward + (c.ep + c.cp) / 2,
                        c.backward + c.recompute + c.tp_backward + c.tp_recompute + (c.ep + c.cp) / 2});
        }
        const ActivationOffload o = activation_offload(in, training_.activation_offload_layers,
                                                       cluster_.gpu.host_copy_bandwidth(false),
                                                       cluster_.gpu.host_copy_bandwidth(true));
        st.offload_forward += o.exposed_forward;
        st.offload_backward += o.exposed_backward;
        saved -= o.offloaded;
        offload_buffer = std::max(offload_buffer, o.buffer);
      }
    // Tied embeddings live on one GPU when the first and last stage coincide: one weight, one
    // gradient to accumulate.
    if (p == 1 && g.tied_params > 0) {
      st.params_per_gpu -= g.tied_params / double(t);
      st.grad_accumulation -= autograd_grad_accumulation(km, g.tied_params / double(t), m, rules_);
    }
    st.p2p = p2p;
    const StageHost host = stage_host(launches, st.layers, training_.framework, cluster_.gpu.host, ranks);
    st.host_forward = host.forward;
    st.host = host.total;
    st.host_optimizer = launches.optimizer;

    // Memory of this stage.
    const double P = st.params_per_gpu;
    StageMemoryInputs memory_in{P, largest_params, largest_fp8_params, saved, working,
                                micro_batches_in_flight(plan.schedule, p, v, m, s, plan.microbatch_group_size),
                                plan.zero, shard, m, ddp_buckets(training_.framework, ranks), expert_params,
                                ranks / std::max<i64>(1, plan.ep), offload_buffer};
    memory_in.fp8_params = st.fp8_params_per_gpu = fp8_params;
    memory_in.expert_fp8_params = expert_fp8_params;
    st.memory = stage_memory(memory_in, rules_);

    // Gradient reduction and optimizer step of this stage, after its last micro-batch.
    const GradientSync sync = gradient_sync(P, fp8_params, rules_, plan.zero, ranks, shard);
    Seconds reduce = 0, gather = 0;
    if (sync.active()) reduce = collective_time(cluster_, sync.reduce, sync.reduce_bytes, shard_group, shard_share);
    if (sync.replica_reduce_bytes > 0)
      reduce += collective_time(cluster_, Collective::all_reduce, sync.replica_reduce_bytes, hybrid.replicas,
                                hybrid.replica_share);
    if (sync.gather_bytes > 0)
      gather = collective_time(cluster_, Collective::all_gather, sync.gather_bytes, shard_group, shard_share);
    if (const Bytes tied = tied_embedding_sync_bytes(g.tied_params, t, p, rules_); tied > 0 && (s == 0 || s == p - 1))
      reduce += groups.ends_cross_node
                    ? collective_time(cluster_, Collective::all_reduce, tied, Group{2, 1}, 1.0 / double(cluster_.gpus_per_node))
                    : collective_time(cluster_, Collective::all_reduce, tied, Group{2, 2}, 1.0);
    st.dp_exposed = reduce + gather;
    // Buckets reduce while the last micro-batch runs backward; parameter gathers of
    // ZeRO-1/2 overlap the next forward.
    if (plan.overlap_grad_reduce && ranks > 1)
      st.dp_exposed = overlapped_sync_exposed(reduce, gather, st.backward + st.recompute, st.forward, P,
                                              gradient_bucket_elements(training_.framework, rules_),
                                              cluster_.gpu.interference);
    // DDP's gradient averaging pass runs on the compute stream before the step.
    st.optimizer = st.grad_accumulation + optimizer_step(km, updated_params(P, plan.zero, shard), rules_) +
                   fp8_weight_cast(km, plan.zero >= 3 ? fp8_params / double(shard) : fp8_params, rules_) +
                   ddp_gradient_scaling(km, training_.framework, P, ranks, rules_);
    e.stages.push_back(st);
  }

  compose_iteration(e, m, v, plan.schedule, cluster_.gpu.interference);
  const double md = double(m);

  // FLOPs: every GPU of a TP group does 1/t of the sharded work (of a CP group, 1/cp).
  // (DualPipe's ranks each hold two stages: the sum over ranks counts every layer twice.)
  e.hardware_flops = flops_per_mb / double(copies) * double(t) * double(std::max<i64>(1, plan.cp)) * dp * md;
  e.model_flops = totals(micro_batch).model_flops * dp * md;
  e.finish({training_.global_batch, g.tokens_per_sample, cluster_.total_gpus(), cluster_.gpu.peak(rules_.compute),
            cluster_.gpu.status, cluster_.gpus_per_node});
  return e;
}

Estimator make_estimator(const Scenario& s) {
  Diagnostics diag(s.source);
  ClusterModel cluster = scenario_cluster(s, diag);
  diag.throw_if_errors();
  const PrecisionRules rules = precision_rules(s.training);
  for (DType t : {rules.compute, rules.weight_gemm})
    if (cluster.gpu.peak(t) <= 0) {
      diag.error("/training/precision",
                 fmt::format("{} has no {} units; choose a precision it supports", cluster.gpu.name, to_string(t)));
      break;
    }
  diag.throw_if_errors();
  return Estimator(s.model, s.training, std::move(cluster));
}

}  // namespace clustersim

#include "sim/replay_plan.hpp"

#include <algorithm>
#include <stdexcept>

#include "costmodel/kernels.hpp"
#include "strategies/rules.hpp"

namespace clustersim::sim {
namespace {
using i64 = std::int64_t;

// A segment that only marks a block's start (no compute yet) takes the first op's work.
bool fresh_marker(const Segment& s) { return s.gather_params > 0 && s.compute == 0 && !s.comm.active(); }

void add_compute(std::vector<Segment>& prog, Work w, const std::string& name, Seconds t, Seconds host) {
  if (t <= 0 && host <= 0) return;
  if (!prog.empty() && fresh_marker(prog.back())) prog.back().work = w;
  if (prog.empty() || prog.back().comm.active() || prog.back().context.active() || prog.back().work != w ||
      prog.back().offload_marked())
    prog.push_back(Segment{w, 0, {}, 0, 0, {}, 0});
  prog.back().compute += t;
  prog.back().host += host;
  if (t > 0) prog.back().ops.push_back({name, t});
}

void add_comm(std::vector<Segment>& prog, Work w, const CommStep& c, Seconds host) {
  if (!c.active()) return;
  if (!prog.empty() && fresh_marker(prog.back())) prog.back().work = w;
  if (prog.empty() || prog.back().comm.active() || prog.back().context.active() || prog.back().work != w ||
      prog.back().offload_marked())
    prog.push_back(Segment{w, 0, {}, 0, 0, {}, 0});
  prog.back().comm = c;
  prog.back().host += host;  // the collective's kernel
}

// An attention op under context parallelism: a segment of its own, with its exchange.
void add_context(std::vector<Segment>& prog, Work w, const std::string& name, Seconds t, Seconds host,
                 const ContextExchange& x, bool forward) {
  if (!prog.empty() && fresh_marker(prog.back()) && !prog.back().offload_marked()) {
    prog.back().work = w;
  } else {
    prog.push_back(Segment{w, 0, {}, 0, 0, {}, 0});
  }
  Segment& seg = prog.back();
  seg.compute = t;
  seg.host += host;
  if (t > 0) seg.ops.push_back({name, t});
  seg.context = x;
  seg.context_bytes = forward ? x.forward_bytes : x.backward_bytes;
}

// The op's forward (or recompute) compute, with its context exchange when it has one.
void add_forward(std::vector<Segment>& prog, Work w, const Op& op, const OpTiming& t, Seconds host) {
  if (t.context.active()) add_context(prog, w, op.name, t.forward, host, t.context, true);
  else add_compute(prog, w, op.name, t.forward, host);
}

// Appends one block's forward to `fwd` and its (recompute +) backward to `bwd_block`.
// `per_kernel`: host time per kernel launched; `hooks`: the framework's hooks of a repeated
// layer per micro-batch (half charged with its forward, half with its backward).
// With `wgrad_block` (ZB-H1) the ops' weight gradients go there, as one segment that
// completes the block's gradients, instead of into its backward.
void program_block(const Block& block, bool is_layer, Recompute rc, const ShardingContext& ctx, const KernelModel& km,
                   const PrecisionRules& rules, bool mark_blocks, Seconds per_kernel, Seconds hooks, const FrameworkSpec& framework,
                   const HostDispatch& host, const std::function<void(const Block&, std::vector<OpTiming>&)>& overlap,
                   std::vector<Segment>& fwd, std::vector<Segment>& bwd_block, Bytes& saved,
                   std::vector<Segment>* wgrad_block) {
  std::vector<OpTiming> t;
  Bytes saved_all = 0, saved_core = 0;
  double params = 0, fp8_params = 0;
  for (const Op& op : block.ops) {
    t.push_back(time_op(op, ctx, km));
    params += t.back().params;
    if (fp8_cast_params(op, rules.compute, rules.weight_gemm) > 0) fp8_params += t.back().params;
  }
  if (overlap) overlap(block, t);
  // Under ZeRO-3 each block starts a segment of its own, carrying its parameters to gather.
  if (mark_blocks) {
    fwd.push_back(Segment{Work::forward, 0, {}, 0, params, {}, 0});
    bwd_block.push_back(Segment{Work::backward, 0, {}, 0, params, {}, 0});
    fwd.back().gather_fp8_params = bwd_block.back().gather_fp8_params = fp8_params;
  }
  const Seconds hook = is_layer ? hooks / 2 : 0.0;
  for (std::size_t i = 0; i < block.ops.size(); ++i) {
    const Op& op = block.ops[i];
    add_forward(fwd, Work::forward, op, t[i],
                per_kernel * (op_kernels(op).forward + context_kernels(t[i].context)) + (i == 0 ? hook : 0.0) +
                    op_host_overhead(op, framework, host, ctx.tp).forward);
    add_comm(fwd, Work::forward, t[i].forward_comm, per_kernel);
    saved_all += t[i].saved;
    if (op.core_attention) saved_core += t[i].saved;
  }
  for (std::size_t i = 0; i < block.ops.size(); ++i)
    if (op_recomputed(block.ops[i], rc, is_layer)) {
      add_forward(bwd_block, Work::recompute, block.ops[i], t[i],
                  per_kernel * (op_kernels(block.ops[i]).forward + context_kernels(t[i].context)) +
                      op_host_overhead(block.ops[i], framework, host, ctx.tp).forward);
      add_comm(bwd_block, Work::recompute, t[i].forward_comm, per_kernel);
    }
  Segment wgrad{Work::backward, 0, {}, 0, 0, {}, 0};
  for (std::size_t i = block.ops.size(); i-- > 0;) {
    const bool split = wgrad_block && t[i].weight_grad > 0;  // one of the op's backward kernels moves to W
    const Seconds host_b = per_kernel * (op_kernels(block.ops[i]).backward - (split ? 1 : 0)) + (i == 0 ? hook : 0.0) +
                           op_host_overhead(block.ops[i], framework, host, ctx.tp).backward;
    if (t[i].context.active())
      add_context(bwd_block, Work::backward, block.ops[i].name, t[i].backward, host_b + per_kernel * context_kernels(t[i].context),
                  t[i].context, false);
    else
      add_compute(bwd_block, Work::backward, block.ops[i].name, t[i].backward - (split ? t[i].weight_grad : 0.0), host_b);
    add_comm(bwd_block, Work::backward, t[i].backward_comm, per_kernel);
    if (split) {
      wgrad.compute += t[i].weight_grad;
      wgrad.host += per_kernel;
      wgrad.ops.push_back({block.ops[i].name + " wgrad", t[i].weight_grad});
    }
  }
  if (bwd_block.empty()) bwd_block.push_back(Segment{Work::backward, 0, {}, 0, 0, {}, 0});
  if (wgrad_block) {
    wgrad.grad_params = params;
    wgrad_block->push_back(std::move(wgrad));
  } else {
    bwd_block.back().grad_params += params;
  }
  const Bytes boundary = block.output_bytes / (ctx.sequence_parallel ? double(ctx.tp) : 1.0) / double(ctx.cp);
  saved += kept_activations(block_recompute(rc, is_layer), saved_all, saved_core, boundary, 0).kept;
}

}  // namespace

ReplayPlan build_replay_plan(const Scenario& s, const Estimator& est, const Prediction& e) {
  const PlanSpec& plan = s.plan;
  ReplayPlan r;
  r.dp = plan.dp;
  r.tp = plan.tp;
  r.pp = plan.pp;
  r.ep = plan.ep;
  r.cp = plan.cp;
  r.virtual_stages = plan.schedule == Schedule::interleaved ? plan.virtual_stages : 1;
  const bool dual = plan.schedule == Schedule::dualpipe;  // two chunks: one per direction
  const i64 chunks = dual ? 2 : r.virtual_stages;
  r.micro_batches = plan.micro_batches(s.training);
  r.microbatch_group = plan.microbatch_group_size;
  r.schedule = plan.schedule;
  r.zero = plan.zero;
  r.sequence_parallel = plan.sequence_parallel && plan.tp > 1;
  r.overlap_grad_reduce = plan.overlap_grad_reduce;
  r.precision = est.precision();
  r.framework = s.training.framework;
  const Seconds per_kernel = host_per_kernel(s.training.framework, est.cluster().gpu.host);
  const Seconds hooks = host_hooks_per_layer(s.training.framework, est.cluster().gpu.host, gradient_ranks(plan));
  r.collectives = s.simulation.collectives;
  r.interference = est.cluster().gpu.interference;

  const ModelGraph g = build_model_graph(s.model, s.training.micro_batch, graph_style(s.training));
  const KernelModel km(est.cluster().gpu);
  ShardingContext ctx{plan.tp, plan.ep, r.sequence_parallel, est.precision().compute, est.precision().weight_gemm,
                      expert_all_to_all_share(s.model.top_k, s.model.max_nodes_per_token,
                                              plan_groups(est.cluster(), plan).ep.nodes())};
  ctx.cp = plan.cp;
  ctx.cp_algorithm = plan.cp_algorithm;
  // Transformer Engine's userbuffers overlap: the same pairing and exposed times as the
  // estimator's; an overlapped collective is replayed as its exposed time on the tp stream.
  std::function<void(const Block&, std::vector<OpTiming>&)> overlap;
  if (tp_comm_overlapped(s.training.framework, plan)) {
    const Group tp_group = plan_groups(est.cluster(), plan).tp;
    const ClusterModel& cluster = est.cluster();
    const TpOverlapSettings settings = tp_overlap_settings(est.cluster().gpu, est.precision().weight_gemm);
    overlap = [&cluster, &ctx, &km, tp_group, settings](const Block& b, std::vector<OpTiming>& t) {
      overlap_tp_comm(b.ops, t, ctx, km, [&](const CommStep& c) { return tp_collective_time(cluster, tp_group, c); },
                      settings, cluster.gpu.interference);
    };
  }
  const i64 ranks = gradient_ranks(plan);
  const i64 shard = shard_group_size(s.training.framework, plan, plan_groups(est.cluster(), plan).dp.per_node);
  r.shard = shard < ranks ? shard : 0;
  r.tied_sync_bytes = tied_embedding_sync_bytes(g.tied_params, plan.tp, plan.pp, est.precision());
  const i64 p = plan.pp, v = r.virtual_stages, L = static_cast<i64>(g.layers.size());
  r.virtual_stages = chunks;

  // Layers of each virtual stage (virtual stage c*p + s is chunk c of stage s).
  std::vector<std::vector<int>> vstage_blocks(static_cast<std::size_t>(p * v));
  const std::vector<i64> per_vstage = layers_per_virtual_stage(L, p, v, plan.layers_per_stage);
  i64 next = 0;
  for (i64 vs = 0; vs < p * v; ++vs) {
    const i64 n = per_vstage[static_cast<std::size_t>(vs)];
    for (i64 l = next; l < next + n; ++l) vstage_blocks[static_cast<std::size_t>(vs)].push_back(static_cast<int>(l));
    next += n;
  }

  for (i64 st = 0; st < p; ++st) {
    StageProgram sp;
    for (i64 c = 0; c < chunks; ++c) {
      const i64 vs = dual ? dualpipe_stage(p, st, int(c)) : c * p + st;
      ChunkProgram chunk;
      std::vector<std::pair<int, bool>> blocks;  // (block, is_layer)
      if (vs == 0)
        for (int b : g.pre) blocks.push_back({b, false});
      for (int l : vstage_blocks[static_cast<std::size_t>(vs)]) blocks.push_back({g.layers[static_cast<std::size_t>(l)], true});
      if (vs == p * v - 1)
        for (int b : g.post) blocks.push_back({b, false});
      // Backward runs the blocks in reverse order; each block's recompute precedes its backward.
      std::vector<std::vector<Segment>> bwd_blocks, wgrad_blocks;
      const bool split_wgrad = plan.schedule == Schedule::zb_h1 || dual;
      // Activation offload: each repeated layer's forward ends in a segment of its own
      // (where its copy starts); its kept bytes and its backward block, for the rule.
      const bool offload = s.training.activation_offload_layers > 0;
      std::vector<OffloadLayer> layer_kept;
      std::vector<std::size_t> layer_end, layer_block;
      for (const auto& [b, is_layer] : blocks) {
        bwd_blocks.emplace_back();
        wgrad_blocks.emplace_back();
        const Bytes before = chunk.saved;
        program_block(g.blocks[static_cast<std::size_t>(b)], is_layer, s.training.recompute, ctx, km, r.precision,
                      gradient_sync(1, 0, r.precision, plan.zero, ranks, shard).gather_per_pass > 0, per_kernel, hooks,
                      s.training.framework, est.cluster().gpu.host, overlap, chunk.forward,
                      bwd_blocks.back(), chunk.saved, split_wgrad ? &wgrad_blocks.back() : nullptr);
        if (offload && is_layer) {
          Segment end{Work::forward, 0, {}, 0, 0, {}, 0};
          end.offload_wait = true;  // placeholder until the rule says which layers go
          chunk.forward.push_back(std::move(end));
          layer_end.push_back(chunk.forward.size() - 1);
          layer_block.push_back(bwd_blocks.size() - 1);
          layer_kept.push_back({chunk.saved - before, 0, 0});
        }
      }
      if (offload) {
        for (std::size_t i : layer_end) chunk.forward[i].offload_wait = false;
        const ActivationOffload o = activation_offload(layer_kept, s.training.activation_offload_layers,
                                                       est.cluster().gpu.host_copy_bandwidth(false),
                                                       est.cluster().gpu.host_copy_bandwidth(true));
        chunk.saved -= o.offloaded;
        for (std::size_t i = 0; i < std::size_t(o.layers); ++i) {
          chunk.forward[layer_end[i]].offload_copy = o.d2h[i];
          chunk.forward[layer_end[i + 1]].offload_wait = true;
          // Backward blocks' first segments (a block of its own when empty).
          auto& below = bwd_blocks[layer_block[i]];
          auto& above = bwd_blocks[layer_block[i + 1]];
          below.insert(below.begin(), Segment{Work::backward, 0, {}, 0, 0, {}, 0});
          below.front().offload_wait = true;
          if (above.empty() || !above.front().offload_marked()) above.insert(above.begin(), Segment{Work::backward, 0, {}, 0, 0, {}, 0});
          above.front().offload_copy = o.h2d[i];
        }
      }
      for (auto it = wgrad_blocks.rbegin(); it != wgrad_blocks.rend(); ++it)
        for (auto& seg : *it) chunk.weight_grad.push_back(std::move(seg));
      for (auto it = bwd_blocks.rbegin(); it != bwd_blocks.rend(); ++it)
        for (auto& seg : *it) {
          // Merge with the previous segment when it is plain compute of the same kind and
          // completes no gradients (those mark where a gradient bucket may be handed over).
          if (!chunk.backward.empty() && !chunk.backward.back().comm.active() && !chunk.backward.back().context.active() &&
              !seg.context.active() && !seg.offload_marked() && chunk.backward.back().work == seg.work &&
              chunk.backward.back().grad_params == 0 && seg.gather_params == 0) {
            auto& prev = chunk.backward.back();
            prev.compute += seg.compute;
            prev.host += seg.host;
            prev.comm = seg.comm;
            prev.grad_params += seg.grad_params;
            prev.ops.insert(prev.ops.end(), seg.ops.begin(), seg.ops.end());
          } else {
            chunk.backward.push_back(std::move(seg));
          }
        }
      chunk.send = pipeline_send(g.blocks[static_cast<std::size_t>(g.layers.front())].output_bytes / double(plan.cp),
                                 plan.tp, r.sequence_parallel, s.training.framework.name);
      sp.chunks.push_back(std::move(chunk));
    }
    const StagePrediction& se = e.stages[static_cast<std::size_t>(st)];
    sp.params = se.params_per_gpu;
    sp.fp8_params = se.fp8_params_per_gpu;
    sp.optimizer = se.optimizer;
    sp.optimizer_host = se.host_optimizer;
    sp.static_memory = se.memory;
    sp.static_memory.activations = 0;
    r.stages.push_back(std::move(sp));
  }
  return r;
}

std::vector<WorkItem> schedule_order(Schedule schedule, i64 p, i64 v, i64 m, i64 s, i64 group) {
  if (schedule == Schedule::dualpipe) {
    std::vector<WorkItem> order;
    for (const DualPipeStep& x : dualpipe_order(p, m, s))
      order.push_back({x.kind == DualPipeStep::Kind::forward, x.direction, x.micro_batch,
                       x.kind == DualPipeStep::Kind::weight, x.defer_weight, x.overlap_next});
    return order;
  }
  if (schedule == Schedule::zb_h1) {
    // Zero-bubble ZB-H1 (sail-sg/zero-bubble-pipeline-parallelism, its DeepSpeed schedule
    // ZeroBubbleH1Pipeline): 1F1B's p-s-1 warm-up forwards; then s pairs (F, B) whose weight
    // passes wait; then (F, B, W) and, without forwards left, (B, W); the s deferred W's
    // last. Stage s thus holds s weight passes back to fill its drain.
    std::vector<WorkItem> order;
    i64 f = 0, b = 0, w = 0;
    for (; f < std::min(p - s - 1, m); ++f) order.push_back({true, 0, f});
    for (i64 k = 0; k < s && f < m; ++k) {
      order.push_back({true, 0, f++});
      order.push_back({false, 0, b++});
    }
    while (f < m) {
      order.push_back({true, 0, f++});
      order.push_back({false, 0, b++});
      order.push_back({false, 0, w++, true});
    }
    while (b < m) {
      order.push_back({false, 0, b++});
      order.push_back({false, 0, w++, true});
    }
    while (w < m) order.push_back({false, 0, w++, true});
    return order;
  }
  std::vector<WorkItem> order;
  if (schedule == Schedule::gpipe || p == 1) {
    if (p == 1 && schedule != Schedule::gpipe) {
      for (i64 mb = 0; mb < m; ++mb) {
        order.push_back({true, 0, mb});
        order.push_back({false, 0, mb});
      }
      return order;
    }
    for (i64 mb = 0; mb < m; ++mb) order.push_back({true, 0, mb});
    for (i64 mb = 0; mb < m; ++mb) order.push_back({false, 0, mb});
    return order;
  }
  if (schedule == Schedule::one_f_one_b || v == 1) {
    const i64 warm = std::min(p - s - 1, m);
    i64 f = 0, b = 0;
    for (; f < warm; ++f) order.push_back({true, 0, f});
    while (f < m) {
      order.push_back({true, 0, f++});
      order.push_back({false, 0, b++});
    }
    while (b < m) order.push_back({false, 0, b++});
    return order;
  }
  // Interleaved (Megatron-LM forward_backward_pipelining_with_interleaving): the schedule
  // table (get_schedule_table) takes micro-batches in groups of N, each group through
  // chunk 0, then chunk 1...; the last group holds what is left.
  const i64 total = m * v, n = microbatch_group(p, group);
  std::vector<std::pair<i64, i64>> table;  // (micro-batch, chunk)
  for (i64 first = 0; first < m; first += n) {
    const i64 last = first + n >= m ? m : first + n;
    for (i64 c = 0; c < v; ++c)
      for (i64 mb = first; mb < last; ++mb) table.push_back({mb, c});
  }
  const auto item = [&](i64 k, bool fwd) {
    const auto [mb, chunk] = table[static_cast<std::size_t>(k)];
    return WorkItem{fwd, fwd ? chunk : v - 1 - chunk, mb};
  };
  const i64 warm = std::min(total, (p - s - 1) * 2 + (v - 1) * n);
  i64 f = 0, b = 0;
  for (; f < warm; ++f) order.push_back(item(f, true));
  while (f < total) {
    order.push_back(item(f++, true));
    order.push_back(item(b++, false));
  }
  while (b < total) order.push_back(item(b++, false));
  return order;
}

}  // namespace clustersim::sim

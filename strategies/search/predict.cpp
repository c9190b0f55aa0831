// A searched (or evaluated) plan as a Prediction: the stages' costs from the intra-op
// pass composed over the pipeline with the plan-level rules: rules::pipeline_makespan
// over the per-micro-batch work, the per-iteration work (gradient sync, optimizer step)
// after the last micro-batch of the slowest such stage, and rules::pipeline_send for the
// sends between stages (which the search's objective, Alpa's Eq. 2, leaves out).
#include <algorithm>

#include "costmodel/cluster.hpp"
#include "costmodel/precision.hpp"
#include "scenarios/diagnostics.hpp"
#include "strategies/rules.hpp"
#include "strategies/search/search.hpp"

namespace clustersim::search {
namespace {
using i64 = std::int64_t;

// Pipeline sends of one micro-batch through a stage of dp x tp = mesh0 x mesh1 GPUs:
// the activation of one data-parallel replica, forward and its gradient backward, with
// the framework's scatter-gather over the tp group; across nodes when the stage fills hosts.
Seconds stage_p2p(const ClusterModel& c, const PlanStage& st, Bytes activation, Framework framework) {
  const PipelineSend send = pipeline_send(activation / double(st.mesh0), st.mesh1, false, framework);
  const bool cross_node = st.submesh.devices() >= c.gpus_per_node;
  const Seconds transfer = collective_time(c, Collective::send_recv, send.per_rank, Group{2, cross_node ? 1 : 2}, 1.0);
  const Bytes gathered = std::max(send.gather_after, send.regather_output);
  const Seconds gather =
      gathered > 0 ? collective_time(c, Collective::all_gather, gathered, Group{st.mesh1, st.mesh1}, 1.0) : 0.0;
  return pipeline_comm_per_micro_batch(send, transfer, gather, 1);
}
}  // namespace

Prediction predict_plan(const Scenario& s, const SearchPlan& plan) {
  Diagnostics diag(s.source);
  const ClusterModel c = scenario_cluster(s, diag);
  diag.throw_if_errors();
  const PrecisionRules rules = precision_rules(s.training);
  const ModelGraph g = build_model_graph(s.model, plan.samples_per_micro_batch, graph_style(s.training));
  const i64 m = plan.micro_batches, pre = i64(g.pre.size()), L = i64(g.layers.size());
  const Bytes activation = g.blocks[std::size_t(g.layers.front())].output_bytes;

  Prediction e;
  e.method = "search";
  e.micro_batches = m;
  e.parameters = g.params();
  e.memory_capacity = c.gpu.usable_memory();
  double flops_per_mb = 0;  // one micro-batch through every stage, all its GPUs
  for (const PlanStage& st : plan.stages) {
    StagePrediction sp;
    const i64 first = std::clamp<i64>(st.first_block - pre, 0, L), end = std::clamp<i64>(st.last_block - pre + 1, 0, L);
    sp.first_layer = int(first);
    sp.layers = int(end - first);
    sp.forward = st.costs.forward;
    sp.backward = st.costs.backward;
    sp.recompute = st.costs.recompute;
    sp.tp_comm = st.costs.comm;
    sp.ep_comm = st.costs.ep_comm;
    sp.zero3_gather = st.costs.zero3_gather;
    if (plan.stages.size() > 1) sp.p2p = stage_p2p(c, st, activation, s.training.framework.name);
    sp.dp_exposed = st.costs.dp_sync;
    sp.optimizer = st.costs.optimizer;
    const StageHost host = stage_host(st.costs.launches, sp.layers, s.training.framework, c.gpu.host, st.mesh0);
    sp.host_forward = host.forward;
    sp.host = host.total;
    sp.host_optimizer = st.costs.launches.optimizer;
    sp.params_per_gpu = st.params;
    sp.memory = st.memory_breakdown;
    flops_per_mb += st.hardware_flops * double(st.submesh.devices());
    e.stages.push_back(sp);
  }

  if (e.stages.empty()) return e;
  compose_iteration(e, m, 1);
  const double md = double(m);
  e.hardware_flops = flops_per_mb * md;
  e.model_flops = g.model_flops() * md;
  e.finish({s.training.global_batch, g.tokens_per_sample, c.total_gpus(), c.gpu.peak(rules.compute), c.gpu.status,
            c.gpus_per_node});
  return e;
}

}  // namespace clustersim::search

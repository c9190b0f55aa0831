#include "strategies/search/manual.hpp"

#include <fmt/format.h>
#include <stdexcept>

#include "strategies/estimator.hpp"
#include "strategies/plan_space.hpp"
#include "strategies/rules.hpp"

namespace clustersim::search {
namespace {

using i64 = std::int64_t;

// The submesh of a stage of dp x tp GPUs: part of one host, or whole hosts.
Submesh stage_submesh(i64 per_stage, i64 gpus_per_node) {
  return per_stage < gpus_per_node ? Submesh{1, per_stage} : Submesh{per_stage / gpus_per_node, gpus_per_node};
}

// One of the submesh shapes the Alpa-style search uses (inter_op.hpp submesh_shapes:
// powers of two inside a host, then whole hosts), with a tp group inside a host.
bool alpa_submesh(const Submesh& sub, i64 per_stage, i64 tp, i64 gpus_per_node) {
  const bool power_of_two = (per_stage & (per_stage - 1)) == 0;
  return sub.devices() == per_stage && (per_stage >= gpus_per_node || power_of_two) && sub.gpus % tp == 0;
}

std::string schedule_name(Schedule s) { return s == Schedule::gpipe ? "gpipe" : "1f1b"; }

}  // namespace

SearchPlan cost_manual(SearchContext& ctx, const ManualKnobs& k) {
  if (k.schedule == Schedule::interleaved) throw std::invalid_argument("cost_manual: interleaved schedules are not costed");
  const Scenario& s = ctx.scenario();
  SearchPlan plan;
  plan.method = "manual";
  plan.micro_batches = k.micro_batches;
  plan.samples_per_micro_batch = s.training.global_batch / k.micro_batches;
  plan.dp = k.dp;
  plan.tp = k.tp;
  plan.pp = k.pp;
  plan.schedule = schedule_name(k.schedule);
  plan.zero = k.zero;
  plan.recompute = k.recompute;
  const ModelGraph& g = ctx.graph(plan.samples_per_micro_batch);
  const std::vector<int> ord = SearchContext::order(g);
  const i64 L = i64(g.layers.size());
  if (k.pp > L) throw std::invalid_argument(fmt::format("cost_manual: {} stages for {} layers", k.pp, L));
  const Submesh sub = stage_submesh(k.dp * k.tp, ctx.cluster().gpus_per_node);
  std::vector<Seconds> latencies;
  int next = 0;
  plan.feasible = true;
  for (i64 j = 0; j < k.pp; ++j) {
    const int a = next;
    const int z = a + int(layers_of_stage(L, k.pp, 1, j, k.split)) - 1 + (j == 0 ? int(g.pre.size()) : 0) +
                  (j == k.pp - 1 ? int(g.post.size()) : 0);
    next = z + 1;
    const std::vector<int> blocks(ord.begin() + a, ord.begin() + z + 1);
    // Megatron's space has one strategy per op: its memory-free optimum is the plan's
    // choice at any number of micro-batches in flight, whose memory make_stage gives.
    const IntraOpResult& r = ctx.stage(g, blocks, k.micro_batches, sub, k.dp, k.tp, 0, StrategySpace::megatron, k.zero, k.recompute);
    if (!r.feasible) {
      plan.feasible = false;
      plan.stages.clear();
      return plan;
    }
    const double inflight = micro_batches_in_flight(k.schedule, k.pp, 1, k.micro_batches, j);
    plan.stages.push_back(ctx.make_stage(r, a, z, sub, k.dp, k.tp, inflight));
    plan.feasible = plan.feasible && ctx.fits(plan.stages.back().memory);
    latencies.push_back(r.latency);
  }
  plan.iteration_time = pipeline_makespan(latencies, k.micro_batches, 1);
  return plan;
}

SearchPlan manual_search(SearchContext& ctx, const std::function<void(std::size_t, std::size_t)>& progress) {
  const auto t0 = Clock::now();
  const Scenario& s = ctx.scenario();
  const i64 gpn = ctx.cluster().gpus_per_node;
  Scenario base = s;
  base.plan = PlanSpec{};  // the knobs are enumerated; no sequence parallelism, no overlap
  base.plan.overlap_grad_reduce = false;
  PlanSpaceOptions options;
  // Ties go to 1F1B: every GPipe stage keeps at least as many micro-batches in flight,
  // so GPipe is never faster (Eq. 2 is the same) and fits only where 1F1B fits.
  options.schedules = {Schedule::one_f_one_b, Schedule::gpipe};
  options.micro_batch_counts = ctx.micro_batch_counts();
  options.small_micro_batches = ctx.options().micro_batch_counts.empty();
  options.vary_zero = true;
  options.vary_recompute = true;
  SearchPlan best;
  best.method = "manual";
  const i64 layers = i64(ctx.graph(1).layers.size());
  const Estimator est = make_estimator(base);
  // Pipelines whose layers do not split evenly, with lighter first and last stages
  // (layers + 2 layer-equivalents split evenly: the embedding and the head count as one).
  std::vector<PlanPoint> points = enumerate_plans(base, options);
  Scenario ends = base;
  ends.plan.layers_per_stage.kind = StageSplit::lighten_ends;
  for (PlanPoint& pt : enumerate_plans(ends, options))
    if (layers % pt.plan.pp != 0) points.push_back(std::move(pt));
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (progress) progress(i, points.size());
    const PlanPoint& pt = points[i];
    const PlanSpec& p = pt.plan;
    if (p.pp > layers || !alpa_submesh(stage_submesh(p.dp * p.tp, gpn), p.dp * p.tp, p.tp, gpn)) continue;
    const i64 B = s.training.global_batch / (p.dp * pt.micro_batch);
    // With B >= pp GPipe keeps B on every stage against 1F1B's min(B, pp - j): skipped
    // to save the solves (it cannot win); with B < pp it is costed, to show it.
    if (p.schedule == Schedule::gpipe && B >= p.pp) continue;
    // The memory rule is shared (rules::stage_memory): what the estimator finds too
    // large, this costing finds too large to the byte (tests/core/test_consistency.cpp).
    if (!est.estimate(p, pt.micro_batch, pt.recompute).fits) continue;
    const SearchPlan plan = cost_manual(ctx, {p.dp, p.tp, p.pp, B, p.schedule, p.zero, pt.recompute, p.layers_per_stage});
    if (plan.feasible && (!best.feasible || plan.iteration_time < best.iteration_time)) best = plan;
  }
  if (progress) progress(points.size(), points.size());
  ctx.timings.manual_s += seconds_since(t0);
  return best;
}

}  // namespace clustersim::search

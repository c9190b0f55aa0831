// The search's entry points: run_search (the Alpa-style search and the manual
// baseline), evaluate_plan (a plan file re-costed) and cost_manual_plan (a scenario's
// own manual plan in the search's Megatron space).
#include "strategies/search/search.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include "scenarios/diagnostics.hpp"
#include "strategies/rules.hpp"
#include "strategies/search/alpa_search.hpp"
#include "strategies/search/manual.hpp"
#include "strategies/search/search_context.hpp"

namespace clustersim::search {
namespace {

using i64 = std::int64_t;

// The process's peak resident set (Linux reports ru_maxrss in KiB): what the search
// cost in memory, whatever ran before it in the same process included.
double peak_resident_bytes() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return double(u.ru_maxrss) * 1024.0;
}

Schedule schedule_of(const std::string& name) { return name == "gpipe" ? Schedule::gpipe : Schedule::one_f_one_b; }

SearchPlan evaluate(SearchContext& ctx, const SearchPlan& plan, const std::string& file) {
  const Scenario& s = ctx.scenario();
  const ClusterModel& cluster = ctx.cluster();
  if (plan.samples_per_micro_batch < 1 || s.training.global_batch % plan.samples_per_micro_batch != 0)
    throw InputError(file, "/samples_per_micro_batch",
                     fmt::format("expected a divisor of the scenario's global batch ({}), got {}", s.training.global_batch,
                                 plan.samples_per_micro_batch));
  const i64 B = s.training.global_batch / plan.samples_per_micro_batch;
  // The file's count was once ignored (2^62 passed): it must be the one the scenario gives.
  if (plan.micro_batches != 0 && plan.micro_batches != B)
    throw InputError(file, "/micro_batches",
                     fmt::format("expected {} (the scenario's global batch {} / {} samples per micro-batch), got {}", B,
                                 s.training.global_batch, plan.samples_per_micro_batch, plan.micro_batches));
  const bool manual = plan.method == "manual";
  if (manual && plan.schedule != "1f1b" && plan.schedule != "gpipe")
    throw InputError(file, "/manual/schedule", fmt::format("expected one of 1f1b | gpipe, got \"{}\"", plan.schedule));
  if (manual && (plan.zero < 0 || plan.zero > 3))
    throw InputError(file, "/manual/zero", fmt::format("expected an integer in [0, 3], got {}", plan.zero));
  if (manual && plan.zero > 0 && plan.dp <= 1)
    throw InputError(file, "/manual/zero",
                     fmt::format("ZeRO {} shards the weight update over data parallelism; it needs dp > 1, got dp {}",
                                 plan.zero, plan.dp));
  const ModelGraph& g = ctx.graph(plan.samples_per_micro_batch);
  const std::vector<int> ord = SearchContext::order(g);
  SearchPlan out = plan;
  out.micro_batches = B;
  if (!manual) {
    out.schedule = "1f1b";  // the Alpa-style DP's schedule; ZeRO is per op there
    out.zero = 0;
    out.recompute.reset();
  }
  out.stages.clear();
  std::vector<Seconds> latencies;
  i64 devices = 0;
  int expect = 0;
  const i64 n = i64(plan.stages.size());
  for (i64 j = 0; j < n; ++j) {
    const PlanStage& st = plan.stages[std::size_t(j)];
    const std::string path = fmt::format("/stages/{}", j);
    if (st.first_block != expect || st.last_block < st.first_block || st.last_block >= int(ord.size()))
      throw InputError(file, path + "/blocks",
                       fmt::format("expected a block range starting at {} and ending before {}, got [{}, {}]", expect,
                                   ord.size(), st.first_block, st.last_block));
    expect = st.last_block + 1;
    devices += st.submesh.devices();
    if (st.submesh.hosts < 1 || st.submesh.gpus < 1 || st.submesh.gpus > cluster.gpus_per_node || st.submesh.hosts > cluster.nodes)
      throw InputError(file, path + "/submesh",
                       fmt::format("{} does not fit the cluster's {} x {}", st.submesh.name(), cluster.nodes, cluster.gpus_per_node));
    if (!tiles(st.submesh.hosts, st.submesh.gpus, st.mesh0, st.mesh1))
      throw InputError(file, path + "/logical_mesh",
                       fmt::format("logical mesh {}x{} does not tile the {}x{} submesh with axis 1 inside a host", st.mesh0,
                                   st.mesh1, st.submesh.hosts, st.submesh.gpus));
    const LogicalMesh mesh = make_logical_mesh(cluster, st.submesh.hosts, st.submesh.gpus, st.mesh0, st.mesh1);
    const std::vector<int> blocks(ord.begin() + st.first_block, ord.begin() + st.last_block + 1);
    const StrategySpace space = manual ? StrategySpace::megatron : StrategySpace::full;
    const double inflight = micro_batches_in_flight(schedule_of(out.schedule), n, 1, B, j);
    const IntraOpResult r =
        evaluate_intra_op(ctx.problem(g, blocks, mesh, B, inflight, space, out.zero, manual ? plan.recompute : std::nullopt),
                          st.decisions, file, path + "/ops");
    out.stages.push_back(ctx.make_stage(r, st.first_block, st.last_block, st.submesh, st.mesh0, st.mesh1, inflight));
    latencies.push_back(r.latency);
  }
  if (expect != int(ord.size()))
    throw InputError(file, "/stages", fmt::format("the stages cover blocks [0, {}) of the model's {}", expect, ord.size()));
  if (devices > cluster.total_gpus())
    throw InputError(file, "/stages", fmt::format("the stages use {} GPUs; the cluster has {}", devices, cluster.total_gpus()));
  out.iteration_time = pipeline_makespan(latencies, B, 1);
  out.feasible = true;
  for (const auto& st : out.stages) out.feasible = out.feasible && ctx.fits(st.memory);
  return out;
}

}  // namespace

void SearchOptions::validate() const {
  if (layer_clusters < 1)
    throw InputError("command line", "--clusters", fmt::format("expected an integer >= 1, got {}", layer_clusters));
  for (i64 b : micro_batch_counts)
    if (b < 1) throw InputError("command line", "--micro-batches", fmt::format("expected integers >= 1, got {}", b));
  ilp.validate();
}

SearchReport run_search(const Scenario& s, const SearchOptions& options) {
  options.validate();
  for (i64 B : options.micro_batch_counts)
    if (s.training.global_batch % B != 0)
      throw InputError("command line", "--micro-batches",
                       fmt::format("{} does not divide the global batch ({}) of {}", B, s.training.global_batch, s.source));
  const auto t0 = Clock::now();
  SearchContext ctx(s, options);
  SearchReport rep;
  rep.block_names = ctx.block_names();
  rep.alpa = alpa_search(ctx);
  if (options.manual_baseline)
    rep.manual = manual_search(ctx, [&](std::size_t done, std::size_t total) {
      if (options.progress) options.progress({"manual", done, total});
    });
  for (SearchPlan* p : {&rep.alpa, &rep.manual})
    if (p->feasible) p->prediction = predict_plan(s, *p);
  rep.timings = ctx.timings;
  rep.timings.total_s = seconds_since(t0);
  rep.timings.peak_rss_bytes = peak_resident_bytes();
  return rep;
}

SearchPlan evaluate_plan(const Scenario& s, const SearchPlan& plan, const std::string& file) {
  SearchContext ctx(s, SearchOptions{});
  SearchPlan out = evaluate(ctx, plan, file);
  out.prediction = predict_plan(s, out);
  return out;
}

SearchPlan cost_manual_plan(const Scenario& s) {
  const PlanSpec& p = s.plan;
  Diagnostics diag(s.source);
  if (p.searched()) diag.error("/plan", "expected a manual plan (dp, tp, pp), got a plan to search or a plan file");
  if (p.sequence_parallel && p.tp > 1)
    diag.error("/plan/sequence_parallel", "the search's manual space has no sequence parallelism");
  if (p.cp > 1) diag.error("/plan/cp", "the search's manual space has no context parallelism (use clustersim run or rank)");
  if (p.schedule == Schedule::interleaved || p.schedule == Schedule::zb_h1 || p.schedule == Schedule::dualpipe)
    diag.error("/plan/schedule", fmt::format("the search's manual space has no {} schedule", to_string(p.schedule)));
  if (s.model.has_experts() && p.ep != p.dp)
    diag.error("/plan/ep", fmt::format("the search splits the experts over the data-parallel GPUs: ep must equal dp ({}), got {}",
                                       p.dp, p.ep));
  const ClusterModel cluster = scenario_cluster(s, diag);
  diag.throw_if_errors();
  const i64 gpn = cluster.gpus_per_node, per = p.dp * p.tp;
  if (p.tp > gpn || gpn % p.tp != 0)
    diag.error("/plan/tp", fmt::format("the search keeps a tensor-parallel group inside a node: tp must divide {}, got {}", gpn, p.tp));
  else if (per > gpn && per % gpn != 0)
    diag.error("/plan/dp", fmt::format("a stage's dp x tp = {} GPUs must fill whole nodes of {}", per, gpn));
  diag.throw_if_errors();
  SearchContext ctx(s, SearchOptions{});
  SearchPlan plan = cost_manual(ctx, {p.dp, p.tp, p.pp, p.micro_batches(s.training), p.schedule, p.zero,
                                     s.training.recompute, p.layers_per_stage});
  if (plan.stages.empty())
    throw InputError(s.source, "/plan",
                     fmt::format("an op of the model does not split evenly over a stage's dp x tp = {} x {} GPUs", p.dp, p.tp));
  plan.prediction = predict_plan(s, plan);
  return plan;
}

}  // namespace clustersim::search

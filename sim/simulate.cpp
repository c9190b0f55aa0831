#include "sim/simulate.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <chrono>
#include <ctime>
#include <functional>
#include <simgrid/s4u.hpp>
#include <stdexcept>

#include "sim/child.hpp"
#include "sim/collective_algorithms.hpp"
#include "sim/platform.hpp"
#include "sim/replay.hpp"
#include "sim/simgrid_info.hpp"
#include "strategies/resolved_plan.hpp"

namespace sg4 = simgrid::s4u;

namespace clustersim::sim {
namespace {
using i64 = std::int64_t;

std::unique_ptr<sg4::Engine> make_engine(const NetworkModelConfig& network) {
  auto args = engine_arguments(network);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  return std::make_unique<sg4::Engine>(&argc, argv.data());
}

struct Replayed {
  ReplayResult result;
  nlohmann::json simulator, timeline;
};

// Replays the plan and gathers the simulator's statistics.
Replayed replay_plan(const ReplayPlan& plan, const ClusterModel& cluster, const SimulateOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  const std::clock_t cpu0 = std::clock();
  auto engine = make_engine(o.network);
  const bool record = !o.trace_file.empty() || o.timeline_gpus > 0;
  ReplicaSymmetry symmetry = replica_symmetry(plan.dp, plan.tp, plan.pp, plan.ep, cluster, o.platform_file.empty());
  if (!o.replica_symmetry) symmetry = {.reason = "turned off"};
  else if (record && symmetry.active()) symmetry = {.reason = "a trace or timeline shows every GPU"};
  const Platform platform =
      o.platform_file.empty() ? build_platform(cluster, symmetry) : load_platform_file(o.platform_file, cluster, true);
  Trace trace;
  Network net(platform, record ? &trace : nullptr);
  Replay replay(plan, net, record ? &trace : nullptr);
  replay.start();
  engine->run();
  Replayed out;
  out.result = replay.finish();
  const ReplayResult& r = out.result;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  // CPU time of this (single-threaded) process: the wall time on an idle core.
  const double cpu = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const double T = r.iteration_time;

  nlohmann::json gpus = nlohmann::json::array();
  i64 compute_activities = 0, collectives = 0;
  double busy_sum = 0, idle_sum = 0;
  std::vector<nlohmann::json> per_gpu(static_cast<std::size_t>(plan.dp * plan.tp * plan.pp * plan.cp));
  for (const auto& g : r.groups) {
    compute_activities += g.compute_activities;
    collectives += g.collectives;
    const double idle = std::max(0.0, T - g.compute() - g.comm() - g.host_wait);
    busy_sum += g.compute() + g.comm();
    idle_sum += idle;
    for (i64 c = 0; c < plan.cp; ++c)
      for (i64 t = 0; t < plan.tp; ++t) {
        const i64 rank = plan_rank(plan.dp, plan.tp, plan.cp, g.stage, g.replica, c, t);
        per_gpu[static_cast<std::size_t>(rank)] = {
            {"gpu", rank},          {"stage", g.stage},       {"dp_rank", g.replica},  {"tp_rank", t},
            {"compute_s", g.compute()}, {"comm_s", g.comm()}, {"idle_s", idle},
            {"tp_comm_s", g.tp_comm}, {"pp_comm_s", g.pp_comm}, {"dp_comm_s", g.dp_comm}, {"ep_comm_s", g.ep_comm},
            {"host_wait_s", g.host_wait},
            {"peak_activations_bytes", g.peak_activations}, {"end_s", g.end}};
        if (plan.cp > 1) {
          per_gpu[static_cast<std::size_t>(rank)]["cp_rank"] = c;
          per_gpu[static_cast<std::size_t>(rank)]["cp_comm_s"] = g.cp_comm;
        }
      }
  }
  for (auto& j : per_gpu) gpus.push_back(std::move(j));

  // Busiest links: mean utilisation over the iteration.
  auto loads = net.link_loads();
  std::stable_sort(loads.begin(), loads.end(), [](const LinkLoad& a, const LinkLoad& b) {
    return a.bytes / a.bandwidth > b.bytes / b.bandwidth;
  });
  nlohmann::json links = nlohmann::json::array();
  for (std::size_t i = 0; i < loads.size() && i < 10; ++i)
    links.push_back({{"link", loads[i].name},
                     {"bytes", loads[i].bytes},
                     {"bandwidth_Bps", loads[i].bandwidth},
                     {"utilisation", T > 0 ? loads[i].bytes / (loads[i].bandwidth * T) : 0.0}});

  // Events the simulator processed: with replica symmetry the representatives' (the
  // groups above count every copy).
  compute_activities /= symmetry.copies();
  collectives /= symmetry.copies();
  const i64 events = net.flows_started() + compute_activities + collectives;
  if (!o.trace_file.empty()) trace.write(o.trace_file);
  out.timeline = o.timeline_gpus > 0 ? trace.timeline(o.timeline_gpus) : nlohmann::json();
  out.simulator = {{"gpus", gpus},
                   {"busiest_links", links},
                   {"links_used", loads.size()},
                   {"bytes_moved", net.bytes_sent()},
                   {"mean_busy_fraction", T > 0 ? busy_sum / (T * double(r.groups.size())) : 0.0},
                   {"mean_idle_s", r.groups.empty() ? 0.0 : idle_sum / double(r.groups.size())},
                   {"events", {{"flows", net.flows_started()}, {"compute_activities", compute_activities},
                               {"collectives", collectives}, {"total", events}}},
                   {"wall_time_s", wall},
                   {"cpu_time_s", cpu},
                   {"events_per_s", wall > 0 ? double(events) / wall : 0.0},
                   {"events_per_cpu_s", cpu > 0 ? double(events) / cpu : 0.0},
                   {"trace_slices", trace.size()},
                   {"replica_symmetry", symmetry.active()
                        ? nlohmann::json{{"applied", true}, {"replicas", plan.dp},
                                         {"simulated_replicas", symmetry.classes}}
                        : nlohmann::json{{"applied", false}, {"reason", symmetry.reason}}},
                   {"collectives_setting", plan.collectives},
                   {"network_model", to_json(o.network)},
                   {"platform", platform.description},
                   {"simgrid_version", simgrid_version()}};
  return out;
}

// The simulated Prediction: times from the replay, the rest (FLOPs, static memory) from
// the same rules as the estimate `e`. The breakdown is the group that finishes last (it
// defines the iteration time); what its busy time does not cover is waiting: pipeline
// bubble and stragglers.
Prediction simulated_prediction(const Prediction& e, const ReplayPlan& plan,
                                const ReplayResult& r) {
  const double T = r.iteration_time;
  Prediction p;
  p.method = "simulated";
  p.iteration_time = T;
  p.memory_capacity = e.memory_capacity;
  p.micro_batches = e.micro_batches;
  p.parameters = e.parameters;
  p.hardware_flops = e.hardware_flops;
  p.model_flops = e.model_flops;
  std::size_t crit = 0;
  for (std::size_t i = 0; i < r.groups.size(); ++i)
    if (r.groups[i].end > r.groups[crit].end) crit = i;
  const GroupStats& c = r.groups[crit];
  auto& b = p.breakdown;
  b.compute_forward = c.forward;
  b.compute_backward = c.backward;
  b.compute_recompute = c.recompute;
  b.tp_comm_exposed = c.tp_comm;
  b.ep_comm_exposed = c.ep_comm;
  b.cp_comm_exposed = c.cp_comm;
  b.pp_comm_exposed = c.pp_comm;
  b.dp_comm_exposed = c.dp_comm;
  b.optimizer = c.optimizer;
  b.host_bound = c.host_wait;
  b.offload_exposed = c.offload();
  b.bubble = std::max(0.0, T - (c.compute() + c.comm() + c.host_wait + c.offload()));

  // Per stage: the busiest replica's times per micro-batch; memory from the rules with
  // the activations the replayed schedule actually kept alive.
  const double m = double(std::max<i64>(1, plan.micro_batches));
  for (i64 st = 0; st < plan.pp; ++st) {
    StagePrediction sp = e.stages[static_cast<std::size_t>(st)];
    const GroupStats* worst = nullptr;
    Bytes act = 0;
    for (const auto& g : r.groups)
      if (g.stage == st) {
        act = std::max(act, g.peak_activations);
        if (!worst || g.end > worst->end) worst = &g;
      }
    sp.forward = worst->forward / m;
    sp.backward = worst->backward / m;
    sp.recompute = worst->recompute / m;
    sp.tp_comm = worst->tp_comm / m;
    sp.ep_comm = worst->ep_comm / m;
    sp.cp_comm = worst->cp_comm / m;
    sp.p2p = worst->pp_comm / m;
    sp.zero3_gather = 0;
    sp.offload_forward = worst->offload_forward / m;
    sp.offload_backward = worst->offload_backward / m;
    sp.dp_exposed = worst->dp_comm;
    sp.optimizer = worst->optimizer;
    sp.host = e.stages[static_cast<std::size_t>(st)].host;
    sp.memory = plan.stages[static_cast<std::size_t>(st)].static_memory;
    sp.memory.activations = act;
    p.stages.push_back(sp);
  }
  p.finish(e.workload);
  return p;
}

nlohmann::json replay_json(const Replayed& x) {
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : x.result.groups)
    groups.push_back({{"stage", g.stage}, {"replica", g.replica}, {"forward_s", g.forward}, {"backward_s", g.backward},
                      {"recompute_s", g.recompute}, {"tp_comm_s", g.tp_comm}, {"ep_comm_s", g.ep_comm}, {"cp_comm_s", g.cp_comm},
                      {"pp_comm_s", g.pp_comm}, {"dp_comm_s", g.dp_comm}, {"optimizer_s", g.optimizer},
                      {"offload_s", g.offload()}, {"end_s", g.end}, {"peak_activations_bytes", g.peak_activations}});
  return {{"iteration_time_s", x.result.iteration_time}, {"groups", groups}, {"timeline", x.timeline},
          {"simulator", x.simulator}};
}

}  // namespace

nlohmann::json simulate_plan(const ReplayPlan& plan, const ClusterModel& cluster, const SimulateOptions& o) {
  return in_child([&] { return replay_json(replay_plan(plan, cluster, o)); });
}

SimulationResult simulate(const Scenario& s, const SimulateOptions& o) {
  if (s.plan.searched()) {
    const ResolvedPlan r = resolve_plan(s);
    if (!r.manual)
      throw InputError(s.source, s.plan.file.empty() ? "/plan/search" : "/plan/file",
                       "the simulator replays manual plans (dp x tp x pp, Megatron shardings); this is an Alpa-style "
                       "plan with per-op shardings: evaluate it with `clustersim run`, or search the manual space "
                       "({\"search\": \"manual\"})");
    return simulate(*r.manual, o);
  }
  Diagnostics diag(s.source);
  // The replay schedules every micro-batch of every stage as events: 4 billion of them
  // ran without a word for days. The estimator (`run`) has no such limit.
  const std::int64_t micro_batches = s.plan.micro_batches(s.training);
  if (micro_batches > kMaxSimulatedMicroBatches)
    diag.error("/training/global_batch",
               fmt::format("the simulator replays every micro-batch, and global_batch / (dp x micro_batch) = {} / ({} x "
                           "{}) = {} is more than it takes ({}): use `clustersim run`, or a larger micro_batch",
                           s.training.global_batch, s.plan.dp, s.training.micro_batch, micro_batches,
                           kMaxSimulatedMicroBatches));
  const std::string& algo = s.simulation.collectives;
  if (algo != "auto" && !find_collective_algorithm(algo))
    diag.error("/simulation/collectives", fmt::format("unknown collective algorithm \"{}\" (see simulate --list-collectives)", algo));
  diag.throw_if_errors();
  const Estimator est = make_estimator(s);
  const Prediction e = est.estimate(s.plan);
  const ReplayPlan plan = build_replay_plan(s, est, e);
  // A platform file on the command line wins over the scenario's.
  SimulateOptions options = o;
  if (options.platform_file.empty()) options.platform_file = s.simulation.platform;
  const nlohmann::json j = in_child([&] {
    const Replayed x = replay_plan(plan, est.cluster(), options);
    const Prediction p = simulated_prediction(e, plan, x.result);
    nlohmann::json sim = x.simulator;
    // Bubble fraction: idle share of the schedule on the critical group, before the
    // gradient reduction and optimizer step.
    const auto& b = p.breakdown;
    const double schedule_time = p.iteration_time - b.dp_comm_exposed - b.optimizer;
    sim["bubble_fraction"] = schedule_time > 0 ? b.bubble / schedule_time : 0.0;
    sim["exposed_communication_s"] =
        b.tp_comm_exposed + b.ep_comm_exposed + b.cp_comm_exposed + b.pp_comm_exposed + b.dp_comm_exposed;
    sim["estimator_iteration_time_s"] = e.iteration_time;
    return nlohmann::json{{"prediction", to_json(p)}, {"simulator", sim}, {"timeline", x.timeline}};
  }, o.progress ? std::function<void(double)>([&](double clock) { o.progress(clock, e.iteration_time); })
                : std::function<void(double)>(), o.progress_interval_s);
  return {prediction_from_json(j.at("prediction")), j.at("simulator"), j.at("timeline")};
}

nlohmann::json to_json(const SimulationResult& r) {
  nlohmann::json out = to_json(r.prediction);
  out["simulator"] = r.simulator;
  if (r.timeline.is_array()) out["timeline"] = r.timeline;
  return out;
}

std::vector<double> time_collectives(const ClusterModel& cluster, const std::vector<CollectiveProbe>& together,
                                     const NetworkModelConfig& network) {
  for (const auto& p : together)
    if (p.algorithm != "auto" && !find_collective_algorithm(p.algorithm))
      throw std::invalid_argument(fmt::format("unknown collective algorithm \"{}\"", p.algorithm));
  const auto j = in_child([&] {
    auto engine = make_engine(network);
    const Platform platform = build_platform(cluster);
    Network net(platform, nullptr);
    std::vector<double> times(together.size(), 0);
    for (std::size_t i = 0; i < together.size(); ++i) {
      const auto* probe = &together[i];
      double* out = &times[i];
      sg4::Actor::create(fmt::format("probe{}", i), net.host(probe->groups.front().front()), [&net, probe, out] {
        const double t0 = sg4::Engine::get_clock();
        run_collective(net, probe->algorithm, {probe->kind, probe->bytes, probe->groups, "probe"});
        *out = sg4::Engine::get_clock() - t0;
      });
    }
    engine->run();
    return nlohmann::json(times);
  });
  return j.get<std::vector<double>>();
}

std::vector<std::pair<std::string, std::string>> list_collectives() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& a : collective_algorithms()) {
    std::string kinds;
    for (auto k : a.kinds) kinds += (kinds.empty() ? "" : ", ") + std::string(to_string(k));
    out.emplace_back(std::string(a.name), fmt::format("{} [{}]", a.description, kinds));
  }
  return out;
}

}  // namespace clustersim::sim

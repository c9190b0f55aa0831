// clustersim simulate FILE [--json] [--trace FILE] [--list-collectives]: replays one
// training iteration of the scenario's plan on a SimGrid model of its cluster.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "cli/progress.hpp"
#include "cli/report.hpp"
#include "runner/provenance.hpp"
#include "runner/store.hpp"
#include "scenarios/output_file.hpp"
#include "sim/simgrid_info.hpp"
#include "sim/simulate.hpp"


namespace clustersim::cli {
using runner::store_run;
using runner::tool_json;
namespace {

struct SimulateOptions {
  std::string file;
  std::string trace;
  std::string platform;
  std::string db;  // --db FILE: also store the run there
  std::int64_t timeline = 0;  // --timeline N: record the first N GPUs' slices
  bool json = false;
  bool list = false;
  bool quiet = false;
  bool every_replica = false;  // --every-replica: no replica symmetry
};

int simulate_command(const SimulateOptions& o) {
  if (o.list) {
    for (const auto& [name, description] : sim::list_collectives()) std::cout << fmt::format("{:<16} {}\n", name, description);
    return 0;
  }
  const Scenario s = o.file.empty() ? default_scenario() : load_scenario(o.file);
  // Before the replay (minutes on large clusters), not after it.
  if (!o.trace.empty()) check_writable(o.trace);
  sim::SimulateOptions so;
  so.trace_file = o.trace;
  so.platform_file = o.platform;
  so.timeline_gpus = o.timeline;
  so.replica_symmetry = !o.every_replica;
  // Progress on a terminal only (a log gets the result, not a bar): the simulated time
  // reached, in milliseconds, of the estimator's iteration time. The replay's own total
  // is known only at its end; when it runs past the estimate, the total moves to 10%
  // beyond the time reached.
  const auto t0 = std::chrono::steady_clock::now();
  const auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const auto ms = [](double seconds) { return static_cast<std::size_t>(std::llround(std::max(0.0, seconds) * 1e3)); };
  Progress progress("simulate", "simulated ms", 0, !o.quiet && isatty(STDERR_FILENO));
  if (!o.quiet && progress.terminal())
    so.progress = [&](double simulated_s, double expected_s) {
      const std::size_t done = ms(simulated_s);
      progress.set_total(std::max({progress.total(), ms(expected_s), done + done / 10}));
      progress.update(done, since_start());
    };
  const sim::SimulationResult r = sim::simulate(s, so);
  if (so.progress) {
    progress.set_total(ms(r.prediction.iteration_time));
    progress.update(progress.total(), since_start(), true);
  }
  const Prediction& p = r.prediction;
  nlohmann::json out = sim::to_json(r);
  out["tool"] = tool_json("simgrid");
  out["tool"]["simgrid_version"] = sim::simgrid_version();
  out["tool"]["network_model"] = r.simulator["network_model"];
  // The results database keeps the SimGrid configuration as provenance.
  out["tool"]["simgrid_config"] = r.simulator["network_model"];
  // Stored after printing: a database that fails (a full disk) loses the record, not
  // the result of a long replay.
  const auto store = [&] {
    if (o.db.empty()) return;
    std::cout.flush();
    const std::int64_t id = store_run(o.db, s, out, "simulated");
    std::cerr << "stored run " << id << " in " << o.db << '\n';
  };
  if (o.json) {
    nlohmann::json printed = out;
    printed["scenario"] = to_json(s);
    std::cout << printed.dump(2) << '\n';
    store();
    return 0;
  }
  const auto& st = r.simulator;
  const auto& b = p.breakdown;
  const auto d = [](const nlohmann::json& j, const char* k) { return j[k].get<double>(); };
  std::cout << fmt::format("scenario        {}\n", s.name);
  std::cout << fmt::format("iteration time  {:.4f} s simulated (analytical estimate {:.4f} s)\n", p.iteration_time,
                           d(st, "estimator_iteration_time_s"));
  std::cout << fmt::format("likely range    {}\n", format_interval(p.interval));
  std::cout << fmt::format("throughput      {:.0f} tokens/s, {:.1f} TFLOP/s per GPU, MFU {:.1f}%\n", p.tokens_per_s,
                           p.tflops_per_gpu, 100 * p.mfu);
  std::cout << fmt::format("memory per GPU  {} of {} ({})\n", format_bytes(p.memory_per_gpu), format_bytes(p.memory_capacity),
                           p.fits ? "fits" : "does NOT fit");
  std::cout << fmt::format("critical GPU    bubble_s {:.4f}  compute_backward_s {:.4f}  compute_forward_s {:.4f}  "
                           "compute_recompute_s {:.4f}  dp_comm_exposed_s {:.4f}  ep_comm_exposed_s {:.4f}  "
                           "optimizer_s {:.4f}  pp_comm_exposed_s {:.4f}  tp_comm_exposed_s {:.4f}  \n",
                           b.bubble, b.compute_backward, b.compute_forward, b.compute_recompute, b.dp_comm_exposed,
                           b.ep_comm_exposed, b.optimizer, b.pp_comm_exposed, b.tp_comm_exposed);
  if (b.cp_comm_exposed > 0) std::cout << fmt::format("                cp_comm_exposed_s {:.4f}\n", b.cp_comm_exposed);
  std::cout << fmt::format("bubble          {:.1f}% of the schedule\n", 100 * d(st, "bubble_fraction"));
  std::cout << "busiest links\n";
  for (const auto& l : st["busiest_links"])
    std::cout << fmt::format("  {:<28} {:5.1f}%  {}\n", l["link"].get<std::string>(), 100 * d(l, "utilisation"),
                             format_bytes(d(l, "bytes")));
  std::cout << fmt::format("simulation      {} events ({} flows) in {:.2f} s wall, SimGrid {}, network model {}\n",
                           st["events"]["total"].get<long long>(), st["events"]["flows"].get<long long>(),
                           d(st, "wall_time_s"), st["simgrid_version"].get<std::string>(),
                           st["network_model"]["model"].get<std::string>());
  if (const auto& sym = st["replica_symmetry"]; sym["applied"].get<bool>())
    std::cout << fmt::format("                {} of {} data-parallel replicas replayed, the others their copies "
                             "(replica symmetry; --every-replica replays all)\n",
                             sym["simulated_replicas"].get<long long>(), sym["replicas"].get<long long>());
  if (!o.trace.empty()) std::cout << fmt::format("trace           {}\n", o.trace);
  store();
  return 0;
}

const Registration simulate_registration{
    "simulate", "replay one training iteration on a SimGrid model of the cluster", [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<SimulateOptions>();
      sub.add_option("FILE", o->file, "scenario file (JSON); the built-in default when left out");
      sub.add_flag("--json", o->json, "print machine-readable JSON (the keys of run --json plus \"simulator\")");
      sub.add_option("--trace", o->trace, "write a Chrome/Perfetto trace (JSON) to this file");
      sub.add_option("--platform", o->platform,
                     "SimGrid platform file to replay on instead of the cluster built from the scenario "
                     "(hosts gpu-0 ... gpu-N-1)");
      sub.add_flag("--list-collectives", o->list, "list the collective algorithms and exit");
      sub.add_flag("--quiet,-q", o->quiet, "no progress on the terminal");
      sub.add_flag("--every-replica", o->every_replica,
                   "replay every data-parallel replica, not one per class of identical replicas (same result, "
                   "slower; sim/README.md)");
      sub.add_option("--db", o->db, "also store the run in this results database");
      sub.add_option("--timeline", o->timeline,
                     "record the compute and communication slices of the first N GPUs in the result "
                     "(for db plot timeline)")
          ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 20));
      return [o] { return simulate_command(*o); };
    }};

}  // namespace
}  // namespace clustersim::cli

// Speed of the simulator: one iteration of Megatron-LM's 145.6 B row (SC'21 Table 1:
// 1536 A100s, TP 8, PP 8, DP 24, global batch 2304), wall time, CPU time, peak memory
// and simulated events per second; with --table the scenario on 64 to 16,384 GPUs
// (data parallelism scaled, the same micro-batches per replica throughout). The
// simulation is single-threaded; CPU time is printed beside wall time because the build
// machine is shared.
//   bench-simulate [SCENARIO] [--table] [--gpus N] [--every-replica] [--rail]
// --every-replica replays every data-parallel replica (no replica symmetry), --rail puts
// the cluster on a rail-optimized network.
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "sim/simulate.hpp"

using namespace clustersim;

namespace {
std::string machine() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return fmt::format("{}, {} cores online", model, sysconf(_SC_NPROCESSORS_ONLN));
}
}  // namespace

int main(int argc, char** argv) {
  std::string file = std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/megatron-table1/gpt-145_6b.json";
  bool table = false, rail = false;
  std::int64_t only = 0;
  sim::SimulateOptions options;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--table")) table = true;
    else if (!std::strcmp(argv[i], "--gpus") && i + 1 < argc) only = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--every-replica")) options.replica_symmetry = false;
    else if (!std::strcmp(argv[i], "--rail")) rail = true;
    else file = argv[i];
  }
  Scenario base = load_scenario(file);
  if (rail) base.cluster.inter_node->topology = Topology::rail_optimized;
  fmt::print("{}: {}{}; machine: {}\n", base.name, rail ? "rail-optimized network, " : "",
             options.replica_symmetry ? "replica symmetry where it applies" : "every replica replayed", machine());
  // Each row in a child process, so that its peak memory (wait4: the child's and its
  // simulation process's) is that row's alone; the child sends the result back.
  const auto simulate_in_child = [&](const Scenario& s, double* peak_rss_bytes) {
    int fds[2];
    if (pipe(fds) != 0) std::exit(3);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const std::string out = sim::to_json(sim::simulate(s, options)).dump();
      for (std::size_t off = 0; off < out.size();) {
        const ssize_t n = write(fds[1], out.data() + off, out.size() - off);
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
      _exit(0);
    }
    close(fds[1]);
    std::string text;
    char buf[65536];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
    close(fds[0]);
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    *peak_rss_bytes = double(usage.ru_maxrss) * 1024.0;
    return nlohmann::json::parse(text);
  };
  const auto run = [&](const Scenario& s) {
    double rss = 0;
    const auto r = simulate_in_child(s, &rss);
    const auto& st = r["simulator"];
    fmt::print("{:>6} GPUs  dp {:>3}  iteration {:8.3f} s (estimator {:8.3f} s)  wall {:7.2f} s  cpu {:7.2f} s  "
               "peak RSS {:7.1f} MiB  flows {:>9}  events {:>9}  {:>9.0f} events/cpu-s  replicas replayed {}\n",
               s.cluster.total_gpus(), s.plan.dp, r["iteration_time_s"].get<double>(),
               st["estimator_iteration_time_s"].get<double>(), st["wall_time_s"].get<double>(),
               st["cpu_time_s"].get<double>(), rss / 1048576.0, st["events"]["flows"].get<std::int64_t>(),
               st["events"]["total"].get<std::int64_t>(), st["events_per_cpu_s"].get<double>(),
               st["replica_symmetry"]["applied"].get<bool>() ? st["replica_symmetry"]["simulated_replicas"].get<std::int64_t>()
                                                             : s.plan.dp);
    std::fflush(stdout);
  };
  if (!table && only == 0) {
    run(base);
    return 0;
  }
  // Same model and per-replica work (micro-batches per replica), data parallelism
  // scaled to fill 64 ... 16,384 GPUs (at least one replica).
  const std::int64_t per_replica = base.plan.tp * base.plan.pp;
  const std::int64_t mb_per_replica = base.training.global_batch / base.plan.dp;
  for (std::int64_t gpus : {64, 128, 256, 512, 1024, 1536, 2048, 4096, 8192, 16384}) {
    if ((only && gpus != only) || gpus % per_replica != 0) continue;
    Scenario s = base;
    s.plan.dp = gpus / per_replica;
    s.cluster.nodes = gpus / s.cluster.gpus_per_node;
    s.training.global_batch = mb_per_replica * s.plan.dp;
    run(s);
  }
  return 0;
}

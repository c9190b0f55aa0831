// Speed of the simulator: one iteration of Megatron-LM's 145.6 B row (SC'21 Table 1:
// 1536 A100s, TP 8, PP 8, DP 24, global batch 2304), wall time and simulated events per
// second; with --table the same model on 64 to 4096 GPUs (data parallelism scaled,
// 96 micro-batches per replica throughout). The simulation is single-threaded; CPU
// time is printed beside wall time because the build machine is shared.
//   bench-simulate [SCENARIO] [--table] [--gpus N]
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "sim/simulate.hpp"

using namespace clustersim;

int main(int argc, char** argv) {
  std::string file = std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/megatron-table1/gpt-145_6b.json";
  bool table = false;
  std::int64_t only = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--table")) table = true;
    else if (!std::strcmp(argv[i], "--gpus") && i + 1 < argc) only = std::atoll(argv[++i]);
    else file = argv[i];
  }
  const Scenario base = load_scenario(file);
  const auto run = [](const Scenario& s) {
    const auto r = sim::to_json(sim::simulate(s));
    const auto& st = r["simulator"];
    fmt::print("{:>6} GPUs  dp {:>3}  iteration {:8.3f} s (estimator {:8.3f} s)  wall {:7.2f} s  cpu {:7.2f} s  "
               "flows {:>9}  events {:>9}  {:>9.0f} events/cpu-s\n",
               s.cluster.total_gpus(), s.plan.dp, r["iteration_time_s"].get<double>(),
               st["estimator_iteration_time_s"].get<double>(), st["wall_time_s"].get<double>(),
               st["cpu_time_s"].get<double>(), st["events"]["flows"].get<std::int64_t>(), st["events"]["total"].get<std::int64_t>(),
               st["events_per_cpu_s"].get<double>());
    std::fflush(stdout);
  };
  if (!table && only == 0) {
    run(base);
    return 0;
  }
  // Same model and per-replica work (micro-batches per replica), data parallelism
  // scaled to fill 64 ... 4096 GPUs (at least one replica of TP 8 x PP 8).
  const std::int64_t per_replica = base.plan.tp * base.plan.pp;
  const std::int64_t mb_per_replica = base.training.global_batch / base.plan.dp;
  for (std::int64_t gpus : {64, 128, 256, 512, 1024, 1536, 2048, 4096}) {
    if (only && gpus != only) continue;
    Scenario s = base;
    s.plan.dp = gpus / per_replica;
    s.cluster.nodes = gpus / s.cluster.gpus_per_node;
    s.training.global_batch = mb_per_replica * s.plan.dp;
    run(s);
  }
  return 0;
}

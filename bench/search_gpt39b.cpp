// Benchmark of the full plan search (clustering + inter-op DP + every intra-op ILP) on
// Alpa's GPT-39B case (64 V100s, 8 nodes) by default, printing the wall time of each
// phase. Alpa needs about 2,400 s for this case; the target here is 60 s on a 2-core
// machine.
//   build/bench-search-gpt39b [SCENARIO] [--clusters K] [--micro-batches B...] [--time-limit S] [--no-manual] [--cbc]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "scenarios/diagnostics.hpp"
#include "strategies/search/search.hpp"

using namespace clustersim;

int main(int argc, char** argv) {
  try {
    std::string file = std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/alpa/gpt-39b.json";
    search::SearchOptions o;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--clusters" && i + 1 < argc) o.layer_clusters = std::atoi(argv[++i]);
      else if (a == "--time-limit" && i + 1 < argc) o.ilp.time_limit_s = std::atof(argv[++i]);
      else if (a == "--no-manual") o.manual_baseline = false;
      else if (a == "--cbc") o.ilp.solver = search::IlpSolver::cbc;
      else if (a == "--micro-batches") {
        while (i + 1 < argc && argv[i + 1][0] != '-') o.micro_batch_counts.push_back(std::atoll(argv[++i]));
      } else if (a[0] != '-') file = a;
      else {
        std::fprintf(stderr, "unknown option %s\n", a.c_str());
        return 2;
      }
    }
    const Scenario s = load_scenario(file);
    const auto t0 = std::chrono::steady_clock::now();
    const search::SearchReport r = search::run_search(s, o);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& t = r.timings;
    std::printf("scenario            %s (%lld GPUs)\n", s.name.c_str(), (long long)s.cluster.total_gpus());
    std::printf("clustering          %.3f s\n", t.clustering_s);
    std::printf("intra-op ILPs       %.3f s (%d solved, %d of them by CBC; %d reused; %d unproven at the time limit)\n",
                t.intra_op_s, t.ilp_solves, t.cbc_solves, t.cache_hits, t.unproven);
    std::printf("inter-op DP         %.3f s (%d refinement rounds)\n", t.inter_op_s, t.dp_rounds);
    std::printf("manual baseline     %.3f s\n", t.manual_s);
    std::printf("total               %.3f s (wall %.3f s)\n", t.total_s, wall);
    if (r.alpa.feasible)
      std::printf("alpa plan           %.4f s/iteration, %zu stages, %lld micro-batches\n", r.alpa.iteration_time,
                  r.alpa.stages.size(), (long long)r.alpa.micro_batches);
    else
      std::printf("alpa plan           none fits\n");
    if (r.manual.feasible)
      std::printf("manual plan         %.4f s/iteration (dp %lld tp %lld pp %lld, %s, ZeRO %d); speed-up %.3fx\n",
                  r.manual.iteration_time, (long long)r.manual.dp, (long long)r.manual.tp, (long long)r.manual.pp,
                  r.manual.schedule.c_str(), r.manual.zero, r.speedup());
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

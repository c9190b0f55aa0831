// The Alpa benchmark suites (data/scenarios/alpa: GPT, MoE, Wide-ResNet on up to 8 x 8
// V100-16GB) through the full plan search with default options, one row per case: the
// Alpa-style plan, the best manual plan under the same cost model, the speed-up and the
// search time. Iteration times are predictions of the cost model, not measurements.
//   build/bench/bench-search-suite [SCENARIO...] [--clusters K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "scenarios/diagnostics.hpp"
#include "strategies/search/search.hpp"

using namespace clustersim;

namespace {

std::string describe(const search::SearchPlan& p) {
  if (!p.feasible) return "none fits";
  std::string s = std::to_string(p.stages.size()) + (p.stages.size() == 1 ? " stage" : " stages") + ", B " +
                  std::to_string(p.micro_batches) + ":";
  for (const auto& st : p.stages) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " %d-%d@%lldx%lld", st.first_block, st.last_block, (long long)st.mesh0, (long long)st.mesh1);
    s += buf;
  }
  if (p.method == "manual") {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (dp %lld tp %lld pp %lld)", (long long)p.dp, (long long)p.tp, (long long)p.pp);
    s += buf;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    search::SearchOptions o;
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--clusters" && i + 1 < argc) o.layer_clusters = std::atoi(argv[++i]);
      else if (a[0] != '-') files.push_back(a);
      else {
        std::fprintf(stderr, "unknown option %s\n", a.c_str());
        return 2;
      }
    }
    if (files.empty()) {
      for (const auto& e : std::filesystem::directory_iterator(std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/alpa"))
        if (e.path().extension() == ".json") files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
    }
    std::printf("| case | GPUs | Alpa-style plan | s/iter | best manual plan | s/iter | speed-up | search s |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    double total = 0;
    for (const auto& f : files) {
      const Scenario s = load_scenario(f);
      const auto t0 = std::chrono::steady_clock::now();
      const search::SearchReport r = search::run_search(s, o);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      total += dt;
      auto time = [](const search::SearchPlan& p) { return p.feasible ? std::to_string(p.iteration_time).substr(0, 6) : "-"; };
      char sp[32] = "-";
      if (r.alpa.feasible && r.manual.feasible) std::snprintf(sp, sizeof sp, "%.3fx", r.speedup());
      std::printf("| %s | %lld | %s | %s | %s | %s | %s | %.1f |\n", s.name.c_str(), (long long)s.cluster.total_gpus(),
                  describe(r.alpa).c_str(), time(r.alpa).c_str(), describe(r.manual).c_str(), time(r.manual).c_str(), sp, dt);
      std::fflush(stdout);
    }
    std::printf("\ntotal search time %.1f s\n", total);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

// The plan search on large clusters (issue 16): the Megatron 145.6B row (1,536 A100s)
// and Llama 3 405B on 8,192 H100s by default, one row per scenario with the search's
// wall time, CPU time (user + system; the wall time counts the load of a shared
// machine, the CPU time much less), peak resident memory (getrusage ru_maxrss of a child process per scenario,
// so one row's memory is not carried into the next), ILPs solved, cache hits, submesh
// shapes and t_max passes of the inter-op DP. Target: at most 60 s and 2 GB each.
//   build/bench/bench-search-large [SCENARIO...] [--submeshes power-of-two|all] [--clusters K]
//                                  [--micro-batches B...] [--no-manual]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/diagnostics.hpp"
#include "strategies/search/search.hpp"

using namespace clustersim;

namespace {

std::string machine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + ", " + std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
}

int row(const std::string& file, const search::SearchOptions& o) {
  const Scenario s = load_scenario(file);
  const auto t0 = std::chrono::steady_clock::now();
  const search::SearchReport r = search::run_search(s, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& t = r.timings;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  std::string plan = "none fits";
  if (r.alpa.feasible) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.4f s/iter, %zu stages, B %lld", r.alpa.iteration_time, r.alpa.stages.size(),
                  (long long)r.alpa.micro_batches);
    plan = buf;
  }
  const double cpu = double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  std::printf("| %s | %lld | %d | %d | %d | %ld | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %s |\n", s.name.c_str(),
              (long long)s.cluster.total_gpus(), t.submeshes, t.ilp_solves, t.cache_hits, t.t_max_tried, t.dp_rounds,
              t.intra_op_s, t.inter_op_s, wall, cpu, double(u.ru_maxrss) * 1024.0 / 1e9, plan.c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  search::SearchOptions o;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--clusters" && i + 1 < argc) o.layer_clusters = std::atoi(argv[++i]);
    else if (a == "--submeshes" && i + 1 < argc) o.submeshes = search::parse_submesh_space(argv[++i]);
    else if (a == "--no-manual") o.manual_baseline = false;
    else if (a == "--micro-batches") {
      while (i + 1 < argc && argv[i + 1][0] != '-') o.micro_batch_counts.push_back(std::atoll(argv[++i]));
    } else if (a[0] != '-') files.push_back(a);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (files.empty()) {
    const std::string root = std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/";
    files = {root + "megatron-table1/gpt-145_6b.json", root + "published/llama3-405b-h100-8192gpu.json"};
  }
  std::printf("machine: %s; submeshes %s, %d layer clusters%s\n\n", machine().c_str(),
              search::submesh_space_name(o.submeshes).c_str(), o.layer_clusters,
              o.manual_baseline ? ", manual baseline included" : "");
  std::printf("| scenario | GPUs | submesh shapes | ILPs solved | reused | t_max passes | refinement rounds | ILP s | DP s | "
              "search s | CPU s | peak GB | Alpa-style plan |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::fflush(stdout);
  int rc = 0;
  for (const auto& f : files) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      try {
        std::_Exit(row(f, o));
      } catch (const InputError& e) {
        std::fprintf(stderr, "%s\n", e.what());
        std::_Exit(1);
      }
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

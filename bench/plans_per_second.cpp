// Benchmark: evaluate every valid manual plan (dp, tp, pp, micro-batch, schedule,
// virtual stages) of a scenario with the analytical estimator, on one thread.
//   build/bench/bench-plans [SCENARIO] [--seconds S]
// Default scenario: the 145.6 B row of Megatron's Table 1 on 1536 GPUs.
// Each sweep uses a fresh Estimator, so graph building and per-layer costs are paid
// inside the timed region, as they are for a user's first query.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "strategies/estimator.hpp"
#include "strategies/plan_space.hpp"

using namespace clustersim;
using Clock = std::chrono::steady_clock;

static std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

int main(int argc, char** argv) {
  std::string file = std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/megatron-table1/gpt-145_6b.json";
  double seconds = 3.0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
    else file = argv[i];
  }
  try {
    const Scenario s = load_scenario(file);
    auto t0 = Clock::now();
    const auto plans = enumerate_plans(s);
    const double enum_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::printf("scenario   %s (%lld GPUs)\n", s.name.c_str(), static_cast<long long>(s.cluster.total_gpus()));
    std::printf("machine    %s, 1 thread\n", cpu_model().c_str());
    std::printf("plan space %zu valid plans, enumerated in %.3f s\n", plans.size(), enum_s);

    long long evaluated = 0;
    int sweeps = 0;
    double best = 0, first_sweep_s = 0, checksum = 0;
    const PlanPoint* best_plan = nullptr;
    t0 = Clock::now();
    double elapsed = 0;
    do {
      const Estimator est = make_estimator(s);  // fresh caches every sweep
      const auto sweep_start = Clock::now();
      for (const auto& pp : plans) {
        const Prediction e = est.estimate(pp.plan, pp.micro_batch, s.training.recompute);
        checksum += e.iteration_time;
        if (e.fits && e.tokens_per_s > best) {
          best = e.tokens_per_s;
          best_plan = &pp;
        }
      }
      evaluated += static_cast<long long>(plans.size());
      if (sweeps++ == 0) first_sweep_s = std::chrono::duration<double>(Clock::now() - sweep_start).count();
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < seconds);

    std::printf("first sweep %.3f s (%.0f plans/s, caches cold)\n", first_sweep_s, plans.size() / first_sweep_s);
    std::printf("result     %lld plans in %.3f s over %d sweeps: %.0f plans/s (target > 100000)\n", evaluated, elapsed,
                sweeps, evaluated / elapsed);
    if (best_plan) {
      const auto& p = best_plan->plan;
      std::printf("best plan  dp %lld tp %lld pp %lld %s v=%lld micro-batch %lld: %.0f tokens/s\n",
                  static_cast<long long>(p.dp), static_cast<long long>(p.tp), static_cast<long long>(p.pp),
                  std::string(to_string(p.schedule)).c_str(), static_cast<long long>(p.virtual_stages),
                  static_cast<long long>(best_plan->micro_batch), best);
    }
    std::printf("checksum   %.6e\n", checksum);
    return 0;
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

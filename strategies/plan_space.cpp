#include "strategies/plan_space.hpp"

namespace clustersim {
namespace {
// Ascending; O(sqrt n), since per-replica batches can be large.
std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> low, high;
  for (std::int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      low.push_back(i);
      if (i != n / i) high.push_back(n / i);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}
}  // namespace

std::vector<PlanPoint> enumerate_plans(const Scenario& base, const PlanSpaceOptions& options) {
  std::vector<PlanPoint> out;
  const std::int64_t gpus = base.cluster.total_gpus();
  Scenario s = base;
  for (std::int64_t tp : divisors(gpus)) {
    for (std::int64_t pp : divisors(gpus / tp)) {
      const std::int64_t dp = gpus / (tp * pp);
      if (base.training.global_batch % dp != 0) continue;
      std::vector<std::int64_t> micro = options.vary_micro_batch ? divisors(base.training.global_batch / dp)
                                                                 : std::vector<std::int64_t>{base.training.micro_batch};
      // Schedules as (schedule, virtual stages).
      std::vector<std::pair<Schedule, std::int64_t>> schedules;
      if (pp == 1 || !options.vary_schedule) {
        schedules.push_back({pp == 1 ? Schedule::one_f_one_b : base.plan.schedule, pp == 1 ? 1 : base.plan.virtual_stages});
      } else {
        schedules.push_back({Schedule::gpipe, 1});
        schedules.push_back({Schedule::one_f_one_b, 1});
        if (base.model.family != ModelFamily::wresnet && base.model.layers % pp == 0)
          for (std::int64_t v : divisors(base.model.layers / pp))
            if (v >= 2) schedules.push_back({Schedule::interleaved, v});
      }
      for (std::int64_t b : micro) {
        for (const auto& [schedule, v] : schedules) {
          s.plan = base.plan;
          s.plan.dp = dp;
          s.plan.tp = tp;
          s.plan.pp = pp;
          s.plan.schedule = schedule;
          s.plan.virtual_stages = v;
          if (s.plan.ep > 1 && dp % s.plan.ep != 0) continue;
          s.training.micro_batch = b;
          Diagnostics diag(base.source);
          check_consistency(s, diag);
          if (diag.ok()) out.push_back({s.plan, b});
        }
      }
    }
  }
  return out;
}

}  // namespace clustersim

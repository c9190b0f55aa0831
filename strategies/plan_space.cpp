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

// Micro-batch sizes per replica of `dp`, ascending.
std::vector<std::int64_t> micro_batch_sizes(const Scenario& base, const PlanSpaceOptions& options, std::int64_t dp) {
  const std::int64_t per_replica = base.training.global_batch / dp;
  if (!options.micro_batch_counts.empty()) {
    std::vector<std::int64_t> out;
    for (std::int64_t b : divisors(per_replica)) {
      bool take = options.small_micro_batches && b <= 2;
      for (std::int64_t count : options.micro_batch_counts) take = take || (count >= 1 && b * count == per_replica);
      if (take) out.push_back(b);
    }
    return out;
  }
  return options.vary_micro_batch ? divisors(per_replica) : std::vector<std::int64_t>{base.training.micro_batch};
}
}  // namespace

std::vector<PlanPoint> enumerate_plans(const Scenario& base, const PlanSpaceOptions& options) {
  std::vector<PlanPoint> out;
  const std::int64_t gpus = base.cluster.total_gpus();
  Scenario s = base;
  for (std::int64_t tp : divisors(gpus)) {
    for (std::int64_t pp : divisors(gpus / tp)) {
      // Context parallelism as (cp, algorithm): off, or every cp with ring then all-to-all.
      std::vector<std::pair<std::int64_t, CpAlgorithm>> cps{{base.plan.cp, base.plan.cp_algorithm}};
      if (options.vary_context_parallel && base.model.family != ModelFamily::wresnet) {
        cps = {{1, CpAlgorithm::ring}};
        for (std::int64_t cp : divisors(gpus / (tp * pp)))
          if (cp > 1 && base.model.seq_len % cp == 0)
            for (CpAlgorithm a : {CpAlgorithm::ring, CpAlgorithm::all_to_all}) cps.push_back({cp, a});
      }
      for (const auto& [cp, cp_algorithm] : cps) {
        if ((gpus / (tp * pp)) % cp != 0) continue;
        const std::int64_t dp = gpus / (tp * pp * cp);
        if (base.training.global_batch % dp != 0) continue;
        // Schedules as (schedule, virtual stages).
        std::vector<std::pair<Schedule, std::int64_t>> schedules;
        if (pp == 1 || !options.vary_schedule) {
          schedules.push_back({pp == 1 ? Schedule::one_f_one_b : base.plan.schedule, pp == 1 ? 1 : base.plan.virtual_stages});
        } else {
          const std::vector<Schedule> order = options.schedules.empty()
                                                  ? std::vector<Schedule>{Schedule::gpipe, Schedule::one_f_one_b, Schedule::interleaved,
                                                                          Schedule::dualpipe}
                                                  : options.schedules;
          for (Schedule sc : order) {
            // DualPipe by default only for MoE models (its pairs exist to hide the expert
            // all-to-all) or a scenario that runs it: its makespan is an event walk over
            // the schedule, and for dense models it would halve the space's plans per second.
            if (sc == Schedule::dualpipe && options.schedules.empty() && base.model.experts == 0 &&
                base.plan.schedule != Schedule::dualpipe)
              continue;
            if (sc != Schedule::interleaved) {
              schedules.push_back({sc, 1});
            } else if (base.model.family != ModelFamily::wresnet && base.model.layers % pp == 0) {
              for (std::int64_t v : divisors(base.model.layers / pp))
                if (v >= 2) schedules.push_back({Schedule::interleaved, v});
            }
          }
        }
        const int max_zero = options.vary_zero && dp > 1 ? 3 : 0;
        std::vector<bool> sps{base.plan.sequence_parallel};
        if (options.vary_sequence_parallel) sps = tp > 1 ? std::vector<bool>{false, true} : std::vector<bool>{false};
        const std::vector<Recompute> recomputes =
            options.vary_recompute ? std::vector<Recompute>{Recompute::none, Recompute::selective, Recompute::full}
                                   : std::vector<Recompute>{base.training.recompute};
        for (std::int64_t b : micro_batch_sizes(base, options, dp)) {
          for (const auto& [schedule, v] : schedules) {
            for (int zero = 0; zero <= max_zero; ++zero) {
              for (const bool sp : sps) {
                for (const Recompute rc : recomputes) {
                  s.plan = base.plan;
                  s.plan.dp = dp;
                  s.plan.tp = tp;
                  s.plan.pp = pp;
                  s.plan.schedule = schedule;
                  s.plan.virtual_stages = v;
                  s.plan.sequence_parallel = sp;
                  s.plan.cp = cp;
                  s.plan.cp_algorithm = cp_algorithm;
                  if (options.vary_zero) s.plan.zero = zero;
                  if (s.plan.ep > 1 && dp % s.plan.ep != 0) continue;
                  s.training.micro_batch = b;
                  s.training.recompute = rc;
                  Diagnostics diag(base.source);
                  check_consistency(s, diag);
                  if (diag.ok()) out.push_back({s.plan, b, rc});
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace clustersim

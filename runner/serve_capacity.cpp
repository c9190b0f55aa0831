#include "runner/serve_capacity.hpp"

#include <atomic>
#include <fmt/format.h>
#include <thread>

namespace clustersim::runner {
namespace {
using i64 = std::int64_t;
}

CapacityResult serve_capacity(const ServingScenario& base, const ClusterModel& cluster, double rate, int jobs) {
  if (base.slo.ttft <= 0 && base.slo.tpot <= 0 && base.slo.e2e <= 0)
    throw InputError(base.source, "/slo", "serve --capacity needs at least one SLO target (ttft, tpot or e2e)");
  if (base.disaggregation.enabled)
    throw InputError(base.source, "/serving/disaggregation", "serve --capacity sizes colocated replicas only");
  if (!(rate > 0 && rate < 1e7))
    throw InputError("<command line>", "--capacity", fmt::format("expected a request rate in (0, 1e7) per second, got {}", rate));
  CapacityResult out;
  const i64 gpus = cluster.total_gpus();
  std::vector<i64> budgets{base.scheduler.max_batched_tokens};
  if (base.scheduler.kind == SchedulerKind::sarathi)
    for (i64 b : {512, 1024, 2048, 4096})
      if (b != base.scheduler.max_batched_tokens && b >= base.scheduler.max_batch_size) budgets.push_back(b);
  for (i64 tp = 1; tp <= cluster.gpus_per_node; tp *= 2) {
    if (base.model.heads % tp != 0) continue;
    for (i64 pp = 1; pp <= 8 && pp <= base.model.layers; pp *= 2)
      for (i64 r = 1; r * tp * pp <= gpus; ++r)
        for (i64 b : budgets) {
          CapacityCandidate c;
          c.replicas = r;
          c.tp = tp;
          c.pp = pp;
          c.max_batched_tokens = b;
          out.candidates.push_back(c);
        }
  }
  const unsigned threads = jobs > 0 ? unsigned(jobs) : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t i; (i = next++) < out.candidates.size();) {
      CapacityCandidate& c = out.candidates[i];
      ServingScenario s = base;
      s.pool = {c.replicas, c.tp, c.pp};
      s.scheduler.max_batched_tokens = c.max_batched_tokens;
      s.workload.rate = rate;
      try {
        c.summary = sim::simulate_serving(s, cluster).summary;
        c.feasible = true;
        c.meets = c.summary.slo_attainment >= base.slo.attainment;
      } catch (const InputError&) {
        c.feasible = false;  // the model does not fit this layout, or a request never can
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  for (std::size_t i = 0; i < out.candidates.size(); ++i) {
    const auto& c = out.candidates[i];
    if (!c.meets) continue;
    if (out.best < 0) {
      out.best = int(i);
      continue;
    }
    const auto& b = out.candidates[std::size_t(out.best)];
    if (c.gpus() < b.gpus() || (c.gpus() == b.gpus() && c.summary.ttft.p99 < b.summary.ttft.p99)) out.best = int(i);
  }
  return out;
}

}  // namespace clustersim::runner

// DualPipe in the search's manual space (strategies/plan_space.cpp, what `rank` costs):
// enumerated where deepseek-ai/DualPipe's step() accepts it (even pp, an even number of
// micro-batches of at least 2 pp, ZeRO <= 2), and costed by the same estimator, so a
// ranked DualPipe plan equals `run` of a scenario holding that plan.
#include <catch2/catch.hpp>
#include <cstdio>

#include "strategies/estimator.hpp"
#include "strategies/plan_space.hpp"

using namespace clustersim;

TEST_CASE("DualPipe plans are enumerated where valid and cost what run gives them", "[plan_space][dualpipe]") {
  const Scenario base = load_scenario("data/scenarios/published/deepseek-v3-h800-2048gpu.json");
  PlanSpaceOptions options;
  options.vary_micro_batch = false;
  const auto plans = enumerate_plans(base, options);
  const Estimator est = make_estimator(base);
  int dual = 0;
  for (const PlanPoint& pt : plans) {
    if (pt.plan.schedule != Schedule::dualpipe) continue;
    const std::int64_t m = base.training.global_batch / (pt.plan.dp * pt.micro_batch);
    INFO("dp " << pt.plan.dp << " tp " << pt.plan.tp << " pp " << pt.plan.pp << " m " << m);
    CHECK(pt.plan.pp % 2 == 0);
    CHECK(m % 2 == 0);
    CHECK(m >= 2 * pt.plan.pp);
    CHECK(pt.plan.zero <= 2);
    if (++dual > 3) continue;  // `run` of the first few, each a full estimate of a 671 B model
    Scenario s = base;
    s.plan = pt.plan;
    s.training.micro_batch = pt.micro_batch;
    s.training.recompute = pt.recompute;
    const Prediction ranked = est.estimate(pt.plan, pt.micro_batch, pt.recompute);
    const Prediction run = make_estimator(s).estimate(s.plan, s.training.micro_batch, s.training.recompute);
    std::printf("dualpipe dp %lld tp %lld pp %lld: ranked %.6f s, run %.6f s\n", (long long)pt.plan.dp,
                (long long)pt.plan.tp, (long long)pt.plan.pp, ranked.iteration_time, run.iteration_time);
    CHECK(ranked.iteration_time == run.iteration_time);
    CHECK(ranked.memory_per_gpu == run.memory_per_gpu);
  }
  std::printf("%d DualPipe plans of %zu\n", dual, plans.size());
  CHECK(dual > 0);
  // The scenario's own plan (PP16 DualPipe) is among them.
  bool own = false;
  for (const PlanPoint& pt : plans)
    own = own || (pt.plan.schedule == Schedule::dualpipe && pt.plan.pp == base.plan.pp && pt.plan.dp == base.plan.dp &&
                  pt.plan.tp == base.plan.tp);
  CHECK(own);
}

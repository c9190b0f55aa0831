// The manual baseline: Megatron-style plans (dp x tp x pp, micro-batch count, schedule,
// ZeRO level) costed by the search's own mechanism in StrategySpace::megatron, with the
// plan-level rules of rules.hpp: the layer split over stages (layers_of_stage), the
// micro-batches in flight per schedule, the exact stage memory and Eq. 2
// (pipeline_makespan).
#pragma once
#include <cstdint>
#include <functional>

#include "strategies/search/search.hpp"
#include "strategies/search/search_context.hpp"

namespace clustersim::search {

struct ManualKnobs {
  std::int64_t dp = 1, tp = 1, pp = 1;
  std::int64_t micro_batches = 1;  // B per iteration
  Schedule schedule = Schedule::one_f_one_b;  // 1F1B or GPipe
  int zero = 0;
  Recompute recompute = Recompute::none;
  PipelineSplit split;  // layers per stage (rules.hpp layers_per_virtual_stage)
};

// The plan of `k` with its stages costed (feasible: every stage fits the GPU memory;
// a stage whose ops do not shard evenly on the dp x tp mesh leaves the plan without
// stages). Throws std::invalid_argument for knobs the caller should have checked.
SearchPlan cost_manual(SearchContext& ctx, const ManualKnobs& k);

// The best manual plan over strategies/plan_space.hpp's space (1F1B and GPipe, every
// ZeRO level, every recompute mode, the context's micro-batch counts plus micro-batches
// of 1 and 2 samples per replica) whose dp x tp submesh is one of the Alpa-style
// search's (so the Alpa-style plan can always take it). Points that the Megatron space
// cannot express (sequence parallelism, interleaved schedules) are left to
// `clustersim rank`, which costs them with the estimator. A point whose memory, by the
// estimator's rules::stage_memory (the same bytes as this costing's), overflows the GPU
// is dropped before it is costed. `progress` (optional) hears (done, total) points.
SearchPlan manual_search(SearchContext& ctx, const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace clustersim::search

// Ranks every plan of a scenario's model and cluster under the predictions `run` prints
// (strategies/ranking.hpp). The manual space is enumerated once by
// strategies/plan_space; each point is estimated (time and fit only) and only the rows
// shown are estimated again in full, so a space of 10^5 plans needs little memory.
#include "strategies/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "scenarios/diagnostics.hpp"
#include "strategies/estimator.hpp"
#include "strategies/plan_space.hpp"
#include "strategies/resolved_plan.hpp"

namespace clustersim {
namespace {

using i64 = std::int64_t;

std::string schedule_label(const PlanSpec& p) {
  if (p.pp == 1) return "no pipeline";
  switch (p.schedule) {
    case Schedule::gpipe: return "GPipe";
    case Schedule::one_f_one_b: return "1F1B";
    case Schedule::interleaved: return fmt::format("interleaved 1F1B v={}", p.virtual_stages);
    case Schedule::zb_h1: return "ZB-H1";
    case Schedule::dualpipe: return "DualPipe";
  }
  return "";
}

// How the layers split over the stages, when not evenly.
std::string split_label(const PlanSpec& p) {
  switch (p.layers_per_stage.kind) {
    case StageSplit::even: return "";
    case StageSplit::lighten_ends: return ", lighter end stages";
    case StageSplit::listed: {
      std::string out = ", layers";
      for (std::size_t i = 0; i < p.layers_per_stage.layers.size(); ++i)
        out += fmt::format("{}{}", i ? "-" : " ", p.layers_per_stage.layers[i]);
      return out;
    }
  }
  return "";
}

std::string manual_label(const PlanSpec& p, i64 micro_batch, Recompute rc, i64 global_batch) {
  std::string out = fmt::format("dp {} x tp {} x pp {}{}, {}{}", p.dp, p.tp, p.pp,
                                p.cp > 1 ? fmt::format(" x cp {} ({})", p.cp, to_string(p.cp_algorithm)) : std::string(),
                                schedule_label(p), split_label(p));
  if (p.ep > 1) out += fmt::format(", ep {}", p.ep);
  out += p.zero > 0 ? fmt::format(", ZeRO-{}", p.zero) : std::string();
  if (p.sequence_parallel && p.tp > 1) out += ", SP";
  out += fmt::format(", recompute {}, micro-batch {} x {}", to_string(rc), micro_batch, global_batch / (p.dp * micro_batch));
  return out;
}

// "Alpa-style: 2 stages, B 64: 0-16@1x8 17-33@1x8".
std::string alpa_label(const search::SearchPlan& p) {
  std::string out = fmt::format("Alpa-style: {} stage{}, B {}:", p.stages.size(), p.stages.size() == 1 ? "" : "s", p.micro_batches);
  for (const auto& st : p.stages) out += fmt::format(" {}-{}@{}x{}", st.first_block, st.last_block, st.mesh0, st.mesh1);
  return out;
}

bool same_knobs(const PlanSpec& a, const PlanSpec& b) {
  return a.dp == b.dp && a.tp == b.tp && a.pp == b.pp && a.ep == b.ep && a.schedule == b.schedule &&
         a.virtual_stages == b.virtual_stages && a.zero == b.zero && a.sequence_parallel == b.sequence_parallel &&
         a.overlap_grad_reduce == b.overlap_grad_reduce && a.cp == b.cp && (a.cp == 1 || a.cp_algorithm == b.cp_algorithm);
}

// One plan of the pool: what ranking needs, the rest is computed for the rows shown.
struct Entry {
  double time = 0;
  bool fits = false;
  std::size_t point = SIZE_MAX;  // index into the manual points, or SIZE_MAX
  int extra = -1;                // index into the extra rows (scenario's, Alpa-style)
};

}  // namespace

void RankOptions::validate() const {
  if (top < 1) throw InputError("command line", "--top", fmt::format("expected an integer >= 1, got {}", top));
  search.validate();
}

Ranking rank_plans(const Scenario& s, const RankOptions& options) {
  options.validate();
  for (i64 B : options.search.micro_batch_counts)
    if (s.training.global_batch % B != 0)
      throw InputError("command line", "--micro-batches",
                       fmt::format("{} does not divide the global batch ({}) of {}", B, s.training.global_batch, s.source));
  Ranking out;
  Scenario base = s;
  base.plan.search.clear();
  base.plan.file.clear();
  PlanSpaceOptions space;
  space.micro_batch_counts = options.search.micro_batch_counts.empty()
                                 ? search::default_micro_batch_counts(s.training.global_batch)
                                 : options.search.micro_batch_counts;
  space.small_micro_batches = options.search.micro_batch_counts.empty();
  space.vary_zero = true;
  space.vary_recompute = true;
  space.vary_sequence_parallel = true;
  space.vary_context_parallel = true;
  const std::vector<PlanPoint> points = enumerate_plans(base, space);
  out.manual_space = points.size();
  const Estimator est = make_estimator(base);

  std::vector<Entry> pool;
  pool.reserve(points.size() + 2);
  std::optional<std::size_t> own;  // the scenario's plan among the points
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (options.progress && i % 256 == 0) options.progress({"manual", i, points.size()});
    const PlanPoint& pt = points[i];
    const Prediction e = est.estimate(pt.plan, pt.micro_batch, pt.recompute);
    pool.push_back({e.iteration_time, e.fits && std::isfinite(e.iteration_time), i, -1});
    if (!s.plan.searched() && !own && same_knobs(pt.plan, s.plan) && pt.micro_batch == s.training.micro_batch &&
        pt.recompute == s.training.recompute)
      own = i;
  }
  if (options.progress) options.progress({"manual", points.size(), points.size()});
  out.own_in_space = own.has_value();

  // The scenario's plan where the space does not hold it, and the Alpa-style plan.
  std::vector<RankedPlan> extras;
  if (!own) {
    RankedPlan r;
    r.source = "scenario";
    if (s.plan.searched()) {
      const ResolvedPlan resolved = resolve_plan(s);
      r.prediction = predict_resolved(resolved);
      r.label = s.plan.file.empty() ? fmt::format("scenario's {{\"search\": \"{}\"}}", s.plan.search)
                                    : fmt::format("scenario's plan file {}", resolved.plan_file);
      r.plan = {{"plan", to_json(s)["plan"]}};
    } else {
      r.prediction = make_estimator(s).estimate(s.plan);
      r.label = manual_label(s.plan, s.training.micro_batch, s.training.recompute, s.training.global_batch);
      r.plan = {{"plan", to_json(s)["plan"]},
                {"training", {{"micro_batch", s.training.micro_batch}, {"recompute", to_string(s.training.recompute)}}}};
    }
    extras.push_back(std::move(r));
  }
  if (options.alpa) {
    search::SearchOptions so = options.search;
    so.manual_baseline = false;
    so.progress = options.progress;
    const search::SearchReport rep = search::run_search(s, so);
    if (rep.alpa.feasible) {
      RankedPlan r;
      r.source = "alpa";
      r.label = alpa_label(rep.alpa);
      r.prediction = rep.alpa.prediction;
      r.plan = search::to_json(rep.alpa, rep.block_names);
      extras.push_back(std::move(r));
    } else {
      out.alpa_note = "the Alpa-style search found no plan that fits";
    }
  } else {
    out.alpa_note = "left out (--no-alpa)";
  }
  for (std::size_t k = 0; k < extras.size(); ++k) {
    const Prediction& e = extras[k].prediction;
    pool.push_back({e.iteration_time, e.fits && std::isfinite(e.iteration_time), SIZE_MAX, int(k)});
  }

  out.considered = pool.size();
  // Fitting plans first, fastest first; ties keep the enumeration order (deterministic).
  std::vector<std::size_t> order(pool.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (pool[a].fits != pool[b].fits) return pool[a].fits;
    return pool[a].fits && pool[a].time < pool[b].time;
  });
  auto row_of = [&](const Entry& en, std::size_t rank) {
    RankedPlan r;
    if (en.extra >= 0) {
      r = extras[std::size_t(en.extra)];
    } else {
      const PlanPoint& pt = points[en.point];
      r.source = own && *own == en.point ? "scenario" : "manual";
      r.prediction = est.estimate(pt.plan, pt.micro_batch, pt.recompute);
      r.label = manual_label(pt.plan, pt.micro_batch, pt.recompute, s.training.global_batch);
      Scenario t = base;
      t.plan = pt.plan;
      r.plan = {{"plan", to_json(t)["plan"]},
                {"training", {{"micro_batch", pt.micro_batch}, {"recompute", to_string(pt.recompute)}}}};
    }
    r.rank = en.fits ? rank : 0;
    return r;
  };
  std::vector<bool> shown(pool.size(), false);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Entry& en = pool[order[k]];
    if (!en.fits) {
      ++out.not_fitting;
      continue;
    }
    if (out.rows.size() < options.top) {
      out.rows.push_back(row_of(en, k + 1));
      shown[order[k]] = true;
    }
  }
  // The scenario's own plan and the Alpa-style plan beside the top rows.
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Entry& en = pool[order[k]];
    const bool beside = en.extra >= 0 || (own && en.point == *own);
    if (beside && !shown[order[k]]) out.rows.push_back(row_of(en, k + 1));
  }
  return out;
}

}  // namespace clustersim

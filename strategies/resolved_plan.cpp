#include "strategies/resolved_plan.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <stdexcept>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"

namespace clustersim {

std::string plan_file_path(const Scenario& s) {
  std::filesystem::path f = s.plan.file;
  if (f.is_relative() && !s.source.empty() && s.source[0] != '<') f = std::filesystem::path(s.source).parent_path() / f;
  return f.string();
}

Scenario with_manual_plan(const Scenario& s, const search::SearchPlan& p, const std::string& file,
                          const std::string& path) {
  if (p.method != "manual") throw std::logic_error("with_manual_plan takes a manual plan");
  if (p.dp < 1 || p.samples_per_micro_batch % p.dp != 0)
    throw InputError(file, path,
                     fmt::format("the plan's micro-batch of {} samples does not split over dp {}", p.samples_per_micro_batch, p.dp));
  Scenario out = s;
  PlanSpec plan;
  plan.dp = p.dp;
  plan.tp = p.tp;
  plan.pp = p.pp;
  plan.schedule = p.schedule == "gpipe" ? Schedule::gpipe : Schedule::one_f_one_b;
  plan.zero = p.zero;
  plan.overlap_grad_reduce = s.plan.overlap_grad_reduce;
  out.plan = plan;
  out.training.micro_batch = p.samples_per_micro_batch / p.dp;
  if (p.recompute) out.training.recompute = *p.recompute;
  Diagnostics diag(file);
  check_consistency(out, diag);
  if (!diag.ok())
    throw InputError(file, path, fmt::format("the manual plan dp {} x tp {} x pp {} does not fit this scenario: {}", p.dp,
                                             p.tp, p.pp, diag.problems().front().message));
  return out;
}

ResolvedPlan resolve_plan(const Scenario& s) {
  ResolvedPlan r;
  if (!s.plan.searched()) {
    r.manual = s;
    return r;
  }
  std::string path;
  if (!s.plan.file.empty()) {
    path = "/plan/file";
    r.plan_file = plan_file_path(s);
    if (!std::filesystem::is_regular_file(r.plan_file))
      throw InputError(s.source, path, fmt::format("plan file \"{}\" does not exist or is not a file", r.plan_file));
    const search::SearchPlan recorded = search::plan_from_json(read_json_file(r.plan_file), r.plan_file);
    r.searched = search::evaluate_plan(s, recorded, r.plan_file);
  } else {
    path = "/plan/search";
    search::SearchOptions so;
    so.manual_baseline = s.plan.search == "manual";
    search::SearchReport rep = search::run_search(s, so);
    r.block_names = rep.block_names;
    search::SearchPlan& p = s.plan.search == "manual" ? rep.manual : rep.alpa;
    if (!p.feasible) throw InputError(s.source, path, fmt::format("no {} plan fits in GPU memory", s.plan.search));
    r.searched = std::move(p);
  }
  if (r.searched->method == "manual") r.manual = with_manual_plan(s, *r.searched, s.source, path);
  return r;
}

Prediction predict_resolved(const ResolvedPlan& r) {
  if (r.manual) return make_estimator(*r.manual).estimate(r.manual->plan);
  return r.searched->prediction;
}

Prediction predict_scenario(const Scenario& s) { return predict_resolved(resolve_plan(s)); }

}  // namespace clustersim

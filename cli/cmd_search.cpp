// clustersim search FILE: the Alpa-style plan search (intra-op ILP solved exactly by the
// frontier DP or CBC, inter-op DP, layer clustering) and the manual dp x tp x pp x
// schedule x ZeRO baseline under the same cost model; prints both, the speed-up, the
// time of each phase, and writes the plan file that `clustersim run --plan` evaluates.
// Every printed or stored result of a plan has `run --json`'s keys (the plan's
// Prediction) plus the scenario, the tool and the plan.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/cmd_search.hpp"
#include "cli/command.hpp"
#include "cli/progress.hpp"
#include "cli/report.hpp"
#include "runner/provenance.hpp"
#include "runner/store.hpp"
#include "scenarios/json_reader.hpp"
#include "scenarios/output_file.hpp"
#include "strategies/ranking.hpp"
#include "strategies/resolved_plan.hpp"
#include "strategies/search/search.hpp"
#include "strategies/search/search_context.hpp"

namespace clustersim::cli {
using runner::store_run;
using runner::tool_json;
namespace {

struct SearchCliOptions {
  std::string file, output;
  std::string db;  // --db FILE: also store the searched plan's prediction there
  bool json = false;
  bool no_manual = false;
  bool trace = false;
  bool quiet = false;  // no progress bar (shown on a terminal only)
  int clusters = 8;
  std::string submeshes = "power-of-two";
  std::vector<std::int64_t> micro_batches;
  double time_limit = search::SearchOptions::default_search_ilp().time_limit_s, gap = 0;
  std::string solver = "auto";
};

std::string describe_blocks(const search::PlanStage& st, const std::vector<std::string>& names) {
  // Runs of equal names: "embedding, gpt-layer x12".
  std::string out;
  for (int b = st.first_block; b <= st.last_block && b < int(names.size());) {
    int e = b;
    while (e + 1 <= st.last_block && e + 1 < int(names.size()) && names[std::size_t(e + 1)] == names[std::size_t(b)]) ++e;
    if (!out.empty()) out += ", ";
    out += names[std::size_t(b)] + (e > b ? fmt::format(" x{}", e - b + 1) : "");
    b = e + 1;
  }
  return out;
}

// "dp 2 x tp 4 x pp 2, 1F1B, ZeRO-2, recompute selective" (manual plans' knobs).
std::string manual_knobs(const search::SearchPlan& p) {
  return fmt::format("dp {} x tp {} x pp {}, {}, {}{}", p.dp, p.tp, p.pp, p.schedule == "gpipe" ? "GPipe" : "1F1B",
                     p.zero > 0 ? fmt::format("ZeRO-{}", p.zero) : std::string("no ZeRO"),
                     p.recompute ? fmt::format(", recompute {}", to_string(*p.recompute)) : std::string());
}

std::vector<std::string> block_names(const Scenario& s) {
  // From a one-sample graph (names do not depend on it).
  const auto graph = build_model_graph(s.model, 1, 2);
  std::vector<std::string> names;
  for (const auto* part : {&graph.pre, &graph.layers, &graph.post})
    for (int b : *part) names.push_back(graph.blocks[std::size_t(b)].name);
  return names;
}

void print_plan(std::ostream& os, const search::SearchPlan& p, const std::vector<std::string>& names) {
  const Prediction& e = p.prediction;
  os << fmt::format("  predicted iteration time {:.4f} s (search objective {:.4f} s); {} micro-batches of {} samples; "
                    "{} stage(s)\n",
                    e.iteration_time, p.iteration_time, p.micro_batches, p.samples_per_micro_batch, p.stages.size());
  os << fmt::format("  likely range {}\n", format_interval(e.interval));
  os << fmt::format("  {:.0f} tokens/s, {:.1f} TFLOP/s per GPU hardware, MFU {:.1f}%; memory per GPU {} of {} usable{}\n",
                    e.tokens_per_s, e.tflops_per_gpu, 100 * e.mfu, format_bytes(e.memory_per_gpu),
                    format_bytes(e.memory_capacity), e.fits ? "" : ": DOES NOT FIT");
  for (std::size_t i = 0; i < p.stages.size(); ++i) {
    const auto& st = p.stages[i];
    os << fmt::format("  stage {}: blocks {}-{} ({}), submesh {}, logical mesh {}x{}, latency {:.3f} ms/micro-batch, "
                      "memory {} per GPU\n",
                      i, st.first_block, st.last_block, describe_blocks(st, names), st.submesh.name(), st.mesh0, st.mesh1,
                      st.latency * 1e3, format_bytes(st.memory));
    std::string counts;
    for (const auto& [k, n] : st.kind_counts) counts += fmt::format("{}{} x{}", counts.empty() ? "" : ", ", k, n);
    os << "           strategies: " << counts << '\n';
  }
}

// A plan's result in `run --json`'s keys, with the scenario, the tool and the plan.
nlohmann::json result_json(const Scenario& s, const search::SearchPlan& p, const std::vector<std::string>& names) {
  nlohmann::json out = to_json(p.prediction);
  out["scenario"] = to_json(s);
  out["tool"] = tool_json("search");
  out["plan"] = search::to_json(p, names);
  return out;
}

nlohmann::json timings_json(const search::SearchTimings& t) {
  return {{"clustering_s", t.clustering_s}, {"intra_op_s", t.intra_op_s}, {"inter_op_s", t.inter_op_s},
          {"manual_s", t.manual_s}, {"total_s", t.total_s}, {"ilp_solves", t.ilp_solves}, {"cbc_solves", t.cbc_solves},
          {"cache_hits", t.cache_hits}, {"unproven_ilps", t.unproven}, {"dp_refinement_rounds", t.dp_rounds},
          {"submeshes", t.submeshes}, {"t_max_tried", t.t_max_tried}, {"peak_rss_bytes", t.peak_rss_bytes}};
}

void print_trace(std::ostream& os, const search::SearchTimings& t) {
  for (const auto& r : t.ilps) {
    os << fmt::format("ilp {} blocks, {} samples, submesh {}, mesh {}x{}, in flight {}: {} {:.4f} s, {} nodes {} leaders {} edges, "
                      "{:.3f} s",
                      r.blocks, r.samples, r.submesh.name(), r.d0, r.d1, r.inflight, r.feasible ? "feasible" : "infeasible",
                      r.latency, r.nodes, r.leaders, r.edges, r.seconds);
    if (r.dp.lagrangian_upper > 0)
      os << fmt::format("; lagrangian bounds {:.9g} .. {:.9g}, after mixing {:.9g}, {} Pareto points", r.dp.lagrangian_lower,
                        r.dp.lagrangian_upper, r.dp.mixed_upper, r.dp.pareto_points);
    os << '\n';
  }
  for (const auto& r : t.micro_batch_rounds)
    os << fmt::format("micro-batches {}: {} {:.6g} s after {} refinements\n", r.micro_batches, r.outcome, r.iteration_time,
                      r.refinements);
}

// The default plan file, named after the scenario but always in the working folder: a
// name like "../x" or "/etc/y" must not choose where the file goes.
std::string default_plan_file(const std::string& scenario_name) {
  std::string safe;
  for (const char c : scenario_name)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  safe.erase(0, safe.find_first_not_of('.'));  // no hidden files, no ".."
  if (safe.empty()) safe = "plan";
  return safe + ".plan.json";
}

int run_search_command(const SearchCliOptions& o) {
  const Scenario s = load_scenario(o.file);
  const std::string out_file = o.output.empty() ? default_plan_file(s.name) : o.output;
  // Before the search (minutes on large clusters), not after it.
  check_writable(out_file);
  search::SearchOptions so;
  so.layer_clusters = o.clusters;
  so.submeshes = search::parse_submesh_space(o.submeshes);
  so.micro_batch_counts = o.micro_batches;
  so.ilp.time_limit_s = o.time_limit;
  so.ilp.relative_gap = o.gap;
  so.ilp.solver = o.solver == "cbc" ? search::IlpSolver::cbc : o.solver == "dp" ? search::IlpSolver::dp : search::IlpSolver::automatic;
  so.manual_baseline = !o.no_manual;
  so.trace = o.trace || std::getenv("CLUSTERSIM_SEARCH_TRACE") != nullptr;
  // Progress on a terminal (silent otherwise): the Alpa-style search's steps (each
  // micro-batch count's first DP round, then its refinement), then the manual plans.
  const auto t0 = search::Clock::now();
  std::unique_ptr<Progress> bar;
  std::string phase;
  if (!o.quiet)
    so.progress = [&](const search::SearchProgress& p) {
      const double t = search::seconds_since(t0);
      if (!bar) bar = std::make_unique<Progress>(p.total, true, Progress::Style{"search", "steps", false});
      if (p.phase != phase) {
        phase = p.phase;
        bar->restart(p.total, t, p.phase == "manual" ? "plans" : "steps");
      }
      bar->update(p.done, t, p.done == p.total);
    };
  const search::SearchReport rep = search::run_search(s, so);
  // The manual knobs the Megatron-space baseline cannot express (sequence parallelism,
  // interleaved schedules) ranked with the rest by the estimator, as `rank` does.
  std::optional<RankedPlan> estimated;
  if (!o.no_manual) {
    RankOptions ro;
    ro.top = 1;
    ro.alpa = false;
    ro.search.micro_batch_counts = o.micro_batches;
    const Ranking rk = rank_plans(s, ro);
    if (!rk.rows.empty() && rk.rows.front().rank == 1) estimated = rk.rows.front();
  }
  if (so.trace) print_trace(std::cerr, rep.timings);
  if (!rep.alpa.feasible) {
    std::cerr << o.file << ": no plan fits: every candidate stage exceeds the GPU memory\n";
    return 1;
  }
  write_text_file(out_file, search::to_json(rep.alpa, rep.block_names).dump(2) + '\n');
  const auto& t = rep.timings;
  nlohmann::json result = result_json(s, rep.alpa, rep.block_names);
  result["search"] = {{"speedup_over_manual", rep.speedup()}, {"timings", timings_json(t)}, {"plan_file", out_file}};
  if (rep.manual.feasible) result["search"]["manual"] = result_json(s, rep.manual, rep.block_names);
  if (estimated)
    result["search"]["best_manual_estimated"] = {{"label", estimated->label},
                                                 {"prediction", to_json(estimated->prediction)},
                                                 {"plan", estimated->plan}};
  // Stored after printing: a database that fails (a full disk) loses the record, not
  // the search's result.
  const auto store = [&] {
    if (o.db.empty()) return;
    std::cout.flush();
    const std::int64_t id = store_run(o.db, s, result, "search");
    std::cerr << "stored run " << id << " in " << o.db << '\n';
  };
  if (o.json) {
    std::cout << result.dump(2) << '\n';
    store();
    return 0;
  }
  std::cout << fmt::format("search: {} ({} GPUs: {} nodes x {})\n", s.name, s.cluster.total_gpus(), s.cluster.nodes,
                           s.cluster.gpus_per_node);
  std::cout << "Alpa-style plan (intra-op ILP + inter-op DP):\n";
  print_plan(std::cout, rep.alpa, rep.block_names);
  if (!o.no_manual) {
    if (rep.manual.feasible) {
      std::cout << fmt::format("Best manual plan ({}, Megatron shardings, same cost model):\n", manual_knobs(rep.manual));
      print_plan(std::cout, rep.manual, rep.block_names);
      std::cout << fmt::format("Speed-up of the Alpa-style plan over the best manual plan: {:.3f}x\n", rep.speedup());
    } else {
      std::cout << "No manual plan fits in GPU memory.\n";
    }
    if (estimated)
      std::cout << fmt::format("Best manual plan over every knob (sequence parallelism and interleaving too; the estimator, "
                               "as run prints it, clustersim rank lists more): {}, {:.4f} s\n",
                               estimated->label, estimated->prediction.iteration_time);
  }
  std::cout << fmt::format(
      "Search time: clustering {:.3f} s, intra-op ILPs {:.3f} s ({} solved, {} of them by CBC; {} reused), inter-op DP {:.3f} s "
      "({} refinement rounds, {} submesh shapes, {} t_max passes), manual baseline {:.3f} s, total {:.3f} s, peak memory {:.2f} GB\n",
      t.clustering_s, t.intra_op_s, t.ilp_solves, t.cbc_solves, t.cache_hits, t.inter_op_s, t.dp_rounds, t.submeshes,
      t.t_max_tried, t.manual_s, t.total_s, t.peak_rss_bytes / 1e9);
  if (t.unproven > 0)
    std::cout << fmt::format("warning: {} ILP(s) reached the {} s time limit; their plans are feasible but not proven optimal "
                             "(raise --time-limit)\n", t.unproven, o.time_limit);
  std::cout << "plan written to " << out_file << '\n';
  store();
  return 0;
}

// Prints one plan's result: `run --json`'s keys, or the plan and its prediction.
int print_result(const Scenario& s, const search::SearchPlan& p, const std::string& title, bool json) {
  const std::vector<std::string> names = block_names(s);
  if (json) {
    std::cout << result_json(s, p, names).dump(2) << '\n';
    return 0;
  }
  std::cout << title << ":\n";
  print_plan(std::cout, p, names);
  return 0;
}

const Registration search_command{
    "search", "find a parallel plan (Alpa-style ILP + DP) and compare it with the best manual plan",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<SearchCliOptions>();
      sub.add_option("FILE", o->file, "scenario file (JSON)")->required();
      sub.add_option("-o,--output", o->output, "plan file to write (default: <scenario name>.plan.json)");
      sub.add_flag("--json", o->json, "print machine-readable JSON (run --json's keys for the Alpa-style plan)");
      sub.add_option("--db", o->db, "also store the searched plan's prediction in this results database");
      sub.add_flag("--no-manual", o->no_manual, "skip the manual baseline");
      sub.add_flag("--quiet", o->quiet, "no progress bar on stderr (shown only when stderr is a terminal)");
      sub.add_flag("--trace", o->trace, "print every ILP solve and micro-batch count to stderr (also CLUSTERSIM_SEARCH_TRACE)");
      sub.add_option("--clusters", o->clusters, "layers after clustering (Alpa's L)")->check(CLI::Range(1, 1 << 20));
      sub.add_option("--submeshes", o->submeshes,
                     "whole-host submeshes of the stages: power-of-two (2, 4, 8 ... hosts; Alpa's default) or all (every host count)")
          ->check(CLI::IsMember({"power-of-two", "all"}));
      sub.add_option("--micro-batches", o->micro_batches, "micro-batch counts to try (default: powers of two from 1 to the global batch)");
      sub.add_option("--time-limit", o->time_limit, "ILP time limit per CBC solve, seconds");
      sub.add_option("--gap", o->gap, "ILP relative optimality gap (0: exact; CBC only)");
      sub.add_option("--solver", o->solver, "intra-op solver: auto (the frontier DP, CBC where it cannot), dp or cbc")
          ->check(CLI::IsMember({"auto", "dp", "cbc"}));
      return [o] { return run_search_command(*o); };
    }};

}  // namespace

int run_plan_file(const Scenario& s, const std::string& plan_file, bool json) {
  const search::SearchPlan recorded = search::plan_from_json(read_json_file(plan_file), plan_file);
  const search::SearchPlan p = search::evaluate_plan(s, recorded, plan_file);
  return print_result(
      s, p, fmt::format("{} with plan {} ({})", s.name, plan_file, p.method == "manual" ? "manual: " + manual_knobs(p) : p.method),
      json);
}

int run_searched_plan(const Scenario& s, bool json) {
  // One resolution for run, simulate and sweep: a missing plan file or no fitting plan is
  // an error naming /plan/file or /plan/search; manual knobs are estimated as `run` does.
  const ResolvedPlan r = resolve_plan(s);
  search::SearchPlan p = *r.searched;
  p.prediction = predict_resolved(r);
  const std::string how = p.method == "manual" ? "manual: " + manual_knobs(p) : p.method;
  return print_result(s, p,
                      r.plan_file.empty() ? fmt::format("{} with the {} plan search ({})", s.name, s.plan.search, how)
                                          : fmt::format("{} with plan {} ({})", s.name, r.plan_file, how),
                      json);
}

}  // namespace clustersim::cli

// clustersim rank FILE: "what is the best plan for this model on this cluster". Ranks
// the manual plans (dp, tp, pp, schedule and virtual stages, ZeRO, sequence parallelism,
// recompute, micro-batch), the Alpa-style search's plan and the scenario's own plan by
// the prediction `run` prints for each (strategies/ranking.hpp), prints the top N with
// the scenario's and the Alpa-style plan beside them, and exports the same rows as CSV
// and JSON.
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "cli/progress.hpp"
#include "cli/report.hpp"
#include "runner/provenance.hpp"
#include "scenarios/output_file.hpp"
#include "strategies/ranking.hpp"
#include "strategies/search/search_context.hpp"

namespace clustersim::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct RankCliOptions {
  std::string file, csv, json;
  std::size_t top = 10;
  bool no_alpa = false, quiet = false;
  int clusters = 8;
  std::vector<std::int64_t> micro_batches;
  double time_limit = search::SearchOptions::default_search_ilp().time_limit_s;
};

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string rank_text(const RankedPlan& r) { return r.rank > 0 ? std::to_string(r.rank) : "-"; }

std::string csv_text(const Ranking& rk) {
  std::string out = "rank,source,plan,iteration_time_s,tokens_per_s,mfu,memory_per_gpu_gib,fits,interval_low_s,interval_high_s\n";
  for (const auto& r : rk.rows) {
    const Prediction& e = r.prediction;
    out += fmt::format("{},{},{},{:.9g},{:.9g},{:.6g},{:.6g},{},{},{}\n", r.rank > 0 ? std::to_string(r.rank) : "",
                       r.source, csv_field(r.label), e.iteration_time, e.tokens_per_s, e.mfu, e.memory_per_gpu / kGiB,
                       e.fits ? "yes" : "no", e.interval.present() ? fmt::format("{:.9g}", e.interval.low) : "",
                       e.interval.present() ? fmt::format("{:.9g}", e.interval.high) : "");
  }
  return out;
}

nlohmann::json ranking_json(const Scenario& s, const Ranking& rk) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : rk.rows) {
    const Prediction& e = r.prediction;
    rows.push_back({{"rank", r.rank > 0 ? nlohmann::json(r.rank) : nlohmann::json(nullptr)},
                    {"source", r.source},
                    {"label", r.label},
                    {"iteration_time_s", e.iteration_time},
                    {"tokens_per_s", e.tokens_per_s},
                    {"mfu", e.mfu},
                    {"memory_per_gpu_gib", e.memory_per_gpu / kGiB},
                    {"fits", e.fits},
                    {"prediction", to_json(e)},
                    {"plan", r.plan}});
  }
  return {{"scenario", s.name},
          {"considered", rk.considered},
          {"not_fitting", rk.not_fitting},
          {"manual_space", rk.manual_space},
          {"alpa_note", rk.alpa_note},
          {"rows", rows},
          {"tool", runner::tool_json("rank")}};
}

void print_table(const Scenario& s, const Ranking& rk) {
  std::cout << fmt::format("rank: {} ({} GPUs: {} nodes x {})\n", s.name, s.cluster.total_gpus(), s.cluster.nodes,
                           s.cluster.gpus_per_node);
  std::size_t width = 4;
  for (const auto& r : rk.rows) width = std::max(width, r.label.size() + (r.source == "manual" ? 0 : r.source.size() + 3));
  std::cout << fmt::format("{:>4}  {:<{}}  {:>12} {:>12} {:>6} {:>10}  {:<4}  {}\n", "rank", "plan", width, "iteration",
                           "tokens/s", "MFU", "memory/GPU", "fits", "likely range");
  bool beside = false;
  for (std::size_t i = 0; i < rk.rows.size(); ++i) {
    const RankedPlan& r = rk.rows[i];
    if (!beside && (r.rank == 0 || (i > 0 && r.rank != rk.rows[i - 1].rank + 1))) {
      beside = true;
      std::cout << "  beside the top rows:\n";
    }
    const Prediction& e = r.prediction;
    const std::string label = r.source == "manual" ? r.label : r.label + " [" + r.source + "]";
    const std::string range = e.interval.present() ? fmt::format("{} to {}", format_seconds(e.interval.low),
                                                                 format_seconds(e.interval.high))
                                                   : "-";
    std::cout << fmt::format("{:>4}  {:<{}}  {:>12} {:>12.0f} {:>5.1f}% {:>6.1f} GiB  {:<4}  {}\n", rank_text(r), label,
                             width, format_seconds(e.iteration_time), e.tokens_per_s, 100 * e.mfu, e.memory_per_gpu / kGiB,
                             e.fits ? "yes" : "no", range);
  }
  std::cout << fmt::format("{} plans considered ({} manual knob sets{}, {}{}); {} do not fit in GPU memory\n",
                           rk.considered, rk.manual_space, rk.own_in_space ? " with the scenario's own" : "",
                           rk.alpa_note.empty() ? "the Alpa-style plan" : "no Alpa-style plan",
                           rk.own_in_space ? "" : ", the scenario's own plan", rk.not_fitting);
  if (!rk.alpa_note.empty()) std::cout << "Alpa-style plan: " << rk.alpa_note << '\n';
}

int run_rank(const RankCliOptions& o) {
  const Scenario s = load_scenario(o.file);
  for (const std::string& f : {o.csv, o.json})
    if (!f.empty() && f != "-") check_writable(f);  // before minutes of search
  RankOptions ro;
  ro.top = o.top;
  ro.alpa = !o.no_alpa;
  ro.search.layer_clusters = o.clusters;
  ro.search.micro_batch_counts = o.micro_batches;
  ro.search.ilp.time_limit_s = o.time_limit;
  // Progress on a terminal only: the manual plans, then the Alpa-style search's steps.
  const auto t0 = search::Clock::now();
  std::unique_ptr<Progress> bar;
  std::string phase;
  if (!o.quiet)
    ro.progress = [&](const search::SearchProgress& p) {
      const double t = search::seconds_since(t0);
      if (!bar) bar = std::make_unique<Progress>(p.total, true, Progress::Style{"rank", "plans", false});
      if (p.phase != phase) {
        phase = p.phase;
        bar->restart(p.total, t, p.phase == "manual" ? "plans" : "steps");
      }
      bar->update(p.done, t, p.done == p.total);
    };
  const Ranking rk = rank_plans(s, ro);
  if (!o.csv.empty()) {
    if (o.csv == "-") std::cout << csv_text(rk);
    else write_text_file(o.csv, csv_text(rk));
  }
  if (!o.json.empty()) {
    if (o.json == "-") std::cout << ranking_json(s, rk).dump(2) << '\n';
    else write_text_file(o.json, ranking_json(s, rk).dump(2) + '\n');
  }
  if (o.csv != "-" && o.json != "-") print_table(s, rk);
  return 0;
}

const Registration rank_command{
    "rank", "rank every plan of the scenario's model and cluster (manual knobs, Alpa-style, its own) by predicted time",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<RankCliOptions>();
      sub.add_option("FILE", o->file, "scenario file (JSON)")->required();
      sub.add_option("--top", o->top, "fitting plans to show (default 10)")->check(CLI::Range(1, 1 << 30));
      sub.add_option("--csv", o->csv, "also write the rows as CSV to this file (- for standard output)");
      sub.add_option("--json", o->json, "also write the rows as JSON to this file (- for standard output)");
      sub.add_flag("--no-alpa", o->no_alpa, "leave out the Alpa-style search (minutes on large clusters)");
      sub.add_flag("--quiet", o->quiet, "no progress on stderr");
      sub.add_option("--clusters", o->clusters, "the Alpa-style search's layers after clustering")->check(CLI::Range(1, 1 << 20));
      sub.add_option("--micro-batches", o->micro_batches,
                     "micro-batch counts to try (default: powers of two dividing the global batch, and micro-batches of 1 "
                     "and 2 samples per replica for manual plans)");
      sub.add_option("--time-limit", o->time_limit, "ILP time limit per CBC solve, seconds");
      return [o] { return run_rank(*o); };
    }};

}  // namespace
}  // namespace clustersim::cli

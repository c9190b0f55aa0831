// clustersim db list | show | sweeps | failed | compare | export | plot | import-measured
// | check: reading the results database, and importing measured runs (runner/; the
// format is in results/README.md). Every subcommand takes --db FILE (default clustersim.db).
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cli/command.hpp"
#include "results/store.hpp"
#include "results/svg.hpp"
#include "runner/compare.hpp"
#include "runner/serving_import.hpp"
#include "runner/measured_import.hpp"
#include "runner/store.hpp"
#include "scenarios/json_reader.hpp"
#include "scenarios/output_file.hpp"
#include "scenarios/units.hpp"

namespace clustersim::cli {
namespace {

using nlohmann::json;
using results::Database;

struct DbOptions {
  std::string db = runner::default_db_file;
  std::int64_t limit = 50;
  std::string run;
  std::int64_t sweep = 0;
  std::string method = "analytical";
  bool json = false, csv = false;
  std::string out;
  std::string x, y = "tokens_per_s", series;
  std::vector<std::string> where;
  bool log_x = false;
  std::vector<std::string> files;
  std::vector<std::int64_t> runs;  // plot latency-cdf
  std::string latency = "ttft";    // plot latency-cdf: ttft, tpot or e2e
  std::string gpu, host, scenarios_out;  // import-serving
};

std::string text_of(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

json parse_json_column(const json& v) { return v.is_string() ? json::parse(v.get<std::string>()) : json(); }

void write_output(const std::string& out, const std::string& text) {
  if (out.empty() || out == "-") {
    std::cout << text;
    return;
  }
  write_text_file(out, text);
  std::cerr << "wrote " << out << '\n';
}

// ---- list, show, sweeps, failed, check ----

int list(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  const auto rows = db.list_runs(o.limit);
  if (o.json) {
    std::cout << json(rows).dump(2) << '\n';
    return 0;
  }
  fmt::print("{:<5} {:<9} {:<10} {:<16} {:<7} {:<16} {:>5} {:>12} {:>12}  {}\n", "run", "kind", "method", "scenario hash",
             "family", "gpu", "gpus", "time (s)", "tokens/s", "scenario");
  for (const auto& r : rows) {
    const bool measured = r["kind"] == "measured", serving = r["kind"] == "measured-serving";
    fmt::print("{:<5} {:<9} {:<10} {:<16} {:<7} {:<16} {:>5} {:>12} {:>12}  {}\n",
               (measured ? "m" : serving ? "s" : "") + text_of(r["id"]), text_of(r["kind"]), text_of(r["method"]),
               text_of(r["scenario_hash"]), text_of(r["family"]), text_of(r["gpu"]), text_of(r["gpus"]),
               text_of(r["time_s"]), text_of(r["tokens_per_s"]), text_of(r["scenario"]));
  }
  return 0;
}

int show(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  const bool measured = !o.run.empty() && o.run[0] == 'm', serving = !o.run.empty() && o.run[0] == 's';
  const std::size_t prefix = measured || serving ? 1 : 0;
  std::int64_t id = 0;
  try {
    std::size_t used = 0;
    id = std::stoll(o.run.substr(prefix), &used);
    if (used != o.run.size() - prefix) throw std::invalid_argument(o.run);
  } catch (const std::exception&) {
    throw InputError("command line", "RUN",
                     "expected a run id such as 12 (simulated), m3 (measured) or s2 (measured serving), got \"" +
                         o.run + "\"");
  }
  auto row = measured ? db.measured_run(id) : serving ? db.measured_serving_run(id) : db.simulated_run(id);
  if (!row)
    throw InputError(o.db, "",
                     fmt::format("no {} run {}", measured ? "measured" : serving ? "measured serving" : "simulated", id));
  json out = json::object();
  for (auto& [k, v] : row->items()) {
    if (k.size() > 5 && k.compare(k.size() - 5, 5, "_json") == 0) out[k.substr(0, k.size() - 5)] = parse_json_column(v);
    else out[k] = v;
  }
  std::cout << out.dump(2) << '\n';
  return 0;
}

int sweeps(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  const auto rows = db.sweeps();
  if (o.json) {
    std::cout << json(rows).dump(2) << '\n';
    return 0;
  }
  fmt::print("{:<5} {:<28} {:>8} {:>8} {:>8}  {:<20}  {}\n", "sweep", "name", "points", "stored", "failed", "created",
             "file");
  for (const auto& r : rows)
    fmt::print("{:<5} {:<28} {:>8} {:>8} {:>8}  {:<20}  {}\n", text_of(r["id"]), text_of(r["name"]),
               text_of(r["points"]), text_of(r["stored"]), text_of(r["failed"]), text_of(r["created_utc"]),
               text_of(r["file"]));
  return 0;
}

// A sweep id given on the command line must name a stored sweep: "0 failed points" or an
// empty export for a typo would read as success.
void require_sweep(const Database& db, const DbOptions& o) {
  for (const auto& s : db.sweeps())
    if (s["id"] == o.sweep) return;
  throw InputError(o.db, "", fmt::format("no sweep {} (see 'db sweeps')", o.sweep));
}

int failed(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  require_sweep(db, o);
  const auto rows = db.failed_points(o.sweep);
  if (o.json) {
    std::cout << json(rows).dump(2) << '\n';
    return 0;
  }
  for (const auto& r : rows)
    fmt::print("point {} {}: {}\n", text_of(r["point_index"]), text_of(r["axes_json"]), text_of(r["error"]));
  fmt::print("{} failed points\n", rows.size());
  return 0;
}

int check(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  const std::string ok = db.integrity_check();
  fmt::print("{}: schema version {}, integrity {}\n", o.db, db.version(), ok);
  for (const char* t : {"scenarios", "hardware_profiles", "plans", "sweeps", "simulated_runs", "failed_points",
                        "measured_runs", "calibration_samples"})
    fmt::print("  {:<20} {:>10}\n", t, db.count(t));
  if (db.version() >= 2) fmt::print("  {:<20} {:>10}\n", "measured_serving_runs", db.count("measured_serving_runs"));
  return ok == "ok" ? 0 : 1;
}

// ---- import-measured ----

int import_measured(const DbOptions& o) {
  const auto records = runner::read_measured_runs(o.files);
  for (const auto& r : runner::store_measured_runs(o.db, records))
    fmt::print("{}: measured run m{} (scenario {})\n", r.file, r.id, r.scenario_hash);
  return 0;
}

// ---- import-serving ----

int import_serving(const DbOptions& o) {
  std::vector<runner::MeasuredServingRun> runs;
  std::vector<std::string> skipped;
  std::vector<Problem> problems;
  for (const auto& f : o.files) {
    try {
      auto got = runner::read_serving_engine_runs(f, o.host, o.gpu);
      for (auto& r : got.runs) runs.push_back(std::move(r));
      for (auto& s : got.skipped) skipped.push_back(f + ": " + s);
    } catch (const InputError& e) {
      problems.insert(problems.end(), e.problems().begin(), e.problems().end());
    }
  }
  if (!problems.empty()) throw InputError(problems);  // one bad file imports nothing
  namespace fs = std::filesystem;
  if (!o.scenarios_out.empty()) fs::create_directories(o.scenarios_out);
  const auto stored = runner::store_measured_serving_runs(o.db, runs);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const auto& sm = r.record.summary;
    std::string written;
    if (!o.scenarios_out.empty()) {
      std::string name = r.label;
      std::replace(name.begin(), name.end(), '/', '-');
      written = (fs::path(o.scenarios_out) / (name + ".json")).string();
      write_text_file(written, r.scenario_document.dump(2) + "\n");
      written = ", scenario file " + written;
    }
    fmt::print("{}: measured serving run s{} {} ({} requests, TTFT p50 {:.1f} ms, E2E p50 {:.2f} s; scenario {}{})\n",
               stored[i].file, stored[i].id, r.label, sm["measured_requests"].get<std::int64_t>(),
               1e3 * sm["ttft_s"]["p50"].get<double>(), sm["e2e_s"]["p50"].get<double>(), stored[i].scenario_hash,
               written);
  }
  for (const auto& s : skipped) fmt::print("skipped {}\n", s);
  return 0;
}

// ---- compare ----

int compare_serving(const DbOptions& o) {
  const runner::ServingComparison c = runner::compare_serving(o.db);
  if (o.json) {
    std::cout << c.to_json().dump(2) << '\n';
    return 0;
  }
  if (c.pairs.empty()) {
    fmt::print("no measured serving run has a served run of the same scenario (import with 'db import-serving "
               "--scenarios-out DIR', then 'clustersim serve DIR/RUN.json --db')\n");
    return 0;
  }
  fmt::print("measured serving runs against the latest served run of the same scenario (error = (served - measured) "
             "/ measured)\n\n");
  const std::vector<std::string> shown{"ttft_p50", "ttft_p90", "e2e_p50", "e2e_p90", "tpot_p50", "throughput_rps"};
  fmt::print("{:<8} {:<6} {:<15}", "measured", "served", "run");
  for (const auto& f : shown) fmt::print(" {:>21}", f);
  fmt::print("\n");
  for (const auto& p : c.pairs) {
    fmt::print("{:<8} {:<6} {:<15}", "s" + text_of(p["measured_id"]), text_of(p["served_id"]), text_of(p["measured_name"]));
    for (const auto& f : shown) {
      if (!p["figures"].contains(f)) {
        fmt::print(" {:>21}", "-");
        continue;
      }
      const auto& x = p["figures"][f];
      // TTFT and TPOT in ms, E2E in s, throughput in req/s.
      const double scale = f.rfind("ttft", 0) == 0 || f.rfind("tpot", 0) == 0 ? 1e3 : 1.0;
      fmt::print(" {:>21}", fmt::format("{:.4g}/{:.4g} {:+.1f}%", scale * x["measured"].get<double>(),
                                        scale * x["served"].get<double>(), 100 * x["error"].get<double>()));
    }
    fmt::print("\n");
  }
  fmt::print("(measured/served and the error; TTFT and TPOT in ms, E2E in s, throughput in req/s)\n\n{:<16} {:>5} {:>8} {:>8} {:>8}\n",
             "figure", "runs", "MAPE", "bias", "worst");
  for (const char* f : runner::serving_figures) {
    const auto it = c.figures.find(f);
    if (it == c.figures.end()) continue;
    const auto& s = it->second;
    fmt::print("{:<16} {:>5} {:>7.1f}% {:>+7.1f}% {:>+7.1f}%\n", f, s.n, 100 * s.mape(), 100 * s.bias(), 100 * s.worst);
  }
  if (c.unpaired) fmt::print("\n{} measured serving run(s) have no served run of their scenario yet\n", c.unpaired);
  return 0;
}

int compare(const DbOptions& o) {
  if (o.method == "served") return compare_serving(o);
  const runner::Comparison c = runner::compare_with_measured(o.db, o.method);
  if (o.json) {
    std::cout << c.to_json().dump(2) << '\n';
    return 0;
  }
  if (c.pairs.empty()) {
    const bool vowel = !o.method.empty() && std::string("aeiou").find(o.method[0]) != std::string::npos;
    fmt::print("no measured run has {} {} run of the same scenario (import with 'db import-measured', run with --db)\n",
               vowel ? "an" : "a", o.method);
    return 0;
  }
  fmt::print("measured step time against the latest {} prediction of the same scenario\n\n", o.method);
  fmt::print("{:<9} {:<9} {:<24} {:<7} {:>12} {:>12} {:>8} {:>10}  {}\n", "measured", "predicted", "hardware", "family",
             "measured s", "predicted s", "error", "mem error", "scenario");
  for (const auto& p : c.pairs)
    fmt::print("{:<9} {:<9} {:<24} {:<7} {:>12.6g} {:>12.6g} {:>+7.1f}% {:>10}  {}\n", "m" + text_of(p["measured_id"]),
               text_of(p["simulated_id"]), text_of(p["hardware"]), text_of(p["family"]), p["measured_s"].get<double>(),
               p["predicted_s"].get<double>(), 100 * p["error"].get<double>(),
               p.contains("memory_error") ? fmt::format("{:+.1f}%", 100 * p["memory_error"].get<double>()) : "-",
               text_of(p["scenario"]));
  fmt::print("\n{:<24} {:<7} {:>5} {:>8} {:>8} {:>8}\n", "hardware", "family", "runs", "MAPE", "bias", "worst");
  for (const auto& [k, s] : c.groups)
    fmt::print("{:<24} {:<7} {:>5} {:>7.1f}% {:>+7.1f}% {:>+7.1f}%\n", k.first, k.second, s.n, 100 * s.mape(),
               100 * s.bias(), 100 * s.worst);
  fmt::print("{:<24} {:<7} {:>5} {:>7.1f}% {:>+7.1f}% {:>+7.1f}%\n", "all", "", c.overall.n, 100 * c.overall.mape(),
             100 * c.overall.bias(), 100 * c.overall.worst);
  if (c.coverage.runs)
    fmt::print("\ncoverage: {} of {} measured runs inside their prediction interval ({:.0f}%; the intervals state "
               "{:.0f}% on average)\n",
               c.coverage.inside, c.coverage.runs, 100 * c.coverage.share(), 100 * c.coverage.stated);
  else
    fmt::print("\ncoverage: no prediction here carries an interval (stored before intervals existed)\n");
  return 0;
}

// ---- export ----

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

int export_runs(const DbOptions& o) {
  if (o.csv == o.json) throw InputError("command line", "export", "give exactly one of --csv or --json");
  const Database db(o.db, Database::Mode::read_only);
  if (o.sweep) require_sweep(db, o);
  auto rows = db.export_runs(o.sweep ? std::optional<std::int64_t>(o.sweep) : std::nullopt);
  for (auto& r : rows) {
    r["axes"] = parse_json_column(r["axes_json"]);
    r["plan"] = parse_json_column(r["plan_json"]);
    r.erase("axes_json");
    r.erase("plan_json");
  }
  if (o.json) {
    write_output(o.out, json(rows).dump(2) + "\n");
    return 0;
  }
  // Fixed columns, then the plan's fields, then every sweep axis seen (sorted).
  const std::vector<std::string> fixed{"id", "method", "sweep_id", "point_index", "scenario_hash", "scenario", "family",
                                       "gpu", "gpus", "iteration_time_s", "tokens_per_s", "samples_per_s",
                                       "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "memory_per_gpu_bytes", "fits",
                                       "tool_version", "git_revision", "simgrid_version", "created_utc"};
  std::set<std::string> plan_keys, axis_keys;
  for (const auto& r : rows) {
    if (r["plan"].is_object())
      for (const auto& [k, v] : r["plan"].items()) plan_keys.insert(k);
    if (r["axes"].is_object())
      for (const auto& [k, v] : r["axes"].items()) axis_keys.insert(k);
  }
  std::string out;
  std::vector<std::string> header(fixed);
  for (const auto& k : plan_keys) header.push_back("plan." + k);
  for (const auto& k : axis_keys) header.push_back("axis:" + k);
  for (std::size_t i = 0; i < header.size(); ++i) out += (i ? "," : "") + csv_field(header[i]);
  out += '\n';
  for (const auto& r : rows) {
    std::vector<std::string> cells;
    for (const auto& k : fixed) cells.push_back(r[k].is_null() ? "" : r[k].is_string() ? r[k].get<std::string>() : r[k].dump());
    for (const auto& k : plan_keys) cells.push_back(r["plan"].contains(k) ? text_of(r["plan"][k]) : "");
    for (const auto& k : axis_keys)
      cells.push_back(r["axes"].is_object() && r["axes"].contains(k) ? text_of(r["axes"][k]) : "");
    for (std::size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + csv_field(cells[i]);
    out += '\n';
  }
  write_output(o.out, out);
  return 0;
}

// ---- plot ----

struct Metric {
  const char* column;
  const char* label;
  double scale;        // stored SI value x scale = plotted value
  bool higher_is_better;
};
const Metric metrics[] = {
    {"iteration_time_s", "iteration time (s)", 1, false},
    {"tokens_per_s", "throughput (tokens/s)", 1, true},
    {"samples_per_s", "throughput (samples/s)", 1, true},
    {"tflops_per_gpu", "hardware FLOP rate per GPU (TFLOP/s)", 1, true},
    {"model_tflops_per_gpu", "model FLOP rate per GPU (TFLOP/s)", 1, true},
    {"mfu", "model FLOP utilisation (fraction of peak)", 1, true},
    {"memory_per_gpu_bytes", "memory per GPU (GiB)", 1.0 / (1024.0 * 1024 * 1024), false},
};

const Metric& find_metric(const std::string& name) {
  std::string names;
  for (const auto& m : metrics) {
    if (name == m.column) return m;
    names += (names.empty() ? "" : ", ") + std::string(m.column);
  }
  throw InputError("command line", "--y", "unknown metric \"" + name + "\"; one of " + names);
}

// An axis by its JSON pointer or by its last segment ("tp" for "/plan/tp").
std::string resolve_axis(const std::string& name, const std::set<std::string>& axes, const char* option) {
  if (axes.count(name)) return name;
  std::vector<std::string> hits;
  for (const auto& a : axes)
    if (a.substr(a.rfind('/') + 1) == name) hits.push_back(a);
  if (hits.size() == 1) return hits.front();
  std::string list;
  for (const auto& a : axes) list += (list.empty() ? "" : ", ") + a;
  throw InputError("command line", option,
                   fmt::format("{} \"{}\"; the sweep's axes are {}", hits.empty() ? "no axis" : "ambiguous axis", name, list));
}

// A number, or a quantity with its unit converted for the axis ("300GBps" -> 300 GB/s).
std::optional<std::pair<double, std::string>> axis_number(const json& v) {
  if (v.is_number()) return std::pair{v.get<double>(), std::string()};
  if (v.is_boolean()) return std::pair{v.get<bool>() ? 1.0 : 0.0, std::string()};
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  std::string err;
  if (auto q = parse_quantity(s, Dimension::bandwidth, &err)) return std::pair{*q / 1e9, std::string("GB/s")};
  if (auto q = parse_quantity(s, Dimension::time, &err)) return std::pair{*q, std::string("s")};
  if (auto q = parse_quantity(s, Dimension::bytes, &err)) return std::pair{*q / (1024.0 * 1024 * 1024), std::string("GiB")};
  return std::nullopt;
}

int plot_sweep(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  const auto sweep_rows = db.sweeps();
  std::string sweep_name;
  for (const auto& s : sweep_rows)
    if (s["id"] == o.sweep) sweep_name = s["name"];
  if (sweep_name.empty()) throw InputError(o.db, "", fmt::format("no sweep {} (see 'db sweeps')", o.sweep));
  const Metric& metric = find_metric(o.y);
  const auto rows = db.export_runs(o.sweep);
  std::set<std::string> axes;
  std::vector<std::pair<json, double>> points;  // (axes, metric)
  std::size_t not_finite = 0, not_fitting = 0;
  for (const auto& r : rows) {
    const json a = parse_json_column(r["axes_json"]);
    if (!a.is_object() || !r[metric.column].is_number()) continue;
    for (const auto& [k, v] : a.items()) axes.insert(k);
    // A plan that does not fit in GPU memory cannot run: it is no candidate for the best
    // value over the other axes, however fast its estimate.
    if (r.contains("fits") && r["fits"].is_number() && r["fits"].get<double>() == 0) {
      ++not_fitting;
      continue;
    }
    const double value = r[metric.column].get<double>() * metric.scale;
    if (!std::isfinite(value)) {
      ++not_finite;
      continue;
    }
    points.emplace_back(a, value);
  }
  if (not_finite > 0)
    std::cerr << fmt::format("note: left out {} point(s) of sweep {} whose {} is not a finite number\n", not_finite,
                             o.sweep, metric.column);
  if (not_fitting > 0)
    std::cerr << fmt::format("note: left out {} point(s) of sweep {} that do not fit in GPU memory\n", not_fitting,
                             o.sweep);
  if (points.empty())
    throw InputError(o.db, "",
                     not_fitting > 0 ? fmt::format("sweep {} has no stored point that fits in GPU memory", o.sweep)
                                     : fmt::format("sweep {} has no stored points", o.sweep));
  const std::string x_axis = resolve_axis(o.x, axes, "--x");
  const std::string series_axis = o.series.empty() ? "" : resolve_axis(o.series, axes, "--series");
  std::vector<std::pair<std::string, std::string>> filters;
  for (const auto& w : o.where) {
    const auto eq = w.find('=');
    if (eq == std::string::npos) throw InputError("command line", "--where", "expected FIELD=VALUE, got \"" + w + "\"");
    filters.emplace_back(resolve_axis(w.substr(0, eq), axes, "--where"), w.substr(eq + 1));
  }
  // One value per (series, x): the best over every axis not on the chart.
  std::map<std::string, std::map<double, double>> best;
  std::map<std::string, json> series_value;  // the series axis's value behind each name
  std::string x_unit;
  for (const auto& [a, value] : points) {
    bool keep = true;
    for (const auto& [field, want] : filters) keep = keep && a.contains(field) && text_of(a[field]) == want;
    if (!keep || !a.contains(x_axis)) continue;
    const auto x = axis_number(a[x_axis]);
    if (!x) throw InputError("command line", "--x", "axis " + x_axis + " has a non-numeric value " + a[x_axis].dump());
    x_unit = x->second;
    const std::string name = series_axis.empty() ? sweep_name
                             : a.contains(series_axis)
                                 ? series_axis.substr(series_axis.rfind('/') + 1) + "=" + text_of(a[series_axis])
                                 : "-";
    if (!series_axis.empty() && a.contains(series_axis)) series_value.emplace(name, a[series_axis]);
    auto& slot = best[name];
    auto it = slot.find(x->first);
    if (it == slot.end()) slot.emplace(x->first, value);
    else it->second = metric.higher_is_better ? std::max(it->second, value) : std::min(it->second, value);
  }
  if (best.empty()) throw InputError("command line", "--where", "no stored point matches");
  std::vector<results::Series> series;
  for (const auto& [name, xs] : best) series.push_back({name, {xs.begin(), xs.end()}});
  // Legends in the axis's order: pp=1, pp=2, pp=16 (by name, pp=16 came before pp=2).
  const auto numeric = [&](const std::string& name) -> std::optional<double> {
    const auto it = series_value.find(name);
    if (it == series_value.end()) return std::nullopt;
    const auto v = axis_number(it->second);
    return v ? std::optional<double>(v->first) : std::nullopt;
  };
  std::stable_sort(series.begin(), series.end(), [&](const results::Series& a, const results::Series& b) {
    const auto x = numeric(a.name), y = numeric(b.name);
    if (x && y && *x != *y) return *x < *y;
    if (x.has_value() != y.has_value()) return x.has_value();
    return a.name < b.name;
  });
  const std::string reduce = axes.size() > 1 + (series_axis.empty() ? 0 : 1) ? " (best over the other axes)" : "";
  const results::ChartText text{fmt::format("{}: {} against {}{}", sweep_name, metric.column, x_axis, reduce),
                                x_axis + (x_unit.empty() ? "" : " (" + x_unit + ")"), metric.label};
  write_output(o.out, results::line_chart(text, series, o.log_x));
  return 0;
}

int plot_predicted(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  const auto rows = db.compare_rows(o.method);
  if (rows.empty()) throw InputError(o.db, "", "no measured run has a " + o.method + " run of the same scenario");
  std::map<std::string, results::Series> by_hw;
  std::size_t not_finite = 0;
  for (const auto& r : rows) {
    if (!r["measured_s"].is_number() || !r["predicted_s"].is_number() ||
        !std::isfinite(r["measured_s"].get<double>()) || !std::isfinite(r["predicted_s"].get<double>())) {
      ++not_finite;
      continue;
    }
    auto& s = by_hw[text_of(r["hardware"]) + " / " + text_of(r["family"])];
    s.name = text_of(r["hardware"]) + " / " + text_of(r["family"]);
    s.points.emplace_back(r["measured_s"].get<double>(), r["predicted_s"].get<double>());
  }
  if (not_finite > 0)
    std::cerr << fmt::format("note: left out {} run(s) whose measured or predicted time is not a finite number\n",
                             not_finite);
  std::vector<results::Series> series;
  for (auto& [k, s] : by_hw) series.push_back(std::move(s));
  write_output(o.out, results::scatter_chart({"Predicted (" + o.method + ") against measured step time",
                                              "measured step time (s)", "predicted step time (s)"},
                                             series, true));
  return 0;
}

int plot_timeline(const DbOptions& o) {
  const Database db(o.db, Database::Mode::read_only);
  std::int64_t id = 0;
  try {
    id = std::stoll(o.run);
  } catch (const std::exception&) {
    throw InputError("command line", "RUN", "expected a simulated run id, got \"" + o.run + "\"");
  }
  const auto row = db.simulated_run(id);
  if (!row) throw InputError(o.db, "", fmt::format("no simulated run {}", id));
  const json result = parse_json_column((*row)["result_json"]);
  if (!result.contains("timeline") || !result["timeline"].is_array())
    throw InputError(o.db, fmt::format("run {}", id),
                     fmt::format("has no timeline (method {}; only simulated runs record one)", text_of((*row)["method"])));
  std::vector<results::TimelineBar> bars;
  const std::string where = fmt::format("run {} /timeline", id);
  for (std::size_t i = 0; i < result["timeline"].size(); ++i) {
    const auto& e = result["timeline"][i];
    if (!e.is_object() || !e.contains("gpu") || !e["gpu"].is_number_integer() || !e.contains("start_s") ||
        !e["start_s"].is_number() || !e.contains("end_s") || !e["end_s"].is_number())
      throw InputError(o.db, json_path(where, i), "expected {gpu, start_s, end_s, kind}, got " + describe(e));
    bars.push_back({e["gpu"].get<int>(), e["start_s"].get<double>(), e["end_s"].get<double>(),
                    e.contains("kind") ? text_of(e["kind"]) : "busy"});
  }
  write_output(o.out, results::gantt_chart({fmt::format("Run {}: per-GPU timeline of {}", id,
                                                        text_of((*row)["scenario_name"])),
                                            "time (s)", "GPU"},
                                           bars));
  return 0;
}

// ---- served runs (clustersim serve --db) ----

// Every served run: id, scenario name, its canonical scenario and its result, by id.
struct ServedRun {
  std::int64_t id = 0;
  std::string name;
  json scenario, result;
};

std::vector<ServedRun> served_runs(const Database& db) {
  std::vector<ServedRun> out;
  for (const auto& r : db.query("SELECT r.id, s.name, s.canonical_json, r.result_json FROM simulated_runs r"
                                " JOIN scenarios s ON s.id = r.scenario_id WHERE r.method = 'served' ORDER BY r.id")) {
    out.push_back({r["id"].get<std::int64_t>(), text_of(r["name"]), parse_json_column(r["canonical_json"]),
                   parse_json_column(r["result_json"])});
  }
  return out;
}

// "vllm, 2 x (tp 4 x pp 1)": what tells two served configurations of one scenario apart.
std::string serving_layout(const json& scenario) {
  const json& pool = scenario.value("pool", json::object());
  std::string text = fmt::format("{}, {} x (tp {} x pp {})", text_of(scenario.value("scheduler", json::object()).value("policy", json())),
                                 text_of(pool.value("replicas", json())), text_of(pool.value("tp", json())),
                                 text_of(pool.value("pp", json())));
  if (scenario.contains("prefill_pool") && scenario["prefill_pool"].is_object()) {
    const json& pre = scenario["prefill_pool"];
    text += fmt::format(" + prefill {} x (tp {} x pp {})", text_of(pre.value("replicas", json())),
                        text_of(pre.value("tp", json())), text_of(pre.value("pp", json())));
  }
  return text;
}

int plot_latency_cdf(const DbOptions& o) {
  const std::string key = o.latency + "_s";
  if (o.latency != "ttft" && o.latency != "tpot" && o.latency != "e2e")
    throw InputError("command line", "--latency", "expected ttft, tpot or e2e, got \"" + o.latency + "\"");
  const Database db(o.db, Database::Mode::read_only);
  const auto runs = served_runs(db);
  std::vector<results::Series> series;
  for (const std::int64_t id : o.runs) {
    const auto it = std::find_if(runs.begin(), runs.end(), [&](const ServedRun& r) { return r.id == id; });
    if (it == runs.end()) throw InputError(o.db, "", fmt::format("no served run {} (see 'db list': method served)", id));
    const json& q = it->result.value(key, json::object()).value("quantiles", json());
    if (!q.is_array() || q.size() < 2)
      throw InputError(o.db, fmt::format("run {} /{}/quantiles", id, key),
                       "has no latency distribution (stored by an older clustersim, or no measured request)");
    results::Series line{fmt::format("run {}: {} ({})", id, it->name, serving_layout(it->scenario)), {}};
    const double n = double(q.size() - 1);
    for (std::size_t k = 0; k < q.size(); ++k) {
      if (!q[k].is_number())
        throw InputError(o.db, fmt::format("run {} /{}/quantiles/{}", id, key, k), "expected a number, got " + q[k].dump());
      line.points.emplace_back(q[k].get<double>() * 1e3, double(k) / n);
    }
    series.push_back(std::move(line));
  }
  const char* what = o.latency == "ttft" ? "time to first token" : o.latency == "tpot" ? "time per output token"
                                                                                         : "end-to-end latency";
  write_output(o.out, results::line_chart({fmt::format("Distribution of the {} over requests", what),
                                           fmt::format("{} (ms)", what), "fraction of requests at or below"},
                                          series, o.log_x));
  return 0;
}

// A served run's figure by name: "ttft_p99" is result /ttft_s/p99; plain names are top-level.
struct ServingMetric {
  const char* name;
  const char* label;
  double scale;
};
const ServingMetric serving_metrics[] = {
    {"ttft_p50", "TTFT p50 (ms)", 1e3},       {"ttft_p90", "TTFT p90 (ms)", 1e3},
    {"ttft_p99", "TTFT p99 (ms)", 1e3},       {"ttft_mean", "TTFT mean (ms)", 1e3},
    {"tpot_p50", "TPOT p50 (ms)", 1e3},       {"tpot_p90", "TPOT p90 (ms)", 1e3},
    {"tpot_p99", "TPOT p99 (ms)", 1e3},       {"tpot_mean", "TPOT mean (ms)", 1e3},
    {"tbt_p99", "time between tokens p99 (ms)", 1e3},
    {"e2e_p50", "end-to-end p50 (s)", 1},     {"e2e_p90", "end-to-end p90 (s)", 1},
    {"e2e_p99", "end-to-end p99 (s)", 1},     {"throughput_rps", "throughput (requests/s)", 1},
    {"output_tokens_per_s", "output tokens/s", 1}, {"goodput_rps", "goodput (requests/s meeting the SLOs)", 1},
    {"slo_attainment", "SLO attainment (fraction of requests)", 1},
    {"kv_peak_use", "peak KV-cache use (fraction of blocks)", 1}, {"preemptions", "preemptions", 1},
};

std::optional<double> serving_value(const json& result, const std::string& name) {
  json v;
  const auto us = name.rfind('_');
  const std::string head = us == std::string::npos ? name : name.substr(0, us), tail = us == std::string::npos ? "" : name.substr(us + 1);
  if ((head == "ttft" || head == "tpot" || head == "tbt" || head == "e2e") && result.contains(head + "_s"))
    v = result[head + "_s"].value(tail, json());
  else v = result.value(name, json());
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

int plot_serving_load(const DbOptions& o) {
  const ServingMetric* metric = nullptr;
  std::string names;
  for (const auto& m : serving_metrics) {
    if (o.y == m.name) metric = &m;
    names += (names.empty() ? "" : ", ") + std::string(m.name);
  }
  if (!metric) throw InputError("command line", "--y", "unknown serving metric \"" + o.y + "\"; one of " + names);
  if (!o.series.empty() && o.series != "scenario" && o.series != "layout" && o.series != "policy")
    throw InputError("command line", "--series", "expected scenario, layout or policy, got \"" + o.series + "\"");
  const Database db(o.db, Database::Mode::read_only);
  // (series, offered rate) -> value of the newest run there.
  std::map<std::string, std::map<double, double>> lines;
  std::size_t traces = 0, missing = 0;
  for (const auto& r : served_runs(db)) {
    const json& w = r.scenario.value("workload", json::object());
    if (w.value("arrival", "") == "trace" || !w.contains("rate") || !w["rate"].is_number()) {
      ++traces;  // a trace's load is its own; no offered rate to put on x
      continue;
    }
    const auto y = serving_value(r.result, metric->name);
    if (!y || !std::isfinite(*y)) {
      ++missing;
      continue;
    }
    const std::string policy = text_of(r.scenario.value("scheduler", json::object()).value("policy", json()));
    const std::string name = o.series == "policy"   ? policy
                             : o.series == "layout" ? serving_layout(r.scenario)
                                                    : r.name + " (" + serving_layout(r.scenario) + ")";
    lines[name][w["rate"].get<double>()] = *y * metric->scale;
  }
  if (traces > 0) std::cerr << fmt::format("note: left out {} served run(s) replaying a trace (no offered rate)\n", traces);
  if (missing > 0) std::cerr << fmt::format("note: left out {} served run(s) without a finite {}\n", missing, metric->name);
  if (lines.empty())
    throw InputError(o.db, "", "no served run with a generated workload (store some with 'clustersim serve FILE --rate R --db DB')");
  std::vector<results::Series> series;
  for (const auto& [name, xs] : lines) series.push_back({name, {xs.begin(), xs.end()}});
  write_output(o.out, results::line_chart({fmt::format("Served runs: {} against offered load", metric->name),
                                           "offered load (requests/s)", metric->label},
                                          series, o.log_x));
  return 0;
}

const Registration db_command{
    "db", "read the results database: list, show, compare, export, plot; import measured runs",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<DbOptions>();
      sub.require_subcommand(1);
      auto with_db = [o](CLI::App* c) {
        c->add_option("--db", o->db, "results database")->capture_default_str();
        return c;
      };
      auto* list_c = with_db(sub.add_subcommand("list", "runs, newest first (measured runs are mN, measured serving runs sN)"));
      list_c->add_option("--limit", o->limit, "at most this many rows")->capture_default_str();
      list_c->add_flag("--json", o->json, "JSON rows");
      auto* show_c = with_db(sub.add_subcommand("show", "one run with its scenario, result and provenance (JSON)"));
      show_c->add_option("RUN", o->run, "run id (12), measured run id (m3) or measured serving run id (s2)")->required();
      auto* sweeps_c = with_db(sub.add_subcommand("sweeps", "sweeps with their stored and failed point counts"));
      sweeps_c->add_flag("--json", o->json, "JSON rows");
      auto* failed_c = with_db(sub.add_subcommand("failed", "the failed points of a sweep with their errors"));
      failed_c->add_option("SWEEP", o->sweep, "sweep id")->required();
      failed_c->add_flag("--json", o->json, "JSON rows");
      auto* check_c = with_db(sub.add_subcommand("check", "schema version, integrity check and row counts"));
      auto* compare_c = with_db(sub.add_subcommand("compare", "measured against predicted runs of the same scenario"));
      compare_c->add_option("--method", o->method, "which predictions (analytical, simulated...; served: measured serving runs against served runs)")->capture_default_str();
      compare_c->add_flag("--json", o->json, "JSON output");
      auto* export_c = with_db(sub.add_subcommand("export", "simulated runs as CSV or JSON"));
      export_c->add_flag("--csv", o->csv, "CSV, one row per run, sweep axes as columns");
      export_c->add_flag("--json", o->json, "JSON array of runs");
      export_c->add_option("--sweep", o->sweep, "only this sweep's runs");
      export_c->add_option("--out,-o", o->out, "output file (default: standard output)");
      auto* import_c = with_db(sub.add_subcommand("import-measured", "import measured runs (clustersim-measured-run/1, or a clustersim-measured-runs/1 list)"));
      import_c->add_option("FILE", o->files, "measured-run JSON files")->required();
      auto* import_s = with_db(sub.add_subcommand(
          "import-serving", "import measured serving runs (clustersim-serving-engine/1: a real engine replaying traces)"));
      import_s->add_option("FILE", o->files, "serving-engine JSON files (traces in the folder's serving-traces/)")
          ->required();
      import_s->add_option("--gpu", o->gpu, "GPU profile the runs ran on (clustersim gpus)")->required();
      import_s->add_option("--host", o->host,
                           "the engine's host-cost calibration (clustersim-serving-engine-host/1) for the scenarios");
      import_s->add_option("--scenarios-out", o->scenarios_out,
                           "write each run's serving scenario to this folder (clustersim serve FILE --db replays it)");
      auto* plot_c = sub.add_subcommand("plot", "SVG charts");
      plot_c->require_subcommand(1);
      auto* plot_sweep_c = with_db(plot_c->add_subcommand("sweep", "a metric against a sweep axis, one line per series"));
      plot_sweep_c->add_option("--sweep", o->sweep, "sweep id")->required();
      plot_sweep_c->add_option("--x", o->x, "axis on x (\"/plan/tp\" or \"tp\")")->required();
      plot_sweep_c->add_option("--y", o->y, "metric: iteration_time_s, tokens_per_s, samples_per_s, tflops_per_gpu, "
                                            "model_tflops_per_gpu, mfu, memory_per_gpu_bytes")
          ->capture_default_str();
      plot_sweep_c->add_option("--series", o->series, "axis giving one line per value");
      plot_sweep_c->add_option("--where", o->where, "keep points with FIELD=VALUE (repeatable)");
      plot_sweep_c->add_flag("--log-x", o->log_x, "logarithmic x axis");
      plot_sweep_c->add_option("--out,-o", o->out, "SVG file")->required();
      auto* plot_pm = with_db(plot_c->add_subcommand("predicted-vs-measured", "predicted against measured, with y = x"));
      plot_pm->add_option("--method", o->method, "which predictions")->capture_default_str();
      plot_pm->add_option("--out,-o", o->out, "SVG file")->required();
      auto* plot_tl = with_db(plot_c->add_subcommand("timeline", "per-GPU timeline (Gantt) of a simulated run"));
      plot_tl->add_option("RUN", o->run, "simulated run id")->required();
      plot_tl->add_option("--out,-o", o->out, "SVG file")->required();
      auto* plot_cdf = with_db(plot_c->add_subcommand("latency-cdf", "latency distributions of served runs (clustersim serve --db)"));
      plot_cdf->add_option("RUN", o->runs, "served run ids, one line each")->required();
      plot_cdf->add_option("--latency", o->latency, "ttft, tpot or e2e")->capture_default_str();
      plot_cdf->add_flag("--log-x", o->log_x, "logarithmic latency axis");
      plot_cdf->add_option("--out,-o", o->out, "SVG file")->required();
      auto* plot_load = with_db(plot_c->add_subcommand("serving-load", "a serving metric against offered load, over the served runs"));
      plot_load->add_option("--y", o->y, "metric: ttft_p50|p90|p99|mean, tpot_..., tbt_p99, e2e_..., throughput_rps, "
                                          "output_tokens_per_s, goodput_rps, slo_attainment, kv_peak_use, preemptions")
          ->required();
      plot_load->add_option("--series", o->series, "one line per scenario (default), layout or policy");
      plot_load->add_flag("--log-x", o->log_x, "logarithmic load axis");
      plot_load->add_option("--out,-o", o->out, "SVG file")->required();
      return [=]() -> int {
        if (list_c->parsed()) return list(*o);
        if (show_c->parsed()) return show(*o);
        if (sweeps_c->parsed()) return sweeps(*o);
        if (failed_c->parsed()) return failed(*o);
        if (check_c->parsed()) return check(*o);
        if (compare_c->parsed()) return compare(*o);
        if (export_c->parsed()) return export_runs(*o);
        if (import_c->parsed()) return import_measured(*o);
        if (import_s->parsed()) return import_serving(*o);
        if (plot_sweep_c->parsed()) return plot_sweep(*o);
        if (plot_pm->parsed()) return plot_predicted(*o);
        if (plot_tl->parsed()) return plot_timeline(*o);
        if (plot_cdf->parsed()) return plot_latency_cdf(*o);
        if (plot_load->parsed()) return plot_serving_load(*o);
        return 2;
      };
    }};

}  // namespace
}  // namespace clustersim::cli

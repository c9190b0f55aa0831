#include "runner/compare.hpp"

#include <cmath>
#include <optional>
#include <fmt/format.h>

#include "results/store.hpp"

namespace clustersim::runner {
namespace {

using nlohmann::json;

// A group's name from a column (a missing value is "-").
std::string label_of(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

}  // namespace

void ErrorSummary::add(double e) {
  ++n, sum_abs += std::abs(e), sum += e;
  if (std::abs(e) > std::abs(worst)) worst = e;
}

json ErrorSummary::to_json() const { return {{"runs", n}, {"mape", mape()}, {"bias", bias()}, {"worst", worst}}; }

json Comparison::to_json() const {
  json g = json::array();
  for (const auto& [k, s] : groups) {
    auto j = s.to_json();
    j["hardware"] = k.first;
    j["family"] = k.second;
    g.push_back(j);
  }
  return {{"method", method}, {"pairs", pairs}, {"groups", g}, {"overall", overall.to_json()},
          {"coverage", coverage.to_json()}};
}

json Coverage::to_json() const {
  return {{"runs", runs}, {"inside", inside}, {"share", share()}, {"stated", stated}};
}

Comparison compare_with_measured(const std::string& db_file, const std::string& method) {
  const results::Database db(db_file, results::Database::Mode::read_only);
  Comparison c;
  c.method = method;
  for (const auto& r : db.compare_rows(method)) {
    const double measured = r["measured_s"].get<double>(), predicted = r["predicted_s"].get<double>();
    const double err = (predicted - measured) / measured;
    c.overall.add(err);
    c.groups[{label_of(r["hardware"]), label_of(r["family"])}].add(err);
    json p = r;
    p["error"] = err;
    if (r["measured_memory_bytes"].is_number() && r["predicted_memory_bytes"].is_number())
      p["memory_error"] = (r["predicted_memory_bytes"].get<double>() - r["measured_memory_bytes"].get<double>()) /
                          r["measured_memory_bytes"].get<double>();
    if (r["interval_low_s"].is_number() && r["interval_high_s"].is_number() && r["interval_confidence"].is_number() &&
        r["interval_confidence"].get<double>() > 0) {
      const bool inside = measured >= r["interval_low_s"].get<double>() && measured <= r["interval_high_s"].get<double>();
      p["inside_interval"] = inside;
      const double n = double(++c.coverage.runs);
      c.coverage.inside += inside;
      c.coverage.stated += (r["interval_confidence"].get<double>() - c.coverage.stated) / n;
    }
    c.pairs.push_back(p);
  }
  return c;
}

namespace {
// A figure of a summary in the served runs' JSON: "ttft_p90" is /ttft_s/p90, plain names are top-level.
std::optional<double> serving_figure(const json& summary, const std::string& name) {
  const auto us = name.rfind('_');
  const json* v = nullptr;
  if (summary.contains(name)) {
    v = &summary[name];
  } else if (us != std::string::npos) {
    const std::string metric = name.substr(0, us) + "_s", q = name.substr(us + 1);
    if (summary.contains(metric) && summary[metric].is_object() && summary[metric].contains(q)) v = &summary[metric][q];
  }
  if (!v || !v->is_number()) return std::nullopt;
  return v->get<double>();
}
}  // namespace

json ServingComparison::to_json() const {
  json f = json::object();
  for (const auto& [k, s] : figures) f[k] = s.to_json();
  return {{"method", "served"}, {"pairs", pairs}, {"figures", f}, {"unpaired", unpaired}};
}

ServingComparison compare_serving(const std::string& db_file) {
  const results::Database db(db_file, results::Database::Mode::read_only);
  ServingComparison c;
  if (db.version() < 2) return c;  // a read-only database from before measured serving runs: none stored
  const auto rows = db.serving_compare_rows();
  c.unpaired = std::size_t(db.count("measured_serving_runs")) - rows.size();
  for (const auto& r : rows) {
    const json measured = json::parse(r["measured_json"].get<std::string>());
    const json served = json::parse(r["served_json"].get<std::string>());
    json p = {{"measured_id", r["measured_id"]}, {"served_id", r["served_id"]},   {"scenario", r["scenario"]},
              {"scenario_hash", r["scenario_hash"]}, {"hardware", r["hardware"]}, {"measured_name", r["measured_name"]},
              {"measured_file", r["measured_file"]}, {"figures", json::object()}};
    for (const char* name : serving_figures) {
      const auto m = serving_figure(measured, name), s = serving_figure(served, name);
      if (!m || !s || *m <= 0) continue;  // a figure one side lacks, or zero (one-token outputs: no TPOT)
      const double err = (*s - *m) / *m;
      p["figures"][name] = {{"measured", *m}, {"served", *s}, {"error", err}};
      c.figures[name].add(err);
    }
    c.pairs.push_back(p);
  }
  return c;
}

}  // namespace clustersim::runner

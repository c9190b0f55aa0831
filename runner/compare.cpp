#include "runner/compare.hpp"

#include <cmath>
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

}  // namespace clustersim::runner

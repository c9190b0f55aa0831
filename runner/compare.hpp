// Error statistics of predictions against measurements (`db compare`): every measured
// run paired with the latest prediction of one method for the same scenario, its
// relative error (predicted - measured) / measured, and the mean absolute percentage
// error, bias and worst error per (hardware, family) and over all runs.
#pragma once
#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace clustersim::runner {

struct ErrorSummary {
  std::size_t n = 0;
  double sum_abs = 0, sum = 0;
  double worst = 0;  // the error of largest magnitude, with its sign
  void add(double error);
  double mape() const { return n ? sum_abs / n : 0.0; }  // mean |error|, a fraction
  double bias() const { return n ? sum / n : 0.0; }      // mean error, a fraction
  nlohmann::json to_json() const;                         // {runs, mape, bias, worst}
};

// How many measured runs fall inside the prediction interval their prediction carried
// (strategies/uncertainty), against the confidence the intervals stated.
struct Coverage {
  std::size_t runs = 0, inside = 0;  // runs whose prediction has an interval
  double stated = 0;                 // mean stated confidence over those runs
  double share() const { return runs ? double(inside) / double(runs) : 0.0; }
  nlohmann::json to_json() const;    // {runs, inside, share, stated}
};

struct Comparison {
  std::string method;
  Coverage coverage;
  // The database's comparison rows, each with "error" (step time) and, where both
  // sides know the peak memory, "memory_error".
  nlohmann::json pairs = nlohmann::json::array();
  std::map<std::pair<std::string, std::string>, ErrorSummary> groups;  // (hardware, family), sorted
  ErrorSummary overall;
  // {"method", "pairs", "groups": [{runs, mape, bias, worst, hardware, family}], "overall", "coverage"}
  nlohmann::json to_json() const;
};

// Reads `db_file` (which must exist). Throws InputError when it is not a database.
Comparison compare_with_measured(const std::string& db_file, const std::string& method);

// Measured serving runs (`db import-serving`) against the latest served run of the same
// scenario (`clustersim serve --db`): the relative error (served - measured) / measured of
// each figure of serving_figures, per pair and summarised per figure.
inline constexpr const char* serving_figures[] = {"ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90",
                                                  "e2e_p50",  "e2e_p90",  "e2e_p99",  "throughput_rps"};
struct ServingComparison {
  // {measured_id, served_id, scenario, scenario_hash, hardware, measured_name, measured_file,
  //  figures: {name: {measured, served, error}}} by measured run id.
  nlohmann::json pairs = nlohmann::json::array();
  std::map<std::string, ErrorSummary> figures;  // by figure name
  std::size_t unpaired = 0;                     // measured serving runs without a served run
  nlohmann::json to_json() const;               // {"method": "served", "pairs", "figures": {name: summary}, "unpaired"}
};
ServingComparison compare_serving(const std::string& db_file);

}  // namespace clustersim::runner

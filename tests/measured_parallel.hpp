// The measured multi-GPU runs (calibration/data/*/measured-parallel-*.json) as scenarios,
// for the estimator's and the simulator's accuracy tests.
#pragma once
#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "scenarios/json_reader.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim::test {
using nlohmann::json;

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline std::vector<std::string> measured_parallel_files(const std::string& root) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root + "/calibration/data"))
    if (e.is_regular_file() && e.path().filename().string().rfind("measured-parallel-", 0) == 0 &&
        e.path().extension() == ".json")
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());  // deterministic order
  return files;
}

// The scenario a measured run describes: its own model, training (with the framework),
// cluster and plan; SDPA flash attention, no dropout.
inline Scenario scenario_of(const json& run) {
  const json& sc = run.at("scenario");
  json doc = parse_json_text(default_scenario_text(), "<measured run>");
  doc["name"] = run.at("name");
  doc["model"] = sc.at("model");
  doc["model"]["attention"] = "flash";
  doc["model"]["dropout"] = 0.0;
  // The one-GPU smoke file predates the recorded tie_embeddings.
  if (!sc["model"].contains("tie_embeddings"))
    doc["model"]["tie_embeddings"] = sc["model"]["family"] == "gpt" && !run.at("environment").contains("tp");
  doc["training"] = sc.at("training");
  doc["cluster"] = sc.at("cluster");
  doc["plan"] = sc.at("plan");
  Diagnostics diag(run.at("name").get<std::string>());
  Scenario s = parse_scenario(doc, diag);
  std::string problems;
  for (const auto& p : diag.problems()) problems += p.to_string() + "\n";
  INFO(problems);
  REQUIRE(diag.ok());
  return s;
}

}  // namespace clustersim::test

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
#include "strategies/validation.hpp"

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

// The scenario a measured run describes (strategies/validation's rule).
inline Scenario scenario_of(const json& run) { return measured_run_scenario(run); }

}  // namespace clustersim::test

// Seeded random mutations of the shipped scenarios (wrong types, extreme numbers,
// missing and unknown keys), shared by the estimator's and the simulator's fuzz tests.
// CLUSTERSIM_FUZZ_CASES scales the case counts for a longer run (README, Tests).
#pragma once
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "scenarios/json_reader.hpp"

namespace clustersim::test {

inline void json_leaves(const nlohmann::json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) json_leaves(v, path + "/" + k, out);
    out.push_back(path);  // objects can be replaced or removed too
  } else {
    out.push_back(path);
  }
}

inline nlohmann::json random_value(std::mt19937_64& rng) {
  const std::int64_t extremes[] = {-1, 0, 1, 2, 3, 7, 1000, 65536, std::int64_t{1} << 31, std::int64_t{1} << 40,
                                   INT64_MAX, INT64_MIN};
  switch (rng() % 9) {
    case 0: return extremes[rng() % std::size(extremes)];
    case 1: return static_cast<std::int64_t>(rng() % 4096);
    case 2: return 1e308;
    case 3: return -0.5;
    case 4: return "12GBps";
    case 5: return std::string(1 + rng() % 5, 'x');
    case 6: return nullptr;
    case 7: return nlohmann::json::array({1, 2});
    default: return nlohmann::json::object({{"bogus", 1}});
  }
}

inline std::vector<nlohmann::json> shipped_scenarios() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(CLUSTERSIM_SOURCE_DIR) / "data" / "scenarios"))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());  // the same seeds on every file system
  std::vector<nlohmann::json> seeds;
  // Serving scenarios (data/scenarios/serving/, a "serving" key) have their own schema
  // and their own tests (tests/sim/test_serve.cpp).
  for (const auto& f : files) {
    auto doc = read_json_file(f);
    if (!doc.contains("serving")) seeds.push_back(std::move(doc));
  }
  return seeds;
}

// One to three mutations of a random seed.
inline nlohmann::json mutate(const std::vector<nlohmann::json>& seeds, std::mt19937_64& rng) {
  nlohmann::json doc = seeds[rng() % seeds.size()];
  const int mutations = 1 + static_cast<int>(rng() % 3);
  for (int k = 0; k < mutations; ++k) {
    std::vector<std::string> paths;
    json_leaves(doc, "", paths);
    const std::string path = paths[rng() % paths.size()];
    if (path.empty()) continue;
    const nlohmann::json::json_pointer ptr(path);
    if (rng() % 4 == 0) {
      nlohmann::json& parent = doc[ptr.parent_pointer()];
      if (parent.is_object()) parent.erase(ptr.back());
    } else {
      doc[ptr] = random_value(rng);
    }
  }
  return doc;
}

inline int fuzz_cases(int default_cases) {
  const char* v = std::getenv("CLUSTERSIM_FUZZ_CASES");
  const long n = v ? std::strtol(v, nullptr, 10) : 0;
  return n > 0 ? int(n) : default_cases;
}

// Every number of a command's output JSON is finite, and non-negative where it is a
// time, size, rate or count (all of a prediction's). Returns the first bad path, or "".
inline std::string first_bad_number(const nlohmann::json& j, const std::string& path = "") {
  if (j.is_number()) {
    const double x = j.get<double>();
    if (!std::isfinite(x) || x < 0) return path + " = " + j.dump();
    return "";
  }
  if (j.is_object())
    for (const auto& [k, v] : j.items())
      if (auto bad = first_bad_number(v, path + "/" + k); !bad.empty()) return bad;
  if (j.is_array())
    for (std::size_t i = 0; i < j.size(); ++i)
      if (auto bad = first_bad_number(j[i], path + "/" + std::to_string(i)); !bad.empty()) return bad;
  return "";
}

}  // namespace clustersim::test

// Every scenario under data/scenarios/ is a test: it must validate, run, and reproduce its
// key figures in tests/expected/scenario_figures.json (SimGrid's tesh habit: any
// change of a prediction shows up in review). After an intended model change:
//   CLUSTERSIM_UPDATE_EXPECTED=1 ctest --test-dir build -R shipped
// rewrites the file; commit it with the change that explains it.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
namespace fs = std::filesystem;

namespace {
std::vector<std::string> shipped_scenarios(const fs::path& root) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root / "data" / "scenarios"))
    if (entry.path().extension() == ".json" && !read_json_file(entry.path().string()).contains("serving"))
      files.push_back(fs::relative(entry.path(), root).generic_string());
  // Serving scenarios ("serving" key, data/scenarios/serving/) are run by tests/sim/test_serve.cpp.
  std::sort(files.begin(), files.end());
  return files;
}

nlohmann::json key_figures(const Prediction& e) {
  return {{"iteration_time_s", e.iteration_time}, {"tflops_per_gpu", e.tflops_per_gpu},
          {"memory_per_gpu_bytes", e.memory_per_gpu}, {"fits", e.fits}};
}
}  // namespace

TEST_CASE("every shipped scenario runs and reproduces its key figures", "[scenarios][shipped]") {
  const fs::path root = CLUSTERSIM_SOURCE_DIR;
  const fs::path expected_file = root / "tests/expected/scenario_figures.json";
  const bool update = std::getenv("CLUSTERSIM_UPDATE_EXPECTED") != nullptr;
  nlohmann::json expected = fs::exists(expected_file) ? read_json_file(expected_file.string()) : nlohmann::json::object();
  nlohmann::json actual = nlohmann::json::object();
  const auto files = shipped_scenarios(root);
  REQUIRE(files.size() >= 11);
  for (const auto& rel : files) {
    INFO(rel);
    const Scenario s = load_scenario((root / rel).string());
    const Prediction e = make_estimator(s).estimate(s.plan);
    actual[rel] = key_figures(e);
    if (update) continue;
    REQUIRE(expected.contains(rel));
    const auto& x = expected[rel];
    std::printf("%-48s expected %.6g s, estimated %.6g s\n", rel.c_str(), x["iteration_time_s"].get<double>(),
                e.iteration_time);
    CHECK(e.iteration_time == Approx(x["iteration_time_s"].get<double>()).epsilon(1e-9));
    CHECK(e.tflops_per_gpu == Approx(x["tflops_per_gpu"].get<double>()).epsilon(1e-9));
    CHECK(e.memory_per_gpu == Approx(x["memory_per_gpu_bytes"].get<double>()).epsilon(1e-9));
    CHECK(e.fits == x["fits"].get<bool>());
  }
  if (update) {
    std::ofstream(expected_file) << actual.dump(2) << '\n';
    WARN("rewrote " << expected_file.string());
  } else {
    // No stale entries for scenarios that were removed or renamed.
    CHECK(expected.size() == actual.size());
  }
}

// Bad input never crashes or hangs: thousands of deterministic random mutations of the
// shipped scenarios (wrong types, extreme numbers, missing and unknown keys) either
// fail validation with an InputError or estimate to finite figures.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {

void leaves(const json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) leaves(v, path + "/" + k, out);
    out.push_back(path);  // objects can be replaced or removed too
  } else {
    out.push_back(path);
  }
}

json random_value(std::mt19937_64& rng) {
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
    case 7: return json::array({1, 2});
    default: return json::object({{"bogus", 1}});
  }
}

}  // namespace

TEST_CASE("random mutations of scenarios never crash", "[fuzz][scenario]") {
  namespace fs = std::filesystem;
  std::vector<json> seeds;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(CLUSTERSIM_SOURCE_DIR) / "data" / "scenarios"))
    if (entry.path().extension() == ".json") seeds.push_back(read_json_file(entry.path().string()));
  REQUIRE(!seeds.empty());
  std::mt19937_64 rng(20261126);
  int rejected = 0, estimated = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    json doc = seeds[rng() % seeds.size()];
    const int mutations = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < mutations; ++k) {
      std::vector<std::string> paths;
      leaves(doc, "", paths);
      const std::string path = paths[rng() % paths.size()];
      if (path.empty()) continue;
      const json::json_pointer ptr(path);
      if (rng() % 4 == 0) {
        json& parent = doc[ptr.parent_pointer()];
        if (parent.is_object()) parent.erase(ptr.back());
      } else {
        doc[ptr] = random_value(rng);
      }
    }
    INFO(doc.dump());
    try {
      Diagnostics diag("<fuzz>");
      const Scenario s = parse_scenario(doc, diag);
      diag.throw_if_errors();
      const Prediction e = make_estimator(s).estimate(s.plan);
      CHECK(std::isfinite(e.iteration_time));
      CHECK(e.iteration_time > 0);
      CHECK(std::isfinite(e.memory_per_gpu));
      ++estimated;
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("<fuzz>") != std::string::npos);
      ++rejected;
    }
  }
  std::printf("\nfuzz: %d mutated scenarios rejected with a message, %d estimated\n", rejected, estimated);
  CHECK(rejected > 100);
  CHECK(estimated > 100);
}

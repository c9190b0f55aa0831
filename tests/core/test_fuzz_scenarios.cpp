// Bad input never crashes or hangs: thousands of deterministic random mutations of the
// shipped scenarios (wrong types, extreme numbers, missing and unknown keys) either
// fail validation with an InputError or estimate to finite figures.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "tests/scenario_mutator.hpp"

using namespace clustersim;
using nlohmann::json;

TEST_CASE("random mutations of scenarios never crash", "[fuzz][scenario]") {
  const std::vector<json> seeds = test::shipped_scenarios();
  REQUIRE(!seeds.empty());
  std::mt19937_64 rng(20261126);
  int rejected = 0, estimated = 0;
  const int cases = test::fuzz_cases(3000);
  for (int iter = 0; iter < cases; ++iter) {
    const json doc = test::mutate(seeds, rng);
    INFO(doc.dump());
    try {
      Diagnostics diag("<fuzz>");
      const Scenario s = parse_scenario(doc, diag);
      diag.throw_if_errors();
      const Prediction e = make_estimator(s).estimate(s.plan);
      CHECK(std::isfinite(e.iteration_time));
      CHECK(e.iteration_time > 0);
      CHECK(std::isfinite(e.memory_per_gpu));
      // Every number run --json prints is finite and non-negative.
      const std::string bad = test::first_bad_number(to_json(e));
      CHECK(bad == "");
      ++estimated;
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("<fuzz>") != std::string::npos);
      ++rejected;
    }
  }
  std::printf("\nfuzz: %d mutated scenarios rejected with a message, %d estimated\n", rejected, estimated);
  CHECK(rejected > cases / 30);
  CHECK(estimated > cases / 30);
}

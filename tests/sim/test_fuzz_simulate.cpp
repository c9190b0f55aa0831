// The simulator on mutated scenarios (tests/scenario_mutator.hpp): it accepts exactly what
// the estimator accepts, and every number it prints is finite and non-negative. Scenarios
// too large to replay quickly (more than 64 GPUs or 256 micro-batches) are only checked
// for agreement on validity through the estimator's refusal.
#include <catch2/catch.hpp>
#include <cstdio>
#include <random>

#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "tests/scenario_mutator.hpp"

using namespace clustersim;
using nlohmann::json;

TEST_CASE("random mutations: simulate accepts what run accepts, with finite outputs", "[fuzz][sim]") {
  const std::vector<json> seeds = test::shipped_scenarios();
  std::mt19937_64 rng(20261127);
  int both_rejected = 0, both_ran = 0, too_large = 0;
  const int cases = test::fuzz_cases(300);
  for (int iter = 0; iter < cases; ++iter) {
    const json doc = test::mutate(seeds, rng);
    INFO(doc.dump());
    bool parsed = false, run_ok = false;
    Scenario s;
    Prediction e;
    try {
      Diagnostics diag("<fuzz>");
      s = parse_scenario(doc, diag);
      diag.throw_if_errors();
      parsed = true;
      e = make_estimator(s).estimate(s.plan);
      run_ok = true;
    } catch (const InputError&) {
    }
    if (!parsed) {
      ++both_rejected;
      continue;
    }
    if (run_ok && (s.cluster.total_gpus() > 64 || e.micro_batches > 256)) {
      ++too_large;
      continue;
    }
    bool sim_ok = false;
    std::string why;
    try {
      const auto r = sim::simulate(s);
      sim_ok = true;
      const std::string bad = test::first_bad_number(to_json(r.prediction));
      CHECK(bad == "");
      CHECK(r.prediction.iteration_time > 0);
    } catch (const InputError& x) {
      why = x.what();
    }
    INFO("run " << (run_ok ? "accepted" : "refused") << ", simulate " << (sim_ok ? "accepted" : "refused: " + why));
    CHECK(sim_ok == run_ok);
    if (!run_ok) {
      ++both_rejected;
      continue;
    }
    both_ran += sim_ok;
  }
  std::printf("\nfuzz (simulate): %d rejected by both, %d run and simulated, %d too large to replay here\n",
              both_rejected, both_ran, too_large);
  CHECK(both_ran > cases / 40);
}

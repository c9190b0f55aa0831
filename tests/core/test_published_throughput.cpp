// Accuracy on GPUs nobody here can measure: published end-to-end training throughput
// (data/published/training-throughput.json, each row with its source) against the
// estimator on the transferred V100 and A100 profiles. Prints predicted beside
// published per row and the mean absolute error per GPU generation.
//
// The goal is 10% per generation; it is not met. Today (see the printed table) OPT-175B
// is 11% optimistic, MT-NLG 530B (Megatron-DeepSpeed's pipeline) 41-47% and the V100 rows
// of Megatron-LM 2019 44-76% (counting recompute FLOPs; the paper does not say whether it
// does). The bounds below stop regressions while the goal is open.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "strategies/validation.hpp"

using namespace clustersim;

TEST_CASE("published training throughput on transferred V100 and A100 profiles", "[accuracy][published]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto table = read_json_file(root + "/data/published/training-throughput.json");
  std::map<std::string, std::string> generation;
  for (const auto& row : table.at("rows")) generation[row.at("id")] = row.at("generation");
  std::map<std::string, std::pair<double, int>> by_generation;  // sum of |error|, rows
  std::printf("\n%-36s %-15s %12s %12s %8s\n", "row", "gpu", "real s", "predicted s", "error");
  for (const ValidationCase& c : validation_cases(root)) {
    if (c.dataset != "published") continue;
    const Prediction p = make_estimator(c.scenario).estimate(c.scenario.plan);
    REQUIRE(p.fits);
    REQUIRE(std::isfinite(p.iteration_time));
    // + means the real run is slower: the prediction is optimistic.
    const double error = relative_residual(c, p);
    std::printf("%-36s %-15s %12.3f %12.3f %+7.1f%%\n", c.id.c_str(), c.scenario.cluster.gpu.c_str(),
                real_step_time(c, p), p.iteration_time, 100 * error);
    auto& g = by_generation[generation.at(c.id)];
    g.first += std::fabs(error);
    ++g.second;
  }
  for (const auto& [gen, acc] : by_generation)
    std::printf("%-8s mean absolute error %.1f%% over %d rows (goal 10%%; + is optimistic)\n", gen.c_str(),
                100 * acc.first / acc.second, acc.second);
  REQUIRE(by_generation.count("ampere"));
  REQUIRE(by_generation.count("volta"));
  const auto mae = [&](const char* g) { return by_generation[g].first / by_generation[g].second; };
  CHECK(mae("ampere") <= 0.40);
  CHECK(mae("volta") <= 0.70);
}

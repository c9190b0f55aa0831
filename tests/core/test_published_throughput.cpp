// Accuracy against published end-to-end training throughput (data/published/
// training-throughput.json, each row with its source): V100 and A100 (transferred
// profiles), H100 (calibrated), B200 and GB200 (transferred). Prints predicted beside
// published per row and the mean absolute error per GPU generation.
//
// Rows of NeMo's and Megatron-Bridge's tables (H100, B200, GB200) are FP8 runs, predicted
// with mixed-fp8. The goal is 10% per generation; it is not met everywhere. Today (see the printed table) OPT-175B
// is 11% optimistic, MT-NLG 530B (Megatron-DeepSpeed's pipeline) 41-47% and the V100 rows
// of Megatron-LM 2019 44-76% (counting recompute FLOPs; the paper does not say whether it
// does), and DeepSeek-V3 on 2,048 H800s about 33% pessimistic (1F1B instead of DualPipe
// leaves the expert all-to-all exposed; README, "Calibration on real GPUs"). The bounds below
// stop regressions while the goal is open.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <map>
#include <vector>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "strategies/validation.hpp"

using namespace clustersim;

TEST_CASE("published training throughput against the transferred and calibrated profiles", "[accuracy][published]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto table = read_json_file(root + "/data/published/training-throughput.json");
  std::map<std::string, std::string> generation;
  for (const auto& row : table.at("rows")) generation[row.at("id")] = row.at("generation");
  std::map<std::string, std::vector<double>> by_generation;  // |error| per row
  int not_fitting = 0;
  std::printf("\n%-36s %-15s %12s %12s %8s %s\n", "row", "gpu", "real s", "predicted s", "error", "fits");
  for (const ValidationCase& c : validation_cases(root)) {
    if (c.dataset != "published") continue;
    const Prediction p = make_estimator(c.scenario).estimate(c.scenario.plan);
    REQUIRE(std::isfinite(p.iteration_time));
    // + means the real run is slower: the prediction is optimistic.
    const double error = relative_residual(c, p);
    std::printf("%-36s %-15s %12.3f %12.3f %+7.1f%% %s\n", c.id.c_str(), c.scenario.cluster.gpu.c_str(),
                real_step_time(c, p), p.iteration_time, 100 * error, p.fits ? "yes" : "NO (the real run fit)");
    by_generation[generation.at(c.id)].push_back(std::fabs(error));
    not_fitting += !p.fits;
  }
  std::map<std::string, double> mae;
  for (auto& [gen, e] : by_generation) {
    double sum = 0;
    for (double x : e) sum += x;
    mae[gen] = sum / double(e.size());
    std::sort(e.begin(), e.end());
    std::printf("%-10s mean absolute error %5.1f%%, median %5.1f%% over %zu rows (goal 10%%; + is optimistic)\n",
                gen.c_str(), 100 * mae[gen], 100 * e[e.size() / 2], e.size());
  }
  std::printf("%d rows do not fit in the predicted memory though the real run did (assumed recompute or memory model)\n",
              not_fitting);
  REQUIRE(mae.count("volta"));
  REQUIRE(mae.count("ampere"));
  REQUIRE(mae.count("hopper"));
  REQUIRE(mae.count("blackwell"));
  CHECK(mae["volta"] <= 0.70);
  CHECK(mae["ampere"] <= 0.40);
  CHECK(mae["hopper"] <= 0.15);
  CHECK(mae["blackwell"] <= 0.25);
}

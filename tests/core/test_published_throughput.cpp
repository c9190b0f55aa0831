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

using namespace clustersim;

namespace {
// The published figure as a per-GPU TFLOP/s or a step time, and what we predict for it.
struct Compared {
  std::string what;
  double published = 0, predicted = 0;
};

Compared compare(const nlohmann::json& row, const Scenario& s, const Prediction& p) {
  const auto& m = row.at("metric");
  // Hardware FLOP/s (recompute counted), as Megatron-LM and MT-NLG count them.
  const double tflops = p.hardware_flops / p.iteration_time / double(s.cluster.total_gpus()) / 1e12;
  if (m.contains("step_time_s")) return {"step time (s)", m.at("step_time_s").get<double>(), p.iteration_time};
  if (m.contains("weak_scaling_efficiency")) {
    // Per-GPU rate relative to the paper's 39 TFLOP/s one-GPU baseline.
    const std::string pct = m.at("weak_scaling_efficiency").get<std::string>();
    return {"TFLOP/s per GPU (weak scaling x 39)", 39.0 * std::stod(pct) / 100.0, tflops};
  }
  const auto& t = m.at("tflops_per_gpu");
  double published = 0;
  if (t.is_number()) published = t.get<double>();
  else published = std::stod(t.get<std::string>().substr(t.get<std::string>().find_first_of("0123456789")));
  return {"TFLOP/s per GPU", published, tflops};
}
}  // namespace

TEST_CASE("published training throughput on transferred V100 and A100 profiles", "[accuracy][published]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto table = read_json_file(root + "/data/published/training-throughput.json");
  std::map<std::string, std::pair<double, int>> by_generation;  // sum of |error|, rows
  std::printf("\n%-36s %-15s %-36s %10s %10s %8s\n", "row", "gpu", "metric", "published", "predicted", "error");
  for (const auto& row : table.at("rows")) {
    if (!row.contains("scenario") || !row.at("scenario").is_string()) continue;
    const std::string scenario = row.at("scenario").get<std::string>();
    if (scenario.rfind("data/scenarios/", 0) != 0) continue;  // not shipped (FP8 rows)
    const Scenario s = load_scenario(root + "/" + scenario);
    const Prediction p = make_estimator(s).estimate(s.plan);
    REQUIRE(p.fits);
    REQUIRE(std::isfinite(p.iteration_time));
    const Compared c = compare(row, s, p);
    // Signed so that + means predicted faster than published.
    const bool time = c.what.rfind("step", 0) == 0;
    const double error = time ? c.published / c.predicted - 1 : c.predicted / c.published - 1;
    std::printf("%-36s %-15s %-36s %10.1f %10.1f %+7.1f%%\n", row.at("id").get<std::string>().c_str(),
                s.cluster.gpu.c_str(), c.what.c_str(), c.published, c.predicted, 100 * error);
    auto& g = by_generation[row.at("generation").get<std::string>()];
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

// Prediction intervals (strategies/uncertainty): the order-statistic interval against its
// closed form, the borrowing order, and the built-in table's honesty measured by leaving
// each validation run out of its own interval.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <map>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "strategies/uncertainty.hpp"
#include "strategies/validation.hpp"

using namespace clustersim;

namespace {
std::vector<double> steps(int n, double from, double step) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(from + step * i);
  return v;
}
}  // namespace

TEST_CASE("uncertainty: the interval is the k-th smallest and largest residual, confidence (n+1-2k)/(n+1)",
          "[uncertainty]") {
  UncertaintyTable t;
  t.residuals["calibrated/one-gpu/analytical"] = steps(19, -0.09, 0.01);  // -9% .. +9%
  t.residuals["calibrated/one-node/analytical"] = steps(39, -0.19, 0.01);
  const Regime one = regime_of("calibrated", 1, 8, "analytical");
  const Interval a = prediction_interval(2.0, one, t);
  // n = 19: k = max(1, floor(20 x 0.05)) = 1: [2 x 0.91, 2 x 1.09], confidence 18/20.
  std::printf("n=19: expected [%.4f, %.4f] at %.3f, computed [%.4f, %.4f] at %.3f\n", 1.82, 2.18, 0.9, a.low, a.high,
              a.confidence);
  CHECK(a.low == Approx(1.82));
  CHECK(a.high == Approx(2.18));
  CHECK(a.confidence == Approx(18.0 / 20));
  CHECK(a.samples == 19);
  CHECK(a.basis == "calibrated/one-gpu/analytical");
  // n = 39: k = 2: the second smallest (-0.18) and second largest (+0.18), 36/40.
  const Interval b = prediction_interval(1.0, regime_of("calibrated", 4, 8, "analytical"), t);
  std::printf("n=39: expected [%.4f, %.4f] at %.3f, computed [%.4f, %.4f] at %.3f\n", 0.82, 1.18, 0.9, b.low, b.high,
              b.confidence);
  CHECK(b.low == Approx(0.82));
  CHECK(b.high == Approx(1.18));
  CHECK(b.confidence == Approx(0.9));
}

TEST_CASE("uncertainty: a regime with few residuals borrows, and says from where", "[uncertainty]") {
  UncertaintyTable t;
  t.residuals["transferred/many-nodes/analytical"] = steps(10, 0.0, 0.05);
  t.residuals["transferred/one-gpu/analytical"] = {0.6};
  t.residuals["calibrated/one-gpu/analytical"] = steps(9, -0.04, 0.01);
  // One residual of its own: the same status at any scale (11 residuals).
  const Interval i = prediction_interval(1.0, regime_of("transferred", 1, 8, "analytical"), t);
  CHECK(i.regime == "transferred/one-gpu/analytical");
  CHECK(i.basis == "transferred/*");
  CHECK(i.samples == 11);
  CHECK(i.high == Approx(1.6));
  // Simulated, many nodes: none of its own; the analytical residuals of its scale.
  const Interval s = prediction_interval(1.0, regime_of("transferred", 64, 8, "simulated"), t);
  CHECK(s.basis == "transferred/many-nodes/*");
  CHECK(s.samples == 10);
  // A datasheet profile has no validation of its own: it takes the transferred sets.
  const Interval d = prediction_interval(1.0, regime_of("datasheet", 64, 8, "analytical"), t);
  CHECK(d.regime == "datasheet/many-nodes/analytical");
  CHECK_THAT(d.basis, Catch::Contains("transferred/many-nodes/analytical") && Catch::Contains("borrowed"));
  // Nothing finite to scale: no interval.
  CHECK_FALSE(prediction_interval(std::nan(""), regime_of("calibrated", 1, 8, "analytical"), t).present());
  CHECK_FALSE(prediction_interval(1.0, regime_of("calibrated", 1, 8, "analytical"), UncertaintyTable{}).present());
}

TEST_CASE("uncertainty: every estimate carries an interval from the built-in table", "[uncertainty]") {
  const Scenario s = load_scenario(std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/default.json");
  const Prediction p = make_estimator(s).estimate(s.plan);
  REQUIRE(p.interval.present());
  std::printf("default scenario: %.3f s, interval [%.3f, %.3f] s at %.0f%% (%s, %d runs)\n", p.iteration_time,
              p.interval.low, p.interval.high, 100 * p.interval.confidence, p.interval.basis.c_str(),
              p.interval.samples);
  CHECK(p.interval.regime == "transferred/many-nodes/analytical");
  CHECK(p.interval.low <= p.interval.high);
  CHECK(p.interval.confidence > 0.8);
}

TEST_CASE("uncertainty: leaving each validation run out, the share inside its interval", "[uncertainty][accuracy]") {
  // The honest coverage: each run's residual against the interval the other runs give.
  const auto doc = read_json_file(std::string(CLUSTERSIM_SOURCE_DIR) + "/data/uncertainty.json");
  const UncertaintyTable table = uncertainty_from_json(doc);
  std::map<std::string, std::pair<int, int>> by_regime;  // inside, runs
  double stated = 0;
  int inside = 0, runs = 0;
  for (const auto& c : doc.at("cases")) {
    const std::string key = c.at("regime");
    const double r = c.at("residual");
    UncertaintyTable others = table;
    auto& v = others.residuals.at(key);
    v.erase(std::find(v.begin(), v.end(), r));
    const auto parts = [&] {
      Regime g;
      const auto a = key.find('/'), b = key.rfind('/');
      g.gpu_status = key.substr(0, a);
      const std::string scale = key.substr(a + 1, b - a - 1);
      g.scale = scale == "one-gpu" ? Scale::one_gpu : scale == "one-node" ? Scale::one_node : Scale::many_nodes;
      g.method = key.substr(b + 1);
      return g;
    }();
    const Interval i = prediction_interval(1.0, parts, others);
    if (!i.present()) continue;
    const bool in = 1 + r >= i.low - 1e-12 && 1 + r <= i.high + 1e-12;
    inside += in, ++runs, stated += i.confidence;
    auto& g = by_regime[key];
    g.first += in, ++g.second;
  }
  for (const auto& [k, g] : by_regime)
    std::printf("%-36s %2d of %2d inside (%.0f%%)\n", k.c_str(), g.first, g.second, 100.0 * g.first / g.second);
  std::printf("leave-one-out coverage %d of %d (%.0f%%); the intervals state %.0f%% on average\n", inside, runs,
              100.0 * inside / runs, 100 * stated / runs);
  REQUIRE(runs >= 80);
  // Near the stated confidence; the sets are small, so some shortfall is expected.
  CHECK(double(inside) / runs >= 0.75);
}

TEST_CASE("uncertainty: the validation sets load, with a finite residual for each case", "[uncertainty]") {
  const auto cases = validation_cases(CLUSTERSIM_SOURCE_DIR);
  std::map<std::string, int> n;
  for (const auto& c : cases) {
    ++n[c.dataset];
    const Prediction p = make_estimator(c.scenario).estimate(c.scenario.plan);
    INFO(c.dataset << " " << c.id);
    CHECK(std::isfinite(relative_residual(c, p)));
  }
  CHECK(n["measured-h100"] == 16);  // 10 runs of 2026-11-26, 6 of the attention-kernel set of 2026-11-27
  CHECK(n["measured-h200"] == 10);
  CHECK(n["measured-parallel"] >= 44);  // 26 on H100s, 18 on H200s
  // The H200's runs again with its datasheet profile, transferred from the H100.
  CHECK(n["measured-h200-transferred"] == 10);
  CHECK(n["measured-parallel-transferred"] == 18);
  CHECK(n["megatron-sc21"] == 10);
  CHECK(n["published"] >= 12);
}

#include "runner/uncertainty_table.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "sim/simulate.hpp"
#include "strategies/estimator.hpp"
#include "strategies/validation.hpp"

namespace clustersim::runner {
namespace {
// Residuals are stored to 6 significant digits: enough for quantiles, and stable text.
double rounded(double x) { return std::stod(fmt::format("{:.6g}", x)); }
}  // namespace

UncertaintyBuild build_uncertainty_table(const std::string& root, bool simulate) {
  UncertaintyBuild b;
  b.cases = nlohmann::json::array();
  std::map<std::string, int> per_dataset;
  int not_fitting = 0;
  for (const ValidationCase& c : validation_cases(root)) {
    const auto gpus = c.scenario.cluster.total_gpus();
    auto file = [&](const Prediction& p) {
      if (!(p.iteration_time > 0) || !std::isfinite(p.iteration_time)) return;
      // A plan the model says does not fit is not the run that was measured: its time
      // says nothing about the model's time error (the memory error is reported apart).
      if (!p.fits) {
        ++not_fitting;
        return;
      }
      const double r = rounded(relative_residual(c, p));
      // The regime finish() classified the prediction under (a simulated prediction
      // comes back from the replay's process as JSON, its workload not with it).
      const std::string regime = p.interval.regime;
      b.table.residuals[regime].push_back(r);
      b.cases.push_back({{"dataset", c.dataset},
                         {"id", c.id},
                         {"regime", regime},
                         {"predicted_s", rounded(p.iteration_time)},
                         {"real_s", rounded(real_step_time(c, p))},
                         {"residual", r}});
    };
    file(make_estimator(c.scenario).estimate(c.scenario.plan));
    if (simulate && gpus <= c.scenario.cluster.gpus_per_node) file(sim::simulate(c.scenario).prediction);
    ++per_dataset[c.dataset];
  }
  for (auto& [key, r] : b.table.residuals) std::sort(r.begin(), r.end());
  b.table.provenance = {{"generated_by", "clustersim calibrate uncertainty"},
                        {"validation_cases", per_dataset},
                        {"simulated", simulate ? "cases on one node" : "none"},
                        {"predictions_left_out_not_fitting", not_fitting}};
  return b;
}

std::string uncertainty_document(const UncertaintyBuild& b) {
  nlohmann::json doc = to_json(b.table);
  doc["cases"] = b.cases;
  return doc.dump(1) + "\n";
}

}  // namespace clustersim::runner

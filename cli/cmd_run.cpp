// clustersim run [FILE] [--json]: the analytical estimate of one scenario (the built-in
// default when FILE is left out); clustersim validate FILE...: checks files only.
#include <fmt/format.h>
#include <iostream>
#include <memory>

#include "cli/cmd_search.hpp"
#include "cli/command.hpp"
#include "runner/provenance.hpp"
#include "cli/report.hpp"
#include "runner/store.hpp"
#include "scenarios/json_reader.hpp"
#include "scenarios/serving.hpp"
#include "strategies/estimator.hpp"

namespace clustersim::cli {
using runner::store_run;
using runner::tool_json;
namespace {

struct RunOptions {
  std::string file;
  bool json = false;
  std::string db;    // --db FILE: also store the run there
  std::string plan;  // --plan: a plan file from `clustersim search`
};

int run(const RunOptions& o) {
  const Scenario s = o.file.empty() ? default_scenario() : load_scenario(o.file);
  if (!o.plan.empty()) return run_plan_file(s, o.plan, o.json);
  if (s.plan.searched()) return run_searched_plan(s, o.json);
  const Estimator est = make_estimator(s);
  const Prediction e = est.estimate(s.plan);
  if (o.json || !o.db.empty()) {
    nlohmann::json out = to_json(e);
    out["scenario"] = to_json(s);
    out["tool"] = tool_json("analytical");
    out["tool"]["gpu_profile"] = est.cluster().gpu.name;
    out["tool"]["gpu_profile_status"] = est.cluster().gpu.status;
    if (o.json) std::cout << out.dump(2) << '\n';
    else std::cout << format_report(s, est, e);
    // Stored after printing: a database that fails (a full disk) loses the estimate's
    // record, not the estimate.
    if (!o.db.empty()) {
      std::cout.flush();
      const std::int64_t id = store_run(o.db, s, out, "analytical");
      std::cerr << "stored run " << id << " in " << o.db << '\n';
    }
    return 0;
  }
  std::cout << format_report(s, est, e);
  return 0;
}

int validate(const std::vector<std::string>& files) {
  int bad = 0;
  for (const auto& f : files) {
    try {
      // A serving scenario (a "serving" key) is checked by its own schema.
      if (is_serving_scenario(read_json_file(f))) {
        const ServingScenario s = load_serving_scenario(f);
        Diagnostics diag(f);
        (void)resolve_cluster(s.cluster, diag);
        diag.throw_if_errors();
      } else {
        (void)make_estimator(load_scenario(f));
      }
      std::cout << f << ": ok\n";
    } catch (const InputError& e) {
      ++bad;
      std::cerr << e.what() << '\n';
    }
  }
  return bad ? 1 : 0;
}

const Registration run_command{"run", "estimate one scenario (the built-in default when no FILE is given)",
                               [](CLI::App& sub) -> Runner {
                                 auto o = std::make_shared<RunOptions>();
                                 sub.add_option("FILE", o->file, "scenario file (JSON)");
                                 sub.add_flag("--json", o->json, "print machine-readable JSON");
                                 sub.add_option("--db", o->db, "also store the run in this results database");
                                 sub.add_option("--plan", o->plan, "evaluate this plan file (from `clustersim search`) instead of the scenario's plan");
                                 return [o] { return run(*o); };
                               }};

const Registration validate_command{"validate", "check scenario files without running them",
                                    [](CLI::App& sub) -> Runner {
                                      auto files = std::make_shared<std::vector<std::string>>();
                                      sub.add_option("FILE", *files, "scenario files")->required();
                                      return [files] { return validate(*files); };
                                    }};

}  // namespace
}  // namespace clustersim::cli

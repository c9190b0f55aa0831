// clustersim: the one binary that wires every layer together.
//   run [FILE] [--json]      estimate a scenario (the built-in default without FILE)
//   validate FILE...         check scenario files, report every problem
//   gpus                     list the built-in GPU profiles
//   version                  tool, git revision, SimGrid and SQLite versions
// Exit codes: 0 ok, 1 bad input, 2 bad command line, 3 internal error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>

#include "cli/report.hpp"
#include "costmodel/hardware.hpp"
#include "results/sqlite_info.hpp"
#include "scenarios/diagnostics.hpp"
#include "scenarios/scenario.hpp"
#include "sim/simgrid_info.hpp"
#include "strategies/estimator.hpp"

#ifndef CLUSTERSIM_GIT_REVISION
#define CLUSTERSIM_GIT_REVISION "unknown"
#endif
#ifndef CLUSTERSIM_VERSION
#define CLUSTERSIM_VERSION "0"
#endif

namespace cs = clustersim;

namespace {

int cmd_run(const std::string& file, bool json) {
  const cs::Scenario s = file.empty() ? cs::default_scenario() : cs::load_scenario(file);
  const cs::Estimator est = cs::make_estimator(s);
  const cs::Estimate e = est.estimate(s.plan);
  if (json) {
    nlohmann::json out = cs::to_json(e);
    out["scenario"] = cs::to_json(s);
    out["tool"] = {{"name", "clustersim"}, {"version", CLUSTERSIM_VERSION}, {"git_revision", CLUSTERSIM_GIT_REVISION},
                   {"method", "analytical"}, {"gpu_profile", est.cluster().gpu.name},
                   {"gpu_profile_status", est.cluster().gpu.status}};
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << cs::format_report(s, est, e);
  }
  return 0;
}

int cmd_validate(const std::vector<std::string>& files) {
  int bad = 0;
  for (const auto& f : files) {
    try {
      const cs::Scenario s = cs::load_scenario(f);
      (void)cs::make_estimator(s);
      std::cout << f << ": ok\n";
    } catch (const cs::InputError& e) {
      ++bad;
      std::cerr << e.what() << '\n';
    }
  }
  return bad ? 1 : 0;
}

int cmd_gpus() {
  fmt::print("{:<18} {:>10} {:>10} {:>9} {:>11} {:>10}  {}\n", "name", "bf16", "fp16", "memory", "HBM", "NVLink",
             "status");
  for (const auto& name : cs::builtin_gpu_names()) {
    const auto p = cs::find_gpu_profile(name);
    fmt::print("{:<18} {:>10} {:>10} {:>9} {:>11} {:>10}  {}\n", p->name,
               p->peak_bf16 > 0 ? fmt::format("{:.1f} TF", p->peak_bf16 / 1e12) : "-",
               fmt::format("{:.1f} TF", p->peak_fp16 / 1e12), cs::format_bytes(p->memory_capacity),
               cs::format_bandwidth(p->memory_bandwidth), cs::format_bandwidth(p->nvlink_bandwidth), p->status);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"clustersim: plans, iteration time and memory of distributed deep-learning training"};
  app.require_subcommand(1);
  std::string run_file;
  bool run_json = false;
  auto* run = app.add_subcommand("run", "estimate one scenario (the built-in default when no FILE is given)");
  run->add_option("FILE", run_file, "scenario file (JSON)");
  run->add_flag("--json", run_json, "print machine-readable JSON");
  std::vector<std::string> validate_files;
  auto* validate = app.add_subcommand("validate", "check scenario files without running them");
  validate->add_option("FILE", validate_files, "scenario files")->required();
  auto* gpus = app.add_subcommand("gpus", "list the built-in GPU profiles");
  auto* version = app.add_subcommand("version", "print versions and provenance");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*run) return cmd_run(run_file, run_json);
    if (*validate) return cmd_validate(validate_files);
    if (*gpus) return cmd_gpus();
    if (*version) {
      fmt::print("clustersim {} (git {})\nSimGrid {}\nSQLite {}\n", CLUSTERSIM_VERSION, CLUSTERSIM_GIT_REVISION,
                 cs::sim::simgrid_version(), cs::results::sqlite_version());
      return 0;
    }
  } catch (const cs::InputError& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "clustersim: internal error: " << e.what() << '\n';
    return 3;
  }
  return 0;
}

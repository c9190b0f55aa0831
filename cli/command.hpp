// Subcommands register themselves from their own file, so adding one (search,
// simulate, sweep, db, calibrate) touches only that file:
//
//   static const clustersim::cli::Registration reg{"run", "estimate a scenario",
//     [](CLI::App& sub) {
//       auto opts = std::make_shared<Options>();
//       sub.add_option(...);
//       return [opts] { return run(*opts); };  // called when this subcommand is chosen
//     }};
//
// The runner returns the exit code. Throw InputError for bad input (exit 1); main()
// prints it. Commands are listed in name order, so --help is stable.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace clustersim::cli {

using Runner = std::function<int()>;
using Setup = std::function<Runner(CLI::App&)>;

struct CommandInfo {
  std::string name;
  std::string description;
  Setup setup;
};

std::vector<CommandInfo>& registry();

struct Registration {
  Registration(std::string name, std::string description, Setup setup);
};

}  // namespace clustersim::cli

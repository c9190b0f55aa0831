// clustersim: the one binary that wires every layer together. Each subcommand lives in
// its own cli/cmd_*.cpp and registers itself (cli/command.hpp).
// Exit codes: 0 ok, 1 bad input, 2 bad command line, 3 internal error.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>

#include "cli/command.hpp"
#include "scenarios/diagnostics.hpp"

namespace clustersim::cli {
std::vector<CommandInfo>& registry() {
  static std::vector<CommandInfo> commands;
  return commands;
}
Registration::Registration(std::string name, std::string description, Setup setup) {
  registry().push_back({std::move(name), std::move(description), std::move(setup)});
}
}  // namespace clustersim::cli

int main(int argc, char** argv) {
  namespace cli = clustersim::cli;
  CLI::App app{"clustersim: plans, iteration time and memory of distributed deep-learning training"};
  app.require_subcommand(1);
  auto commands = cli::registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::vector<std::pair<CLI::App*, cli::Runner>> runners;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.description);
    runners.emplace_back(sub, c.setup(*sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Results printed to a full device or a closed file are lost: say so (exit 1) rather
  // than exit 0 over an empty or truncated output.
  const auto flushed = [](int code) {
    errno = 0;
    std::cout.flush();
    if (std::cout) return code;
    std::cerr << "clustersim: cannot write the standard output"
              << (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()) << '\n';
    return code == 0 ? 1 : code;
  };
  try {
    for (const auto& [sub, runner] : runners)
      if (sub->parsed()) return flushed(runner());
  } catch (const clustersim::InputError& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "clustersim: internal error: " << e.what() << '\n';
    return 3;
  }
  return 0;
}

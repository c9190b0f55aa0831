// Runs the clustersim binary for the end-to-end tests: its exit code and its output.
#pragma once
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>

namespace clustersim::test {

struct CliResult {
  int code;
  std::string output;
};

// A shell command line: its exit code and its standard output.
inline CliResult run_shell(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `args` after the binary's path, through the shell. Stdout and stderr together, or
// stdout alone where a JSON output must not mix with notes on stderr.
inline CliResult run_cli(const std::string& args, bool merge_stderr = true) {
  return run_shell(std::string(CLUSTERSIM_BINARY) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

// Writes `text` to a file named after `name` in the temporary folder; returns its path.
inline std::filesystem::path write_temp(const std::string& name, const std::string& text) {
  const std::filesystem::path p = clustersim::test::temp_dir() / ("clustersim-test-" + name);
  std::ofstream(p) << text;
  return p;
}

}  // namespace clustersim::test

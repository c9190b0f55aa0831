// Progress of simulate on a terminal (a pseudo-terminal here): a bar with the simulated
// time, its rate and an ETA on stderr; nothing with --quiet or when stderr is not a
// terminal.
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <string>
#include <vector>

#include "tests/cli/run_cli.hpp"

namespace {

struct TtyRun {
  int code = -1;
  std::string output;  // stdout and stderr as the terminal saw them
};

// Runs the binary with `args` on a new pseudo-terminal.
TtyRun run_on_tty(const std::vector<std::string>& args) {
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>("clustersim")};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(CLUSTERSIM_BINARY, argv.data());
    _exit(127);
  }
  TtyRun r;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) r.output.append(buf, static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;  // EIO once the child closed the terminal
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

const std::string scenario = std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/default.json";

}  // namespace

TEST_CASE("simulate shows its progress on a terminal, and only there", "[cli][progress]") {
  const TtyRun tty = run_on_tty({"simulate", scenario});
  INFO(tty.output);
  CHECK(tty.code == 0);
  CHECK_THAT(tty.output, Catch::Contains("\r[") && Catch::Contains("simulated ms/s ETA"));
  CHECK_THAT(tty.output, Catch::Contains("100%"));
  CHECK_THAT(tty.output, Catch::Contains("iteration time"));

  const TtyRun quiet = run_on_tty({"simulate", scenario, "--quiet"});
  INFO(quiet.output);
  CHECK(quiet.code == 0);
  CHECK_THAT(quiet.output, !Catch::Contains("simulated ms"));
  CHECK_THAT(quiet.output, Catch::Contains("iteration time"));

  const auto piped = clustersim::test::run_cli("simulate " + scenario);
  INFO(piped.output);
  CHECK(piped.code == 0);
  CHECK_THAT(piped.output, !Catch::Contains("simulated ms"));
}

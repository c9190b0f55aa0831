// Running a simulation in a forked child (sim/child.hpp).
#include "sim/child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <simgrid/s4u.hpp>
#include <stdexcept>

#include "scenarios/diagnostics.hpp"

namespace sg4 = simgrid::s4u;

namespace clustersim::sim {
namespace {

// The child's side of the progress pipe: SimGrid calls this each time the simulated
// clock advances (once per solve of the sharing model, thousands of times a second),
// so it looks at the wall clock only every 64th call and writes the simulated time
// (8 bytes, atomic on a pipe) at most once per interval. The pipe does not block: a
// parent that reads late loses reports, never the replay's time.
class ProgressReporter {
 public:
  ProgressReporter(int fd, double interval_s) : fd_(fd), interval_(interval_s) {}
  void operator()() {
    if (++calls_ % 64 != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - last_).count() < interval_) return;
    last_ = now;
    const double clock = sg4::Engine::get_clock();
    [[maybe_unused]] const ssize_t n = write(fd_, &clock, sizeof clock);
  }

 private:
  int fd_;
  double interval_;
  std::uint64_t calls_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace

nlohmann::json in_child(const std::function<nlohmann::json()>& body, const std::function<void(double)>& progress,
                        double progress_interval_s) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe() failed");
  int pfds[2] = {-1, -1};
  if (progress && pipe2(pfds, O_CLOEXEC) != 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error("pipe() failed");
  }
  std::fflush(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork() failed");
  if (pid == 0) {
    // The child dies with its parent: a SIGTERM or SIGKILL of `clustersim simulate`
    // left the replay running as an orphan for as long as it lasted (tens of minutes).
    // A parent that died between fork() and prctl() is seen through getppid().
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
    close(fds[0]);
    if (progress) {
      close(pfds[0]);
      fcntl(pfds[1], F_SETFL, fcntl(pfds[1], F_GETFL) | O_NONBLOCK);
      // The engine is created inside `body`; the signal is static and outlives it.
      sg4::Engine::on_time_advance_cb(
          [reporter = ProgressReporter(pfds[1], progress_interval_s)](double) mutable { reporter(); });
    }
    std::string out;
    try {
      out = body().dump();
    } catch (const InputError& e) {
      nlohmann::json problems = nlohmann::json::array();
      for (const auto& p : e.problems()) problems.push_back({p.file, p.path, p.message});
      out = nlohmann::json{{"error", e.what()}, {"input_error", problems}}.dump();
    } catch (const std::exception& e) {
      out = nlohmann::json{{"error", e.what()}}.dump();
    }
    std::size_t off = 0;
    while (off < out.size()) {
      const ssize_t n = write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    close(fds[1]);
    std::fflush(nullptr);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[65536];
  if (!progress) {
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  } else {
    close(pfds[1]);
    // Both pipes until the result's end; reports are 8-byte doubles, possibly split
    // across reads.
    std::string reports;
    pollfd polled[2] = {{fds[0], POLLIN, 0}, {pfds[0], POLLIN, 0}};
    bool result_open = true, progress_open = true;
    while (result_open) {
      polled[1].fd = progress_open ? pfds[0] : -1;
      if (poll(polled, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (progress_open && (polled[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        const ssize_t n = read(pfds[0], buf, sizeof buf);
        if (n <= 0) {
          progress_open = false;
        } else {
          reports.append(buf, static_cast<std::size_t>(n));
          const std::size_t whole = reports.size() / sizeof(double) * sizeof(double);
          if (whole > 0) {
            double clock = 0;
            std::memcpy(&clock, reports.data() + whole - sizeof clock, sizeof clock);  // the latest
            reports.erase(0, whole);
            progress(clock);
          }
        }
      }
      if (polled[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n <= 0) result_open = false;
        else text.append(buf, static_cast<std::size_t>(n));
      }
    }
    close(pfds[0]);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (text.empty())
    throw std::runtime_error(fmt::format("the simulation process died (status {})", status));
  auto result = nlohmann::json::parse(text);
  if (result.contains("input_error")) {
    std::vector<Problem> problems;
    for (const auto& p : result["input_error"]) problems.push_back({p[0], p[1], p[2]});
    throw InputError(std::move(problems));
  }
  if (result.contains("error")) throw std::runtime_error(result["error"].get<std::string>());
  return result;
}

}  // namespace clustersim::sim

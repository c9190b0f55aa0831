// A progress line on stderr for long commands (sweep, search, rank): on a terminal a bar
// redrawn in place with the count, the rate and the ETA; otherwise, where the command
// asks for it, plain lines for logs about every 10% (else nothing).
#pragma once
#include <cstddef>
#include <string>

namespace clustersim::cli {

// "42s", "3m07s", "2h05m".
std::string format_duration(double seconds);

class Progress {
 public:
  struct Style {
    std::string label = "sweep";  // the plain lines' prefix
    std::string unit = "points";  // what is counted ("points/s")
    bool plain_lines = true;      // away from a terminal: log lines (true) or silence
  };
  Progress(std::size_t total, bool enabled) : Progress(total, enabled, Style{}) {}
  Progress(std::size_t total, bool enabled, Style style);
  // `done` of the total after `elapsed` seconds; `final` draws the last state and ends the line.
  void update(std::size_t done, double elapsed, bool final = false);
  // A new phase with its own total (the bar restarts; the rate counts from `elapsed`).
  void restart(std::size_t total, double elapsed, std::string unit);

 private:
  std::size_t total_;
  bool enabled_, tty_;
  Style style_;
  double start_ = 0;
  double last_ = -1;
  int last_decile_ = -1;
};

}  // namespace clustersim::cli

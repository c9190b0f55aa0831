// Progress of long commands on stderr (sweep, simulate, search, rank): on a terminal a
// bar redrawn in place with the count, the rate and the ETA; otherwise, where the command
// asks for it, plain lines for logs about every 10% (and at least every 10 s), else
// nothing; nothing at all when disabled (--quiet).
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
  Progress(std::size_t total, bool enabled, Style style);
  Progress(std::size_t total, bool enabled) : Progress(total, enabled, Style{}) {}
  // `what` prefixes the plain lines ("sweep"), `unit` names what is counted ("points").
  Progress(std::string what, std::string unit, std::size_t total, bool enabled)
      : Progress(total, enabled, Style{std::move(what), std::move(unit), true}) {}
  // `done` of the total so far, `elapsed` seconds since the work started; `resumed` of
  // `done` cost no work (done by an earlier run) and count neither in the rate nor ETA;
  // `final` draws the last state and ends the line.
  void update(std::size_t done, double elapsed, bool final = false, std::size_t resumed = 0);
  // A new phase with its own total (the bar restarts; the rate counts from `elapsed`).
  void restart(std::size_t total, double elapsed, std::string unit);
  // Whether the bar is redrawn in place (stderr is a terminal).
  bool terminal() const { return tty_; }
  // A total known better now (simulate's is an estimate until the replay ends).
  void set_total(std::size_t total) { total_ = total; }
  std::size_t total() const { return total_; }

 private:
  std::size_t total_;
  bool enabled_, tty_;
  Style style_;
  double start_ = 0;
  double last_ = -1;
  int last_decile_ = -1;
};

}  // namespace clustersim::cli

// Progress of long commands on stderr (sweep, simulate): a redrawn bar with rate and
// ETA when stderr is a terminal, plain lines about every 10% (and at least every 10 s)
// otherwise; nothing when disabled (--quiet).
#pragma once
#include <cstddef>
#include <string>

namespace clustersim::cli {

// "42s", "3m07s", "2h05m".
std::string format_duration(double seconds);

class Progress {
 public:
  // `what` prefixes the plain lines ("sweep"), `unit` names what is counted ("points").
  Progress(std::string what, std::string unit, std::size_t total, bool enabled);
  // `done` of the total so far, `elapsed` seconds since the work started; `resumed` of
  // `done` cost no work (done by an earlier run) and count neither in the rate nor ETA.
  void update(std::size_t done, double elapsed, bool final = false, std::size_t resumed = 0);
  // Whether the bar is redrawn in place (stderr is a terminal).
  bool terminal() const { return tty_; }
  // A total known better now (simulate's is an estimate until the replay ends).
  void set_total(std::size_t total) { total_ = total; }
  std::size_t total() const { return total_; }

 private:
  std::string what_, unit_;
  std::size_t total_;
  bool enabled_, tty_;
  double last_ = -1;
  int last_decile_ = -1;
};

}  // namespace clustersim::cli

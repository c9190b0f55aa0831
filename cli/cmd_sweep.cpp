// clustersim sweep FILE --db FILE [--jobs N]: evaluates every point of a sweep file with
// the analytical estimator on N threads and stores each in the results database (the
// engine is runner/sweep.hpp). This file parses the arguments, turns SIGINT/SIGTERM
// into a stop request and prints the progress and the summary.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <fmt/format.h>
#include <memory>

#include "cli/command.hpp"
#include "runner/store.hpp"
#include "runner/sweep.hpp"
#include "scenarios/sweep.hpp"

namespace clustersim::cli {
namespace {

std::atomic<int> stop_signal{0};
extern "C" void on_stop_signal(int sig) { stop_signal.store(sig); }

struct SweepOptions {
  std::string file;
  std::string db = runner::default_db_file;
  unsigned jobs = 0;  // 0: every core
  bool quiet = false;
};

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{:.0f}m{:02.0f}s", std::floor(s / 60), std::fmod(s, 60));
  return fmt::format("{:.0f}h{:02.0f}m", std::floor(s / 3600), std::fmod(s / 60, 60));
}

class Progress {
 public:
  Progress(std::size_t total, bool enabled) : total_(total), enabled_(enabled), tty_(isatty(STDERR_FILENO)) {}
  void update(std::size_t done, double elapsed, bool final = false) {
    if (!enabled_) return;
    const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
    // A rate over a few milliseconds is noise: the first line once claimed 15,701,668
    // points/s. Rate and ETA wait for half a second of work.
    const bool measured = final || elapsed >= 0.5;
    const std::string rate_text = measured ? fmt::format("{:.0f}", rate) : "-";
    const std::string eta_text = measured ? format_duration(eta) : "-";
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1;
    if (tty_) {
      if (!final && elapsed - last_ < 0.1) return;
      constexpr int width = 30;
      const int filled = static_cast<int>(frac * width);
      fmt::print(stderr, "\r[{}{}] {}/{} {:3.0f}% {} points/s ETA {}   ", std::string(filled, '#'),
                 std::string(width - filled, '.'), done, total_, 100 * frac, rate_text, eta_text);
      if (final) fmt::print(stderr, "\n");
    } else {
      // Plain lines for logs: about every 10% and at least every 10 s.
      const auto decile = static_cast<int>(frac * 10);
      if (!final && decile == last_decile_ && elapsed - last_ < 10) return;
      last_decile_ = decile;
      fmt::print(stderr, "sweep: {}/{} points ({:.0f}%), {} points/s, ETA {}\n", done, total_, 100 * frac, rate_text,
                 eta_text);
    }
    last_ = elapsed;
    std::fflush(stderr);
  }

 private:
  std::size_t total_;
  bool enabled_, tty_;
  double last_ = -1;
  int last_decile_ = -1;
};

// Installs the stop handlers for the lifetime of the object.
class StopOnSignals {
 public:
  StopOnSignals() {
    stop_signal.store(0);
    old_int_ = std::signal(SIGINT, on_stop_signal);
    old_term_ = std::signal(SIGTERM, on_stop_signal);
  }
  ~StopOnSignals() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

 private:
  void (*old_int_)(int);
  void (*old_term_)(int);
};

int sweep(const SweepOptions& o) {
  const SweepSpec spec = load_sweep(o.file);
  Progress progress(spec.point_count(), !o.quiet);
  runner::SweepOptions run;
  run.db_file = o.db;
  run.jobs = o.jobs;
  run.progress = [&](const runner::SweepProgress& p) { progress.update(p.handled, p.elapsed_s, p.final); };
  run.stop = &stop_signal;
  runner::SweepSummary r;
  {
    const StopOnSignals stop_on_signals;
    r = runner::run_sweep(spec, run);
  }

  const double rate = r.seconds > 0 ? static_cast<double>(r.stored + r.failed) / r.seconds : 0;
  fmt::print("sweep \"{}\" (id {}) in {}: {} points; {} stored, {} failed, {} invalid skipped, {} already done{}\n",
             spec.name, r.sweep_id, o.db, r.total, r.stored, r.failed, r.skipped, r.already_done,
             r.duplicates ? fmt::format(", {} duplicates of another point", r.duplicates) : std::string());
  fmt::print("{} jobs, {:.3f} s, {:.0f} points/s stored\n", r.jobs, r.seconds, rate);
  if (const int sig = r.stopped_by) {
    fmt::print(stderr, "sweep: stopped by signal {} after {} of {} points; completed points are committed, "
                       "rerun the same command to finish\n", sig, r.handled, r.total);
    return 128 + sig;
  }
  return 0;
}

const Registration sweep_command{
    "sweep", "evaluate every point of a sweep file and store the results", [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<SweepOptions>();
      sub.add_option("FILE", o->file, "sweep file (JSON, see results/README.md)")->required();
      sub.add_option("--db", o->db, "results database (created when missing)")->capture_default_str();
      sub.add_option("--jobs,-j", o->jobs, "worker threads (default: every core)")->check(CLI::Range(1u, 1024u));
      sub.add_flag("--quiet,-q", o->quiet, "no progress output");
      return [o] { return sweep(*o); };
    }};

}  // namespace
}  // namespace clustersim::cli

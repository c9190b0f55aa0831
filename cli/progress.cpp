// The progress printer shared by sweep, simulate, search and rank (cli/progress.hpp).
#include "cli/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>

namespace clustersim::cli {

std::string format_duration(double s) {
  if (s < 60) return fmt::format("{:.0f}s", s);
  if (s < 3600) return fmt::format("{:.0f}m{:02.0f}s", std::floor(s / 60), std::fmod(s, 60));
  return fmt::format("{:.0f}h{:02.0f}m", std::floor(s / 3600), std::fmod(s / 60, 60));
}

Progress::Progress(std::size_t total, bool enabled, Style style)
    : total_(total), enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0), style_(std::move(style)) {
  if (!tty_ && !style_.plain_lines) enabled_ = false;
}

void Progress::restart(std::size_t total, double elapsed, std::string unit) {
  total_ = total;
  start_ = elapsed;
  last_ = -1;
  last_decile_ = -1;
  style_.unit = std::move(unit);
}

void Progress::update(std::size_t done, double elapsed, bool final, std::size_t resumed) {
  if (!enabled_) return;
  elapsed -= start_;
  resumed = std::min(resumed, done);
  const double worked = static_cast<double>(done - resumed);
  const double rate = elapsed > 0 ? worked / elapsed : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - std::min(done, total_)) / rate : 0;
  // A rate over a few milliseconds is noise: the first line once claimed 15,701,668
  // points/s. Rate and ETA wait for half a second of work.
  const bool measured = final || elapsed >= 0.5;
  const std::string rate_text = measured ? fmt::format("{:.0f}", rate) : "-";
  const std::string eta_text = measured ? format_duration(eta) : "-";
  const double frac = total_ ? static_cast<double>(std::min(done, total_)) / static_cast<double>(total_) : 1;
  if (tty_) {
    if (!final && elapsed - last_ < 0.1) return;
    constexpr int width = 30;
    const int filled = static_cast<int>(frac * width);
    fmt::print(stderr, "\r[{}{}] {}/{} {:3.0f}% {} {}/s ETA {}   ", std::string(filled, '#'),
               std::string(width - filled, '.'), done, total_, 100 * frac, rate_text, style_.unit, eta_text);
    if (final) fmt::print(stderr, "\n");
  } else {
    // Plain lines for logs: about every 10% and at least every 10 s.
    const auto decile = static_cast<int>(frac * 10);
    if (!final && decile == last_decile_ && elapsed - last_ < 10) return;
    last_decile_ = decile;
    fmt::print(stderr, "{}: {}/{} {} ({:.0f}%), {} {}/s, ETA {}\n", style_.label, done, total_, style_.unit,
               100 * frac, rate_text, style_.unit, eta_text);
  }
  last_ = elapsed;
  std::fflush(stderr);
}

}  // namespace clustersim::cli

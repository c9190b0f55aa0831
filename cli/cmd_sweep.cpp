// clustersim sweep FILE --db FILE [--jobs N]: evaluates every point of a sweep file with
// the analytical estimator on N threads and stores each in the results database.
//
// Workers only compute; one writer (this thread) stores outcomes in batched
// transactions, so SQLite is never contended and a killed sweep loses at most the
// batch in flight. A rerun identifies the sweep by its specification and skips the
// points already stored (by scenario hash and method) or recorded as failed.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "cli/command.hpp"
#include "cli/provenance.hpp"
#include "cli/store.hpp"
#include "results/store.hpp"
#include "scenarios/sweep.hpp"
#include "strategies/estimator.hpp"


namespace clustersim::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> stop_signal{0};
extern "C" void on_stop_signal(int sig) { stop_signal.store(sig); }

struct SweepOptions {
  std::string file;
  std::string db = default_db_file;
  unsigned jobs = 0;  // 0: every core
  bool quiet = false;
};

struct Outcome {
  enum class Kind { stored, failed, invalid_skipped, already_done } kind;
  std::size_t index = 0;
  std::string key;  // scenario hash (valid points) or hash of the point document
  nlohmann::json axes;
  std::string error;
  std::unique_ptr<results::RunRecord> record;
};

// Estimators are keyed by what they are built from (model, training, cluster), so a
// sweep over plans builds one per thread.
class EstimatorCache {
 public:
  const Estimator& get(const Scenario& s, const nlohmann::json& canonical) {
    const std::string key =
        canonical["model"].dump() + canonical["training"].dump() + canonical["cluster"].dump();
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
    if (cache_.size() >= 64) cache_.clear();  // bounded: sweeps over models would grow it forever
    return *cache_.emplace(key, std::make_unique<Estimator>(make_estimator(s))).first->second;
  }

 private:
  std::map<std::string, std::unique_ptr<Estimator>> cache_;
};

std::string join_problems(const std::vector<Problem>& ps) {
  std::string out;
  for (const auto& p : ps) out += (out.empty() ? "" : "\n") + p.to_string();
  return out;
}

Outcome evaluate(const SweepSpec& spec, std::size_t index, const std::set<std::string>& done, EstimatorCache& cache) {
  Outcome o;
  o.index = index;
  const SweepPoint p = sweep_point(spec, index);
  o.axes = p.axes;
  const std::string label = fmt::format("{} (point {})", spec.file, index);
  Diagnostics diag(label);
  const Scenario s = parse_scenario(p.doc, diag);
  auto invalid = [&](std::string error) {
    o.key = results::fnv1a64_hex(p.doc.dump());
    o.error = std::move(error);
    o.kind = spec.skip_invalid ? Outcome::Kind::invalid_skipped
             : done.count(o.key) ? Outcome::Kind::already_done
                                 : Outcome::Kind::failed;
    return std::move(o);
  };
  if (!diag.ok()) return invalid(join_problems(diag.problems()));
  const nlohmann::json canonical = to_json(s);
  o.key = results::scenario_hash(canonical);
  if (done.count(o.key)) {
    o.kind = Outcome::Kind::already_done;
    return o;
  }
  try {
    const Estimator& est = cache.get(s, canonical);
    nlohmann::json result = to_json(est.estimate(s.plan));
    result["tool"] = tool_json(spec.method);
    result["tool"]["gpu_profile"] = est.cluster().gpu.name;
    result["tool"]["gpu_profile_status"] = est.cluster().gpu.status;
    o.record = std::make_unique<results::RunRecord>(make_run_record(s, canonical, std::move(result), spec.method));
    o.record->scenario_hash = o.key;
    o.record->slim();  // serialise (and free) here, on a worker, not in the single writer
    o.record->axes = p.axes;
    o.record->point_index = static_cast<std::int64_t>(index);
    o.kind = Outcome::Kind::stored;
  } catch (const InputError& e) {
    return invalid(e.what());
  } catch (const std::exception& e) {
    // An internal failure of one point is recorded with the point; the sweep goes on.
    o.key = results::fnv1a64_hex(p.doc.dump());
    o.error = std::string("internal error: ") + e.what();
    o.kind = done.count(o.key) ? Outcome::Kind::already_done : Outcome::Kind::failed;
  }
  return o;
}

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
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1;
    if (tty_) {
      if (!final && elapsed - last_ < 0.1) return;
      constexpr int width = 30;
      const int filled = static_cast<int>(frac * width);
      fmt::print(stderr, "\r[{}{}] {}/{} {:3.0f}% {:.0f} points/s ETA {}   ", std::string(filled, '#'),
                 std::string(width - filled, '.'), done, total_, 100 * frac, rate, format_duration(eta));
      if (final) fmt::print(stderr, "\n");
    } else {
      // Plain lines for logs: about every 10% and at least every 10 s.
      const auto decile = static_cast<int>(frac * 10);
      if (!final && decile == last_decile_ && elapsed - last_ < 10) return;
      last_decile_ = decile;
      fmt::print(stderr, "sweep: {}/{} points ({:.0f}%), {:.0f} points/s, ETA {}\n", done, total_, 100 * frac, rate,
                 format_duration(eta));
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

int sweep(const SweepOptions& o) {
  const SweepSpec spec = load_sweep(o.file);
  const std::size_t total = spec.point_count();
  results::Database db(o.db, results::Database::Mode::read_write);
  const std::int64_t sweep_id = db.put_sweep(spec.name, o.file, identity(spec), static_cast<std::int64_t>(total));
  const std::set<std::string> done = db.done_points(sweep_id, spec.method);

  const unsigned jobs = o.jobs ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  stop_signal.store(0);
  auto old_int = std::signal(SIGINT, on_stop_signal);
  auto old_term = std::signal(SIGTERM, on_stop_signal);

  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<Outcome> queue;
  std::size_t workers_left = jobs;
  std::vector<std::thread> workers;
  for (unsigned j = 0; j < jobs; ++j) {
    workers.emplace_back([&] {
      EstimatorCache cache;
      std::vector<Outcome> local;
      auto flush = [&] {
        std::lock_guard lock(mutex);
        for (auto& x : local) queue.push_back(std::move(x));
        local.clear();
        ready.notify_one();
      };
      // Points are handed out in small chunks: fewer atomic operations and lock
      // round trips than one at a time, still fine-grained enough to share the load.
      constexpr std::size_t chunk = 16;
      while (!stop_signal.load()) {
        const std::size_t first = next.fetch_add(chunk);
        if (first >= total) break;
        for (std::size_t i = first; i < std::min(total, first + chunk) && !stop_signal.load(); ++i)
          local.push_back(evaluate(spec, i, done, cache));
        flush();
      }
      flush();
      std::lock_guard lock(mutex);
      --workers_left;
      ready.notify_one();
    });
  }

  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  Progress progress(total, !o.quiet);
  std::size_t handled = 0, stored = 0, failed = 0, skipped = 0, already = 0, duplicates = 0;
  std::set<std::string> stored_now;  // two points of one sweep may be the same scenario
  bool in_tx = false;
  auto last_commit = Clock::now();
  std::size_t since_commit = 0;
  auto commit = [&] {
    if (in_tx) db.commit();
    in_tx = false;
    since_commit = 0;
    last_commit = Clock::now();
  };
  try {
    for (;;) {
      std::deque<Outcome> batch;
      bool finished = false;
      {
        std::unique_lock lock(mutex);
        ready.wait_for(lock, std::chrono::milliseconds(100), [&] { return !queue.empty() || workers_left == 0; });
        batch.swap(queue);
        finished = workers_left == 0 && batch.empty();
      }
      if (finished) break;
      for (auto& x : batch) {
        ++handled;
        switch (x.kind) {
          case Outcome::Kind::already_done: ++already; continue;
          case Outcome::Kind::invalid_skipped: ++skipped; continue;
          default: break;
        }
        if (!in_tx) {
          db.begin();
          in_tx = true;
        }
        if (x.kind == Outcome::Kind::failed) {
          db.add_failed_point(sweep_id, static_cast<std::int64_t>(x.index), x.key, spec.method, x.axes, x.error);
          ++failed;
        } else if (!stored_now.insert(x.key).second) {
          ++duplicates;
        } else {
          x.record->sweep_id = sweep_id;
          db.add_run(*x.record);
          ++stored;
        }
        ++since_commit;
      }
      // Batches bound what a SIGKILL can lose and keep each commit's cost amortised.
      if (since_commit >= 2000 || std::chrono::duration<double>(Clock::now() - last_commit).count() > 0.5) commit();
      progress.update(handled, elapsed());
    }
    commit();
  } catch (...) {
    stop_signal.store(SIGTERM);
    for (auto& w : workers) w.join();
    if (in_tx) db.rollback();
    std::signal(SIGINT, old_int);
    std::signal(SIGTERM, old_term);
    throw;
  }
  for (auto& w : workers) w.join();
  const double seconds = elapsed();
  progress.update(handled, seconds, true);
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);

  const double rate = seconds > 0 ? static_cast<double>(stored + failed) / seconds : 0;
  fmt::print("sweep \"{}\" (id {}) in {}: {} points; {} stored, {} failed, {} invalid skipped, {} already done{}\n",
             spec.name, sweep_id, o.db, total, stored, failed, skipped, already,
             duplicates ? fmt::format(", {} duplicates of another point", duplicates) : std::string());
  fmt::print("{} jobs, {:.3f} s, {:.0f} points/s stored\n", jobs, seconds, rate);
  if (const int sig = stop_signal.load()) {
    fmt::print(stderr, "sweep: stopped by signal {} after {} of {} points; completed points are committed, "
                       "rerun the same command to finish\n", sig, handled, total);
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

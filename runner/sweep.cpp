#include "runner/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "results/store.hpp"
#include "runner/provenance.hpp"
#include "runner/store.hpp"
#include "strategies/estimator.hpp"
#include "strategies/resolved_plan.hpp"

namespace clustersim::runner {
namespace {

using Clock = std::chrono::steady_clock;

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
  for (const auto& p : ps) {
    if (!out.empty()) out += '\n';
    out += p.to_string();
  }
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
    // A point whose plan is {"search": ...} or {"file": ...} is resolved first (the
    // estimator alone would evaluate the default knobs).
    const Estimator& est = cache.get(s, canonical);
    nlohmann::json result = to_json(s.plan.searched() ? predict_scenario(s) : est.estimate(s.plan));
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

}  // namespace

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options) {
  SweepSummary sum;
  sum.total = spec.point_count();
  const std::size_t total = sum.total;
  results::Database db(options.db_file, results::Database::Mode::read_write);
  sum.sweep_id = db.put_sweep(spec.name, spec.file, identity(spec), static_cast<std::int64_t>(total));
  const std::int64_t sweep_id = sum.sweep_id;
  const std::set<std::string> done = db.done_points(sweep_id, spec.method);

  sum.jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  // The writer's failure stops the workers as a stop request does.
  std::atomic<bool> abort{false};
  auto stopping = [&] { return abort.load() || (options.stop && options.stop->load() != 0); };

  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<Outcome> queue;
  std::size_t workers_left = sum.jobs;
  std::vector<std::thread> workers;
  for (unsigned j = 0; j < sum.jobs; ++j) {
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
      while (!stopping()) {
        const std::size_t first = next.fetch_add(chunk);
        if (first >= total) break;
        for (std::size_t i = first; i < std::min(total, first + chunk) && !stopping(); ++i)
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
  auto report = [&](double seconds, bool final) {
    if (options.progress) options.progress({sum.handled, total, seconds, final});
  };
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
        ++sum.handled;
        switch (x.kind) {
          case Outcome::Kind::already_done: ++sum.already_done; continue;
          case Outcome::Kind::invalid_skipped: ++sum.skipped; continue;
          default: break;
        }
        if (!in_tx) {
          db.begin();
          in_tx = true;
        }
        if (x.kind == Outcome::Kind::failed) {
          db.add_failed_point(sweep_id, static_cast<std::int64_t>(x.index), x.key, spec.method, x.axes, x.error);
          ++sum.failed;
        } else if (!stored_now.insert(x.key).second) {
          ++sum.duplicates;
        } else {
          x.record->sweep_id = sweep_id;
          // 0: the same sweep, run at the same time by another process, stored it first.
          if (db.add_run(*x.record) == 0) ++sum.already_done;
          else ++sum.stored;
        }
        ++since_commit;
      }
      // Batches bound what a SIGKILL can lose and keep each commit's cost amortised.
      if (since_commit >= 2000 || std::chrono::duration<double>(Clock::now() - last_commit).count() > 0.5) commit();
      report(elapsed(), false);
    }
    commit();
  } catch (...) {
    abort.store(true);
    for (auto& w : workers) w.join();
    if (in_tx) db.rollback();
    throw;
  }
  for (auto& w : workers) w.join();
  sum.seconds = elapsed();
  report(sum.seconds, true);
  sum.stopped_by = options.stop ? options.stop->load() : 0;
  return sum;
}

}  // namespace clustersim::runner

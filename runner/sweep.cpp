#include "runner/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "results/store.hpp"
#include "runner/sweep_engine.hpp"

namespace clustersim::runner {

using detail::Outcome;
using Clock = std::chrono::steady_clock;

SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options) {
  SweepSummary sum;
  sum.total = spec.point_count();
  const std::size_t total = sum.total;
  results::Database db(options.db_file, results::Database::Mode::read_write);
  sum.sweep_id = db.put_sweep(spec.name, spec.file, identity(spec), static_cast<std::int64_t>(total));
  const std::int64_t sweep_id = sum.sweep_id;
  const detail::Resume resume = detail::load_resume(db, spec, sweep_id);
  const detail::DoneKeys& done = resume.keys;
  sum.already_done = sum.resumed_by_index = sum.handled = resume.count;
  detail::tune_for_sweep(db);

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
      detail::Worker worker(spec);
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
          if (!resume.done(i)) local.push_back(detail::evaluate(spec, i, done, worker));
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
    if (options.progress) options.progress({sum.handled, total, seconds, sum.resumed_by_index, final});
  };
  detail::SweepWriter writer(db, sweep_id, spec.method, sum);
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
      for (auto& x : batch) writer.add(std::move(x));
      writer.maybe_commit();
      report(elapsed(), false);
    }
    writer.finish();
  } catch (...) {
    abort.store(true);
    for (auto& w : workers) w.join();
    writer.rollback();
    throw;
  }
  for (auto& w : workers) w.join();
  sum.seconds = elapsed();
  report(sum.seconds, true);
  sum.stopped_by = options.stop ? options.stop->load() : 0;
  return sum;
}

}  // namespace clustersim::runner

// The sweep engine: evaluates every point of a sweep (estimator or SimGrid replay, as
// the sweep file says) on N threads and stores each in the results database (across
// MPI ranks and hosts: runner/sweep_mpi.hpp; what both share: runner/sweep_engine.hpp).
//
// Workers only compute; one writer (the calling thread) stores outcomes in batched
// transactions, so SQLite is never contended and a killed sweep loses at most the
// batch in flight. A rerun identifies the sweep by its specification and skips the
// points already stored or recorded as failed: by point index without deriving them,
// and by scenario hash for a point that duplicates a done one (runner/sweep_engine.hpp).
// Nothing is printed: progress goes to a callback, the counts come back in a summary.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "scenarios/sweep.hpp"

namespace clustersim::runner {

struct SweepProgress {
  std::size_t handled = 0;  // points taken from the workers so far (whatever their outcome)
  std::size_t total = 0;    // points in the sweep
  double elapsed_s = 0;     // since the workers started
  std::size_t resumed = 0;  // of `handled`: points an earlier run did, skipped by index (no work)
  bool final = false;       // the last call, after every worker finished
};

struct SweepOptions {
  std::string db_file;  // results database (created when missing)
  unsigned jobs = 0;    // worker threads; 0: every core
  // Called on the writer thread after each batch and once more with `final` set (not
  // when the sweep throws).
  std::function<void(const SweepProgress&)> progress;
  // When it becomes nonzero (a signal number, set by a signal handler) the workers stop
  // taking points; what was computed is stored and the summary carries the number.
  const std::atomic<int>* stop = nullptr;
  // MPI sweeps (run_sweep_mpi): the most points handed out at once; 0: 64.
  std::size_t chunk = 0;
  // MPI sweeps: rank 0 hands out no more work while this many outcomes wait for the
  // writer; 0: 20,000 (about 70 MB of analytical rows).
  std::size_t mpi_backlog = 0;
};

struct SweepSummary {
  std::int64_t sweep_id = 0;
  std::size_t total = 0;       // points in the sweep
  std::size_t handled = 0;     // points evaluated or recognised as done (< total when stopped)
  std::size_t stored = 0;      // new runs written
  std::size_t failed = 0;      // new failed points written
  std::size_t skipped = 0;     // invalid points skipped (the sweep's skip_invalid rule)
  std::size_t already_done = 0;  // stored or failed by an earlier run of the same sweep
  std::size_t resumed_by_index = 0;  // of already_done: skipped by point index, never derived
  std::size_t duplicates = 0;  // points whose scenario another point of this run stored
  unsigned jobs = 0;           // worker threads used (MPI: worker ranks)
  double seconds = 0;          // wall time of the evaluation
  int stopped_by = 0;          // the stop value that ended the sweep early; 0 when complete
};

// Evaluates and stores every point of `spec` not already in the database. Throws
// InputError when the database is unusable; the open transaction is rolled back.
SweepSummary run_sweep(const SweepSpec& spec, const SweepOptions& options);

}  // namespace clustersim::runner

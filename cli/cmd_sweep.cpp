// clustersim sweep FILE --db FILE [--jobs N]: evaluates every point of a sweep file
// (the estimator or the simulator, as the file says) on N threads and stores each in
// the results database (the engine is runner/sweep.hpp). Started by mpirun or srun
// with several ranks (or with --mpi), it spreads the points over the ranks instead
// (runner/sweep_mpi.hpp); only rank 0 prints. This file parses the arguments, turns
// SIGINT/SIGTERM into a stop request and prints the progress and the summary.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fmt/format.h>
#include <memory>

#include "cli/command.hpp"
#include "cli/progress.hpp"
#include "runner/store.hpp"
#include "runner/sweep.hpp"
#include "runner/sweep_mpi.hpp"
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
  bool mpi = false;        // --mpi: use MPI even when no launcher is recognised
  std::size_t chunk = 0;   // --chunk: most points per MPI request; 0: the default
  std::size_t backlog = 0;  // --mpi-backlog (hidden): rank 0's limit of unstored outcomes
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

int print_summary(const SweepSpec& spec, const runner::SweepSummary& r, const std::string& db, bool mpi) {
  const double rate = r.seconds > 0 ? static_cast<double>(r.stored + r.failed) / r.seconds : 0;
  fmt::print("sweep \"{}\" (id {}) in {}: {} points; {} stored, {} failed, {} invalid skipped, {} already done{}\n",
             spec.name, r.sweep_id, db, r.total, r.stored, r.failed, r.skipped, r.already_done,
             r.duplicates ? fmt::format(", {} duplicates of another point", r.duplicates) : std::string());
  fmt::print("{} {}, {:.3f} s, {:.0f} points/s stored\n", r.jobs, mpi ? "worker ranks" : "jobs", r.seconds, rate);
  if (const int sig = r.stopped_by) {
    fmt::print(stderr, "sweep: stopped by signal {} after {} of {} points; completed points are committed, "
                       "rerun the same command to finish\n", sig, r.handled, r.total);
    return 128 + sig;
  }
  return 0;
}

runner::SweepOptions engine_options(const SweepOptions& o, Progress* progress) {
  runner::SweepOptions run;
  run.db_file = o.db;
  run.jobs = o.jobs;
  run.chunk = o.chunk;
  run.mpi_backlog = o.backlog;
  if (progress)
    run.progress = [progress](const runner::SweepProgress& p) { progress->update(p.handled, p.elapsed_s, p.final); };
  run.stop = &stop_signal;
  return run;
}

int sweep_mpi(const SweepOptions& o, const runner::MpiSession& mpi) {
  if (o.jobs) {
    if (mpi.rank() == 0) fmt::print(stderr, "sweep: --jobs: an MPI sweep runs one worker per rank; start more ranks\n");
    return 2;
  }
  // Rank 0 learns the point count only once it has read the file; the bar starts then.
  std::unique_ptr<Progress> progress;
  runner::SweepOptions run = engine_options(o, nullptr);
  if (mpi.rank() == 0 && !o.quiet)
    run.progress = [&](const runner::SweepProgress& p) {
      if (!progress) progress = std::make_unique<Progress>(p.total, true);
      progress->update(p.handled, p.elapsed_s, p.final);
    };
  runner::MpiSweepResult r;
  {
    const StopOnSignals stop_on_signals;
    r = runner::run_sweep_mpi(mpi, o.file, run);
  }
  if (!r.root) return 0;  // rank 0 reports and sets the job's exit code
  return print_summary(r.spec, r.summary, o.db, true);
}

int sweep(const SweepOptions& o) {
  // Under mpirun/srun every rank runs this; with one rank it is the threaded sweep.
  std::unique_ptr<runner::MpiSession> mpi;
  if (o.mpi || runner::mpi_launched()) {
    if (!runner::mpi_built()) {
      fmt::print(stderr, "sweep: this clustersim was built without MPI (CMake option CLUSTERSIM_MPI=ON needs "
                         "libopenmpi-dev)\n");
      return 2;
    }
    mpi = std::make_unique<runner::MpiSession>();
    if (mpi->size() > 1) return sweep_mpi(o, *mpi);
  }
  // srun without an MPI plugin starts independent copies that would all write the
  // database: refuse rather than race.
  if (const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS"); tasks && std::atoi(tasks) > 1) {
    fmt::print(stderr, "sweep: srun started {} tasks but MPI sees a single rank; use srun --mpi=pmix (or pmi2), "
                       "or mpirun inside the allocation\n", tasks);
    return 2;
  }
  const SweepSpec spec = load_sweep(o.file);
  Progress progress(spec.point_count(), !o.quiet);
  const runner::SweepOptions run = engine_options(o, &progress);
  runner::SweepSummary r;
  {
    const StopOnSignals stop_on_signals;
    r = runner::run_sweep(spec, run);
  }
  return print_summary(spec, r, o.db, false);
}

const Registration sweep_command{
    "sweep", "evaluate every point of a sweep file and store the results", [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<SweepOptions>();
      sub.add_option("FILE", o->file, "sweep file (JSON, see results/README.md)")->required();
      sub.add_option("--db", o->db, "results database (created when missing)")->capture_default_str();
      sub.add_option("--jobs,-j", o->jobs, "worker threads (default: every core)")->check(CLI::Range(1u, 1024u));
      sub.add_flag("--quiet,-q", o->quiet, "no progress output");
      sub.add_flag("--mpi", o->mpi,
                   "spread the points over MPI ranks (automatic under mpirun, mpiexec or srun with several "
                   "ranks); rank 0 stores");
      sub.add_option("--chunk", o->chunk, "MPI: the most points handed to a rank at once (default 64)")
          ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
      // For tests (a backlog of 1 makes rank 0 hold back requests all the time) and tuning.
      sub.add_option("--mpi-backlog", o->backlog, "MPI: outcomes waiting for the writer before rank 0 holds back work")
          ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30))
          ->group("");
      return [o] { return sweep(*o); };
    }};

}  // namespace
}  // namespace clustersim::cli

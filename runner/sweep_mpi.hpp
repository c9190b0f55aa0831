// Sweeps across the ranks of an MPI job, on any number of hosts. Rank 0 opens the
// database and is its only writer (a thread of its own, batched transactions as in
// run_sweep); it hands out chunks of point indices on request, largest first and
// shrinking towards the end (guided self-scheduling), so that slow points never leave
// the other ranks idle. Ranks 1..N-1 evaluate points and send the outcomes back; each
// keeps one chunk in reserve, so it never waits for rank 0 between chunks.
//
// The database decides what is left, as in run_sweep: rank 0 sends every rank the keys
// already stored or failed, a point that fails is recorded and the sweep goes on, a
// stop request (SIGTERM forwarded by mpirun or Slurm) ends the job with what was
// computed committed, and rerunning the command finishes the rest. Stored rows are
// those of run_sweep on the same file (tests/runner/test_sweep_mpi.cpp).
//
// Every rank reads the sweep file itself (a shared or identical path on each host);
// rank 0 checks that all ranks expanded the same sweep.
#pragma once
#include <memory>
#include <string>

#include "runner/sweep.hpp"
#include "scenarios/sweep.hpp"

namespace clustersim::runner {

// Whether this build has MPI (CMake option CLUSTERSIM_MPI).
bool mpi_built();
// Whether an MPI launcher started this process with more than one rank: mpirun/mpiexec
// (Open MPI), or srun / another PMI or PMIx launcher.
bool mpi_launched();

// MPI for the lifetime of the object: MPI_Init_thread on construction, MPI_Finalize on
// destruction. Throws InputError when this build has no MPI.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::string host() const;  // this rank's processor name

 private:
  int rank_ = 0, size_ = 1;
};

struct MpiSweepResult {
  bool root = false;     // rank 0: `spec` and `summary` are the sweep's
  SweepSpec spec;        // rank 0 only
  SweepSummary summary;  // rank 0: as run_sweep's, with jobs = worker ranks; a worker: its own counts
};

// Runs the sweep file `sweep_file` on every rank of `mpi` (size >= 2). On rank 0 it
// throws as run_sweep does (a worker's failure to read the sweep file included); the
// others throw nothing and should exit 0 even then: mpirun aborts the whole job when a
// rank exits nonzero, which could kill rank 0 before it has committed and reported.
// options.jobs is ignored (one worker per rank); options.chunk caps the chunk size.
MpiSweepResult run_sweep_mpi(const MpiSession& mpi, const std::string& sweep_file, const SweepOptions& options);

}  // namespace clustersim::runner

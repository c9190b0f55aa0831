#include "runner/sweep_mpi.hpp"

#include <cstdlib>

#include "scenarios/diagnostics.hpp"

#if CLUSTERSIM_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "results/store.hpp"
#include "runner/sweep_engine.hpp"
#endif

namespace clustersim::runner {

bool mpi_launched() {
  // Open MPI's mpirun, PMI-1/2 launchers (srun --mpi=pmi2, MPICH's Hydra) and PMIx ones
  // (srun --mpi=pmix, prterun) each set their own variables.
  for (const char* size_var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* v = std::getenv(size_var)) return std::atoi(v) > 1;
  return std::getenv("PMIX_RANK") != nullptr;
}

#if !CLUSTERSIM_HAVE_MPI

bool mpi_built() { return false; }
MpiSession::MpiSession() {
  throw InputError("", "", "this clustersim was built without MPI (configure with -DCLUSTERSIM_MPI=ON)");
}
MpiSession::~MpiSession() = default;
std::string MpiSession::host() const { return {}; }
MpiSweepResult run_sweep_mpi(const MpiSession&, const std::string&, const SweepOptions&) {
  throw InputError("", "", "this clustersim was built without MPI");
}

#else

bool mpi_built() { return true; }

MpiSession::MpiSession() {
  // libsimgrid defines MPI_* too (SMPI): if the dynamic linker bound them to it, MPI
  // would abort with SMPI's message; say what is wrong instead.
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &where) && where.dli_fname &&
      std::string_view(where.dli_fname).find("simgrid") != std::string_view::npos)
    throw std::runtime_error(std::string("MPI_Init_thread resolves to ") + where.dli_fname +
                             " (SimGrid's SMPI), not to Open MPI: libmpi must come before libsimgrid "
                             "among the binary's libraries (cli/CMakeLists.txt)");
  int provided = 0;
  // Only the main thread calls MPI; rank 0's writer thread touches SQLite alone.
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

std::string MpiSession::host() const {
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  return std::string(name, static_cast<std::size_t>(len));
}

namespace {

using detail::Outcome;
using Clock = std::chrono::steady_clock;

// Worker -> rank 0: outcomes (the first byte says whether the message only asks for
// work); a worker that cannot run the sweep says why instead. Rank 0 -> worker: a chunk.
enum Tag : int { tag_results = 1, tag_error = 2, tag_work = 3 };
// Chunks a worker asks for before its first result: one to compute, one in reserve.
constexpr int chunks_ahead = 2;

struct Header {
  std::int32_t status = 0;      // 0, or the exit code of rank 0's failure (the workers stop)
  std::uint64_t sweep_hash = 0;  // FNV-1a 64 of the sweep's identity, compared on every rank
  std::uint64_t done_bytes = 0;  // size of the packed done keys that follow
};

struct Work {
  std::uint64_t first = 0, count = 0;  // count 0: no more work
};

std::uint64_t sweep_hash(const SweepSpec& spec) {
  return std::stoull(results::fnv1a64_hex(identity(spec).dump()), nullptr, 16);
}

// MPI counts are ints: large buffers go in pieces.
void bcast_bytes(std::string& bytes, std::uint64_t size) {
  bytes.resize(size);
  constexpr std::uint64_t piece = 1u << 30;
  for (std::uint64_t at = 0; at < size; at += piece)
    MPI_Bcast(bytes.data() + at, static_cast<int>(std::min(piece, size - at)), MPI_CHAR, 0, MPI_COMM_WORLD);
}

void send_bytes(const std::string& bytes, int dest, int tag) {
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) throw std::runtime_error("sweep message over 2 GiB");
  MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD);
}

// Rank 0's writer thread: stores what the dispatcher receives, as run_sweep's writer.
class WriterThread {
 public:
  WriterThread(results::Database& db, std::int64_t sweep_id, const std::string& method, SweepSummary& sum,
               std::function<void(bool final)> report)
      : writer_(db, sweep_id, method, sum), report_(std::move(report)), thread_([this] { loop(); }) {}
  ~WriterThread() {
    close();
    if (thread_.joinable()) thread_.join();
  }

  void push(std::vector<Outcome>&& batch) {
    std::lock_guard lock(mutex_);
    for (auto& x : batch) queue_.push_back(std::move(x));
    backlog_.store(queue_.size());
    ready_.notify_one();
  }
  // Outcomes received and not yet taken by the writer.
  std::size_t backlog() const { return backlog_.load(); }
  bool failed() const { return failed_.load(); }
  // No more outcomes: commits, joins and rethrows the writer's failure.
  void finish() {
    close();
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void close() {
    std::lock_guard lock(mutex_);
    closed_ = true;
    ready_.notify_one();
  }
  void loop() {
    try {
      for (;;) {
        std::deque<Outcome> batch;
        bool closed = false;
        {
          std::unique_lock lock(mutex_);
          ready_.wait_for(lock, std::chrono::milliseconds(100), [&] { return !queue_.empty() || closed_; });
          batch.swap(queue_);
          backlog_.store(0);
          closed = closed_ && batch.empty();
        }
        if (closed) break;
        for (auto& x : batch) writer_.add(std::move(x));
        writer_.maybe_commit();
        report_(false);
      }
      writer_.finish();
    } catch (...) {
      writer_.rollback();
      error_ = std::current_exception();
      failed_.store(true);
    }
  }

  detail::SweepWriter writer_;
  std::function<void(bool)> report_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Outcome> queue_;
  bool closed_ = false;
  std::atomic<bool> failed_{false};
  std::atomic<std::size_t> backlog_{0};
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once everything above exists
};

MpiSweepResult run_root(const MpiSession& mpi, const std::string& sweep_file, const SweepOptions& options) {
  MpiSweepResult out;
  out.root = true;
  SweepSummary& sum = out.summary;
  Header header;
  std::string done_bytes;
  detail::Resume resume;  // the workers get the keys; the indices only decide what is handed out
  std::optional<results::Database> db;
  std::exception_ptr failure;
  try {
    out.spec = load_sweep(sweep_file);
    sum.total = out.spec.point_count();
    db.emplace(options.db_file, results::Database::Mode::read_write);
    sum.sweep_id = db->put_sweep(out.spec.name, out.spec.file, identity(out.spec), static_cast<std::int64_t>(sum.total));
    resume = detail::load_resume(*db, out.spec, sum.sweep_id);
    sum.already_done = sum.resumed_by_index = sum.handled = resume.count;
    done_bytes = detail::pack_keys(resume.keys);
    detail::tune_for_sweep(*db);
    header.sweep_hash = sweep_hash(out.spec);
    header.done_bytes = done_bytes.size();
  } catch (const InputError&) {
    failure = std::current_exception();
    header.status = 1;
  } catch (...) {
    failure = std::current_exception();
    header.status = 3;
  }
  MPI_Bcast(&header, sizeof header, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (failure) std::rethrow_exception(failure);
  bcast_bytes(done_bytes, header.done_bytes);
  done_bytes = std::string();

  const std::size_t total = sum.total;
  const int workers = mpi.size() - 1;
  sum.jobs = static_cast<unsigned>(workers);
  const std::size_t max_chunk = options.chunk ? options.chunk : 64;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  WriterThread writer(*db, sum.sweep_id, out.spec.method, sum, [&](bool final) {
    if (options.progress) options.progress({sum.handled, total, elapsed(), sum.resumed_by_index, final});
  });

  struct Worker {
    int requests_pending = chunks_ahead;  // first messages (work requests) not yet received
    std::size_t in_flight = 0;            // chunks handed out whose outcomes did not come back
    bool told_to_stop = false;
    bool finished = false;
  };
  std::vector<Worker> state(static_cast<std::size_t>(mpi.size()));
  int running = workers;
  std::size_t next = 0;
  std::size_t done_below_next = 0;  // points below `next` that an earlier run did
  std::string worker_error;     // the first worker's failure, reported by rank 0
  std::exception_ptr own_error;  // a message this rank could not read
  auto stopping = [&] {
    return writer.failed() || own_error || !worker_error.empty() || (options.stop && options.stop->load() != 0);
  };
  // Hands `src` its next chunk, or tells it to stop.
  auto answer = [&](int src) {
    Worker& w = state[static_cast<std::size_t>(src)];
    Work work;
    for (; next < total && resume.done(next); ++next) ++done_below_next;  // done by an earlier run: not handed out
    if (!stopping() && next < total) {
      const std::size_t left = total - next - (resume.count - done_below_next);
      const std::size_t guided = (left + 4 * static_cast<std::size_t>(workers) - 1) / (4 * static_cast<std::size_t>(workers));
      work.first = next;
      work.count = 0;
      // A chunk is a run of consecutive points none of which is done.
      while (work.count < std::clamp<std::size_t>(guided, 1, max_chunk) && next < total && !resume.done(next)) {
        ++work.count;
        ++next;
      }
      ++w.in_flight;
    } else {
      w.told_to_stop = true;
    }
    MPI_Send(&work, sizeof work, MPI_BYTE, src, tag_work, MPI_COMM_WORLD);
    if (w.told_to_stop && w.in_flight == 0 && w.requests_pending == 0 && !w.finished) {
      w.finished = true;
      --running;
    }
  };
  // Requests held back while the writer is behind (many fast workers, one SQLite
  // writer): the workers wait instead of this rank's memory growing without bound.
  const std::size_t max_backlog = options.mpi_backlog ? options.mpi_backlog : 20000;
  std::deque<int> deferred;
  std::string buffer;
  std::vector<Outcome> batch;
  auto idle = std::chrono::microseconds(0);
  while (running > 0) {
    while (!deferred.empty() && (writer.backlog() < max_backlog || stopping())) {
      answer(deferred.front());
      deferred.pop_front();
    }
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &status);
    if (!arrived) {
      // Polling with a growing nap (up to 0.5 ms) rather than a blocking receive, which
      // Open MPI implements by spinning on a core that the workers need.
      idle = std::min(std::chrono::microseconds(500), idle * 2 + std::chrono::microseconds(10));
      std::this_thread::sleep_for(idle);
      continue;
    }
    idle = std::chrono::microseconds(0);
    int bytes = 0;
    MPI_Get_count(&status, MPI_CHAR, &bytes);
    buffer.resize(static_cast<std::size_t>(bytes));
    const int src = status.MPI_SOURCE;
    MPI_Recv(buffer.data(), bytes, MPI_CHAR, src, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    Worker& w = state[static_cast<std::size_t>(src)];
    if (status.MPI_TAG == tag_error) {
      if (worker_error.empty()) worker_error = fmt::format("rank {}: {}", src, buffer);
      w.finished = true;  // it sends nothing more
      --running;
      continue;
    }
    const bool request_only = !buffer.empty() && buffer.front() == 1;
    if (request_only) --w.requests_pending;
    else --w.in_flight;
    // Answer first, so that the worker's reserve is refilled while this rank stores.
    if (writer.backlog() < max_backlog || stopping()) answer(src);
    else deferred.push_back(src);
    if (!request_only && !own_error) {
      // Every worker must still be told to stop: a failure here ends the dispatch loop
      // only through stopping().
      try {
        batch.clear();
        detail::decode(std::string_view(buffer).substr(1), batch);
        writer.push(std::move(batch));
      } catch (...) {
        own_error = std::current_exception();
      }
    }
  }
  writer.finish();  // rethrows the writer's failure
  if (own_error) std::rethrow_exception(own_error);
  sum.seconds = elapsed();
  if (!worker_error.empty()) throw InputError(sweep_file, "", worker_error);
  if (options.progress) options.progress({sum.handled, total, sum.seconds, sum.resumed_by_index, true});
  sum.stopped_by = options.stop ? options.stop->load() : 0;
  return out;
}

MpiSweepResult run_worker(const std::string& sweep_file, const SweepOptions& options) {
  MpiSweepResult out;
  Header header;
  MPI_Bcast(&header, sizeof header, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (header.status != 0) return out;  // rank 0 reports its failure
  std::string done_bytes;
  bcast_bytes(done_bytes, header.done_bytes);
  const detail::DoneKeys done = detail::unpack_keys(done_bytes);
  done_bytes = std::string();
  SweepSpec spec;
  try {
    spec = load_sweep(sweep_file);
    if (sweep_hash(spec) != header.sweep_hash)
      throw InputError(sweep_file, "", "this rank's copy of the sweep differs from rank 0's (base or axes)");
  } catch (const std::exception& e) {
    send_bytes(e.what(), 0, tag_error);  // rank 0 reports it and fails the job
    return out;
  }
  SweepSummary& sum = out.summary;
  sum.total = spec.point_count();
  const std::string request(1, '\1');
  for (int i = 0; i < chunks_ahead; ++i) send_bytes(request, 0, tag_results);
  int pending = chunks_ahead;  // requests not answered yet
  bool stop = false;
  detail::Worker worker(spec);
  std::string message;
  const auto start = Clock::now();
  while (pending > 0) {
    Work work;
    MPI_Recv(&work, sizeof work, MPI_BYTE, 0, tag_work, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    --pending;
    if (work.count == 0) stop = true;
    if (stop) continue;  // drain the answers to the requests still pending
    message.assign(1, '\0');
    for (std::uint64_t i = work.first; i < work.first + work.count; ++i) {
      // On a stop request the rest of the chunk is left for the rerun.
      if (options.stop && options.stop->load() != 0) break;
      const Outcome o = detail::evaluate(spec, static_cast<std::size_t>(i), done, worker);
      ++sum.handled;
      detail::encode(o, message);
    }
    send_bytes(message, 0, tag_results);
    ++pending;
  }
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace

MpiSweepResult run_sweep_mpi(const MpiSession& mpi, const std::string& sweep_file, const SweepOptions& options) {
  if (mpi.size() < 2) throw InputError(sweep_file, "", "an MPI sweep needs at least 2 ranks (rank 0 stores)");
  return mpi.rank() == 0 ? run_root(mpi, sweep_file, options) : run_worker(sweep_file, options);
}

#endif

}  // namespace clustersim::runner

// What the two sweep drivers share (threads: runner/sweep.cpp; MPI ranks:
// runner/sweep_mpi.cpp): evaluating one point into an Outcome on a worker, the single
// writer that stores outcomes in batched transactions, and the bytes an Outcome
// travels in between MPI ranks. Internal to runner/.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "results/store.hpp"
#include "runner/sweep.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/sweep.hpp"

namespace clustersim {
class Estimator;
}

namespace clustersim::runner::detail {

struct Outcome {
  enum class Kind : std::uint8_t { stored, failed, invalid_skipped, already_done } kind = Kind::failed;
  std::size_t index = 0;
  std::string key;        // scenario hash (valid points) or hash of the point document
  std::string axes_json;  // this point's axis values (failed points)
  std::string error;
  std::optional<results::RunRow> row;  // stored points: everything the writer inserts
};

// Estimators are keyed by what they are built from (model, training, cluster), so a
// sweep over plans builds one per worker.
class EstimatorCache {
 public:
  EstimatorCache();
  ~EstimatorCache();
  const Estimator& get(const Scenario& s, const results::ScenarioText& text);
  // The hardware profile's provenance, serialised once per profile.
  const std::string& provenance_json(const results::HardwareRecord& h);
  // The analytical result's "tool" object, serialised once per method and profile.
  const std::string& tool_json(const std::string& method, const Estimator& est);

 private:
  std::map<std::string, std::unique_ptr<Estimator>, std::less<>> cache_;
  std::map<std::string, std::pair<nlohmann::json, std::string>, std::less<>> provenance_;
  std::map<std::string, std::string, std::less<>> tool_;
};

// What a worker keeps from one point to the next.
struct Worker {
  explicit Worker(const SweepSpec& spec) : points(spec) {}
  EstimatorCache estimators;
  SweepPointParser points;
};

// Keys of the points already stored or recorded as failed (Database::done_points).
using DoneKeys = std::set<std::string>;

// Evaluates point `index` of `spec` (everything but storing it).
Outcome evaluate(const SweepSpec& spec, std::size_t index, const DoneKeys& done, Worker& worker);

// What earlier runs of the same sweep left in the database. The sweep's identity (base
// document, axes, method, skip rule) already matched to find its id, so a stored point
// index names the same point today, as long as the point still derives to the stored
// key: that is checked once, on a few stored points, not for each. Points found by
// index are skipped without being derived (a resume of 9,000 done points re-derived
// them all at about 5,000/s); the keys still catch a point that duplicates a done one.
struct Resume {
  DoneKeys keys;
  std::vector<std::uint8_t> by_index;  // 1: point i is done; empty when nothing is known by index
  std::size_t count = 0;               // indices set in by_index
  bool done(std::size_t i) const { return i < by_index.size() && by_index[i]; }
};
Resume load_resume(results::Database& db, const SweepSpec& spec, std::int64_t sweep_id);

// The single writer: counts every outcome into `sum` and inserts the new ones in
// transactions of up to 2,000 points or 0.5 s, which bounds what a SIGKILL can lose
// and amortises each commit.
class SweepWriter {
 public:
  SweepWriter(results::Database& db, std::int64_t sweep_id, std::string method, SweepSummary& sum);
  void add(Outcome&& o);
  // Commits when the batch is large or old enough.
  void maybe_commit();
  void commit();
  // The last commit, then a checkpoint: the sweep leaves no large write-ahead log.
  void finish();
  // Rolls back the open transaction, if any (the writer failed).
  void rollback() noexcept;

 private:
  results::Database& db_;
  std::int64_t sweep_id_;
  std::string method_;
  SweepSummary& sum_;
  // Two points of one sweep may be the same scenario. Hashed: an ordered set of the
  // scenario hashes (one node and one string per point) was about 5% of the writer's
  // time on the benchmark (cache misses walking the tree).
  std::unordered_set<std::string> stored_now_;
  bool in_tx_ = false;
  std::size_t since_commit_ = 0;
  std::chrono::steady_clock::time_point last_commit_ = std::chrono::steady_clock::now();
};

// Prepares the database for a long write-heavy run: a larger page cache so that a
// batch is written once at commit instead of spilled page by page, and fewer, larger
// WAL checkpoints.
void tune_for_sweep(results::Database& db);

// Outcomes as bytes (MPI messages): fixed-size integers in the machine's order (the
// ranks of one job run the same build), doubles bit for bit, strings with their length.
void encode(const Outcome& o, std::string& out);
// Appends the outcomes found in `bytes` to `out`; throws std::runtime_error on
// truncated input.
void decode(std::string_view bytes, std::vector<Outcome>& out);

// Done keys as one string (newline-separated) and back.
std::string pack_keys(const DoneKeys& keys);
DoneKeys unpack_keys(std::string_view packed);

}  // namespace clustersim::runner::detail

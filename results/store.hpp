// The results database: one SQLite file holding scenarios, hardware profiles, plans,
// simulated (and analytical) runs, measured runs, sweeps and calibration samples, with
// a versioned schema and forward-only migrations (results/README.md documents both).
//
// Opening never modifies a file it cannot vouch for: a file that is not SQLite, a
// SQLite file of another application, a corrupt file or one from a newer schema is an
// InputError and the file is left byte for byte as it was.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "scenarios/json_writer.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim::results {

// The schema this build writes. Version N is reached from 0 by migrations 1..N.
inline constexpr int schema_version = 2;
// PRAGMA application_id of a clustersim database ("CSIM"), so that another program's
// SQLite file is recognised and left alone.
inline constexpr std::int32_t application_id = 0x4353494d;

// 64-bit FNV-1a of `bytes`, as 16 lower-case hex digits.
std::string fnv1a64_hex(std::string_view bytes);
// Identity of a scenario: FNV-1a 64 of the canonical JSON (scenarios::to_json, keys
// sorted, compact dump) with "name" and "description" removed, since neither changes
// what is computed. Equal hashes join simulated and measured runs.
std::string scenario_hash(const nlohmann::json& canonical_scenario);

// UTC now as "2026-11-26T01:40:00Z".
std::string utc_now();

struct HardwareRecord {
  std::string name;             // profile name ("a100-sxm4-80gb")
  std::string status;           // "datasheet", "calibrated"
  nlohmann::json provenance = nlohmann::json::object();  // sources, calibration id...
};

struct Provenance {
  std::string tool_version, git_revision;
  std::string simgrid_version;                            // empty unless simulated
  nlohmann::json simgrid_config = nlohmann::json();       // null unless simulated
};

struct RunRecord {
  std::string method;           // "analytical", "simulated", "search"
  nlohmann::json scenario;      // canonical scenario (to_json)
  nlohmann::json result;        // the run's whole JSON output
  HardwareRecord hardware;
  Provenance provenance;
  std::optional<std::int64_t> sweep_id;
  std::int64_t point_index = -1;
  nlohmann::json axes = nlohmann::json();  // the sweep axis values of this point
};

// A JSON object serialised once (compact, keys sorted), with where each top-level
// value lies in the text.
struct JsonText {
  std::string json;
  // The dump of one top-level value (a view into `json`); empty when absent.
  std::string_view section(std::string_view key) const;
  std::vector<std::pair<std::string, std::pair<std::size_t, std::size_t>>> spans;  // key -> [begin, end) in json
};
// A tree's dump() and spans.
JsonText json_text(const nlohmann::json& object);
// Text written by a JsonWriter, with the members its last end_object() gave.
JsonText json_text(std::string json, const std::vector<JsonWriter::Member>& members);

// A canonical scenario serialised once: its dump() and its scenario_hash(), assembled
// from one dump of each top-level value (a sweep needs both, and the sections, for
// every point).
struct ScenarioText : JsonText {
  std::string hash;  // scenario_hash(canonical)
};
ScenarioText scenario_text(const nlohmann::json& canonical);
// The same bytes written from the typed scenario (write_json), without a tree.
ScenarioText scenario_text(const Scenario& s);

// One run as the columns it is stored in, every document already serialised. A sweep's
// workers build it, so that the single writer (a thread, or MPI rank 0 receiving it as
// bytes) only binds and inserts.
struct RunRow {
  // The headline figures, in this order, as stored in their own columns.
  static constexpr std::array<const char*, 7> figure_keys{
      "iteration_time_s", "tokens_per_s", "samples_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "mfu",
      "memory_per_gpu_bytes"};
  std::string method;
  std::string scenario_hash, scenario_name, model_family, gpu, scenario_json;
  std::int64_t gpus = 0;
  std::string plan_json;
  std::string hardware_name, hardware_status, hardware_provenance_json;
  std::optional<std::int64_t> sweep_id;
  std::int64_t point_index = -1;
  std::optional<std::string> axes_json;
  std::array<std::optional<double>, figure_keys.size()> figures;
  std::optional<std::int64_t> fits;  // 0 or 1
  std::string result_json, tool_version, git_revision;
  std::optional<std::string> simgrid_version, simgrid_config_json;
};
// The row of a record; `text` when the caller already serialised the scenario, and
// `hardware_provenance_json` the hardware's provenance (the same for every point).
RunRow run_row(const RunRecord& r);
RunRow run_row(const RunRecord& r, ScenarioText text, const std::string* hardware_provenance_json = nullptr);
// What a row reads from the scenario and the result, already serialised: a sweep writes
// both documents straight to text (no trees). The headline figures, `fits` and the plan
// (the result's "plan", else the scenario's) are read from the result's text.
struct RunDocuments {
  ScenarioText scenario;
  std::string scenario_name, model_family, gpu;
  std::int64_t gpus = 0;
  JsonText result;
};
RunDocuments run_documents(const Scenario& s, ScenarioText scenario, JsonText result);
// The row of `r` (method, hardware, provenance, sweep point; its trees are not read) and `docs`.
RunRow run_row(const RunRecord& r, RunDocuments docs, const std::string* hardware_provenance_json = nullptr);

struct MeasuredRecord {
  std::string name, source, file;
  nlohmann::json scenario;      // canonical, completed scenario
  nlohmann::json measured;      // the "measured" object as imported
  nlohmann::json environment;   // the "environment" object as imported
};

// A measured serving run (a real engine under a request load): its serving scenario, the
// summary computed from its requests by the simulator's own rule (sim::summarize_requests),
// the per-request records and the provenance (GPU, engine and its version, date).
struct MeasuredServingRecord {
  std::string name, source, file;
  nlohmann::json scenario;     // canonical serving scenario
  nlohmann::json summary;      // ttft_s, tpot_s, e2e_s, tbt_s, throughput_rps... as a served run's result
  nlohmann::json requests;     // one object per request, as measured
  nlohmann::json environment;  // gpu, engine, engine_version, torch, cuda, date_utc, ...
};

// Not thread-safe: one thread at a time uses a Database (it may be handed over to
// another thread); threads that read or write at once open a Database each.
class Database {
 public:
  enum class Mode { read_write, read_only };
  // read_write creates the file when missing and migrates an older schema;
  // read_only requires an existing database of this schema version or older.
  Database(const std::string& file, Mode mode);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  const std::string& file() const { return file_; }
  int version() const;

  // Writes go through transactions; callers batch many inserts in one.
  void begin();
  void commit();
  // Never throws: a no-op when SQLite has already ended the transaction (a full disk).
  void rollback();
  // Copies the write-ahead log into the database file and truncates the log, without
  // waiting: where another connection is reading or writing, copies what it can and
  // leaves the rest to the next checkpoint (the next writer's, or the last close's).
  void checkpoint();

  std::int64_t put_scenario(const nlohmann::json& canonical);  // idempotent, returns id
  std::int64_t put_scenario(const nlohmann::json& canonical, const std::string& hash, const std::string& dump);
  std::int64_t put_hardware(const HardwareRecord& h);          // idempotent
  std::int64_t put_plan(const nlohmann::json& plan);           // idempotent
  // The new run's id; 0 when a run of the same sweep point (sweep, scenario, method) is
  // already stored, by another process running the same sweep at the same time.
  std::int64_t add_run(const RunRecord& r);
  std::int64_t add_run(const RunRow& r);
  // Idempotent on (scenario, source, name, date): a re-import returns the existing id.
  std::int64_t add_measured(const MeasuredRecord& m);
  // Idempotent on (scenario, source, name, date): a re-import returns the existing id.
  std::int64_t add_measured_serving(const MeasuredServingRecord& m);
  // A sweep is identified by the hash of its expanded specification; a rerun of the
  // same sweep file gets the same id back.
  std::int64_t put_sweep(const std::string& name, const std::string& file, const nlohmann::json& spec,
                         std::int64_t points);
  // One kernel or collective timing on a hardware profile (for calibration).
  std::int64_t add_calibration_sample(const HardwareRecord& hardware, const std::string& kind,
                                      const nlohmann::json& shape, double measured_s, std::optional<double> predicted_s,
                                      const std::string& source);
  std::vector<nlohmann::json> calibration_samples(const std::string& hardware_name) const;
  void add_failed_point(std::int64_t sweep_id, std::int64_t point_index, const std::string& point_key,
                        const std::string& method, const nlohmann::json& axes, const std::string& error);
  // Keys of the points of a sweep already stored for `method`: scenario hashes of
  // runs and point keys of failures. A resumed sweep skips them.
  std::set<std::string> done_points(std::int64_t sweep_id, const std::string& method);
  // The same points with their point index, by index (runs first on a tie): a resumed
  // sweep skips these indices without re-deriving them.
  struct DonePoint {
    std::int64_t index = -1;
    std::string key;  // scenario hash (run) or point key (failure)
    bool failed = false;
  };
  std::vector<DonePoint> done_point_list(std::int64_t sweep_id, const std::string& method);

  // Reading. Rows are JSON objects whose keys are the column names.
  // Simulated, measured and measured serving runs, newest first.
  std::vector<nlohmann::json> list_runs(std::int64_t limit) const;
  std::optional<nlohmann::json> simulated_run(std::int64_t id) const;
  std::optional<nlohmann::json> measured_run(std::int64_t id) const;
  // A measured serving run with its scenario columns (none before schema version 2).
  std::optional<nlohmann::json> measured_serving_run(std::int64_t id) const;
  // Every measured run with the latest simulated run of `method` for the same scenario.
  std::vector<nlohmann::json> compare_rows(const std::string& method) const;
  // Every measured serving run with the latest served run ("clustersim serve --db") of the
  // same scenario: measured_json (its summary) beside served_json (the run's result).
  std::vector<nlohmann::json> serving_compare_rows() const;
  // The measured serving runs' columns (without the per-request records), by id.
  std::vector<nlohmann::json> measured_serving_runs() const;
  // Simulated runs (all, or one sweep's), with scenario columns and axes, by id.
  std::vector<nlohmann::json> export_runs(std::optional<std::int64_t> sweep_id) const;
  std::vector<nlohmann::json> sweeps() const;
  std::vector<nlohmann::json> failed_points(std::int64_t sweep_id) const;
  std::int64_t count(std::string_view table) const;
  // "ok" or SQLite's list of problems.
  std::string integrity_check() const;

  // Runs one statement and returns its rows (for tests and ad-hoc reading).
  std::vector<nlohmann::json> query(const std::string& sql) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string file_;
};

}  // namespace clustersim::results

// The SQLite store: opening with checks, migrations, inserts and the read queries the
// CLI needs. The schema is documented in results/README.md; the migrations below are
// its only definition.
#include "results/store.hpp"

#include <sqlite3.h>

#include <unistd.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <thread>
#include <type_traits>
#include <variant>

#include "results/json_text.hpp"
#include "results/sqlite_vfs.hpp"
#include "scenarios/diagnostics.hpp"

namespace clustersim::results {

std::string fnv1a64_hex(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string scenario_hash(const nlohmann::json& canonical_scenario) {
  nlohmann::json j = canonical_scenario;
  if (j.is_object()) {
    j.erase("name");
    j.erase("description");
  }
  return fnv1a64_hex(j.dump());
}

std::string utc_now() {
  // Formatted once per second and thread: a sweep stamps thousands of rows a second,
  // and gmtime_r + strftime for each was 1.5 k instructions of the writer's row.
  thread_local std::time_t last = -1;
  thread_local char buf[32];
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  if (t != last) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    last = t;
  }
  return buf;
}

namespace {

// Migration i (1-based) takes a database from version i-1 to version i. Never edit a
// released migration: add the next one.
const std::array<const char*, schema_version> migrations{R"sql(
CREATE TABLE scenarios(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  model_family TEXT NOT NULL,
  gpu TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  canonical_json TEXT NOT NULL);
CREATE TABLE hardware_profiles(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  provenance_json TEXT NOT NULL,
  UNIQUE(name, status, provenance_json));
CREATE TABLE plans(
  id INTEGER PRIMARY KEY,
  hash TEXT NOT NULL UNIQUE,
  plan_json TEXT NOT NULL);
CREATE TABLE sweeps(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  file TEXT NOT NULL,
  spec_hash TEXT NOT NULL UNIQUE,
  spec_json TEXT NOT NULL,
  points INTEGER NOT NULL,
  created_utc TEXT NOT NULL);
CREATE TABLE simulated_runs(
  id INTEGER PRIMARY KEY,
  scenario_id INTEGER NOT NULL REFERENCES scenarios(id),
  plan_id INTEGER NOT NULL REFERENCES plans(id),
  hardware_id INTEGER NOT NULL REFERENCES hardware_profiles(id),
  sweep_id INTEGER REFERENCES sweeps(id),
  point_index INTEGER,
  axes_json TEXT,
  method TEXT NOT NULL,
  iteration_time_s REAL,
  tokens_per_s REAL,
  samples_per_s REAL,
  tflops_per_gpu REAL,
  model_tflops_per_gpu REAL,
  mfu REAL,
  memory_per_gpu_bytes REAL,
  fits INTEGER,
  result_json TEXT NOT NULL,
  tool_version TEXT NOT NULL,
  git_revision TEXT NOT NULL,
  simgrid_version TEXT,
  simgrid_config_json TEXT,
  created_utc TEXT NOT NULL);
CREATE INDEX simulated_runs_by_scenario ON simulated_runs(scenario_id, method);
CREATE UNIQUE INDEX simulated_runs_one_per_sweep_point
  ON simulated_runs(sweep_id, scenario_id, method) WHERE sweep_id IS NOT NULL;
CREATE TABLE failed_points(
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id),
  point_index INTEGER NOT NULL,
  point_key TEXT NOT NULL,
  method TEXT NOT NULL,
  axes_json TEXT NOT NULL,
  error TEXT NOT NULL,
  UNIQUE(sweep_id, point_key, method));
CREATE TABLE measured_runs(
  id INTEGER PRIMARY KEY,
  scenario_id INTEGER NOT NULL REFERENCES scenarios(id),
  name TEXT NOT NULL,
  source TEXT NOT NULL,
  file TEXT NOT NULL,
  gpu TEXT, driver TEXT, cuda TEXT, cudnn TEXT, nccl TEXT, torch TEXT, python TEXT, hostname TEXT,
  date_utc TEXT NOT NULL,
  step_time_s REAL NOT NULL,
  forward_time_s REAL, backward_time_s REAL, optimizer_time_s REAL,
  peak_memory_bytes REAL, peak_reserved_bytes REAL, tokens_per_s REAL, parameters REAL,
  steps_measured INTEGER,
  measured_json TEXT NOT NULL,
  environment_json TEXT NOT NULL,
  imported_utc TEXT NOT NULL,
  UNIQUE(scenario_id, source, name, date_utc));
CREATE TABLE calibration_samples(
  id INTEGER PRIMARY KEY,
  hardware_id INTEGER NOT NULL REFERENCES hardware_profiles(id),
  kind TEXT NOT NULL,
  shape_json TEXT NOT NULL,
  measured_s REAL NOT NULL,
  predicted_s REAL,
  source TEXT NOT NULL,
  created_utc TEXT NOT NULL);
)sql",
// 2: measured serving runs (`db import-serving`), compared with served runs.
R"sql(
CREATE TABLE measured_serving_runs(
  id INTEGER PRIMARY KEY,
  scenario_id INTEGER NOT NULL REFERENCES scenarios(id),
  name TEXT NOT NULL,
  source TEXT NOT NULL,
  file TEXT NOT NULL,
  gpu TEXT, engine TEXT, engine_version TEXT, torch TEXT, cuda TEXT,
  date_utc TEXT NOT NULL,
  request_count INTEGER NOT NULL,
  ttft_p50_s REAL, ttft_p90_s REAL, ttft_p99_s REAL,
  tpot_p50_s REAL, tpot_p90_s REAL, tpot_p99_s REAL,
  e2e_p50_s REAL, e2e_p90_s REAL, e2e_p99_s REAL,
  throughput_rps REAL, output_tokens_per_s REAL,
  summary_json TEXT NOT NULL,
  requests_json TEXT NOT NULL,
  environment_json TEXT NOT NULL,
  imported_utc TEXT NOT NULL,
  UNIQUE(scenario_id, source, name, date_utc));
)sql"};

// A string_view is bound without a copy (SQLITE_STATIC): the caller keeps the text
// alive until the statement has stepped (add_run's large documents).
using Value = std::variant<std::nullptr_t, std::int64_t, double, std::string, std::string_view>;

// A failure of SQLite. What the user's machine caused (a full disk, a read-only file or
// folder, an I/O error, a lock held too long by another process, a damaged file) is an
// InputError naming the database and what to do (exit 1); anything else is a bug of
// ours (exit 3). `what` is SQLite's message.
[[noreturn]] void sqlite_failure(sqlite3* db, int rc, const std::string& what) {
  const char* name = db ? sqlite3_db_filename(db, "main") : nullptr;
  const std::string file = name && *name ? name : "results database";
  // The errno of the write that failed, recorded by the VFS as it failed; SQLite's own
  // (the errno when the error reached the connection, after the rollback) otherwise.
  const int recorded = last_io_errno();
  clear_io_errno();
  const int sys = recorded != 0 ? recorded : db ? sqlite3_system_errno(db) : 0;
  const std::string why = sys != 0 ? fmt::format(" ({})", std::strerror(sys)) : std::string();
  switch (rc & 0xff) {
    case SQLITE_FULL:
      throw InputError(file, "", "the disk is full: the database could not be written" + why +
                                     "; what was committed before is kept (free space and run again; a sweep resumes "
                                     "where it stopped)");
    case SQLITE_IOERR:
      if (sys == ENOSPC || sys == EDQUOT)
        throw InputError(file, "", "the disk is full: the database could not be written" + why +
                                       "; what was committed before is kept (free space and run again; a sweep "
                                       "resumes where it stopped)");
      throw InputError(file, "", "I/O error on the database" + why + ": " + what +
                                     "; what was committed before is kept");
    case SQLITE_READONLY:
      throw InputError(file, "", "the database cannot be written here (a read-only file, folder or file system): " +
                                     what);
    case SQLITE_CANTOPEN: throw InputError(file, "", "cannot open the database" + why + ": " + what);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      throw InputError(file, "", "another process kept the database locked for more than 10 s (" + what +
                                     "); run again when it is done");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: throw InputError(file, "", "corrupt results database (" + what + ")");
    default: throw std::runtime_error("SQLite: " + what);
  }
}

class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    const int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
    if (rc != SQLITE_OK) sqlite_failure(db, rc, std::string(sqlite3_errmsg(db)) + " in: " + sql);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds `values` to the parameters 1..n; parameters beyond them are set to NULL. A
  // statement that binds every parameter again skips the clearing (sqlite3_clear_bindings
  // on a sweep's 21-column insert was about 800 instructions a row).
  Statement& bind(std::initializer_list<Value> values) {
    reset();
    if (static_cast<int>(values.size()) < sqlite3_bind_parameter_count(stmt_)) sqlite3_clear_bindings(stmt_);
    int i = 1;
    for (const auto& v : values) {
      int rc = SQLITE_OK;
      if (std::holds_alternative<std::nullptr_t>(v)) rc = sqlite3_bind_null(stmt_, i);
      else if (auto* n = std::get_if<std::int64_t>(&v)) rc = sqlite3_bind_int64(stmt_, i, *n);
      else if (auto* d = std::get_if<double>(&v)) rc = sqlite3_bind_double(stmt_, i, *d);
      else if (auto* sv = std::get_if<std::string_view>(&v))
        rc = sqlite3_bind_text(stmt_, i, sv->data(), static_cast<int>(sv->size()), SQLITE_STATIC);
      else {
        const auto& s = std::get<std::string>(v);
        rc = sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      }
      if (rc != SQLITE_OK) throw std::runtime_error("SQLite bind: " + std::string(sqlite3_errmsg(db_)));
      ++i;
    }
    return *this;
  }
  // True while a row is available.
  bool step() {
    clear_io_errno();
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite_failure(db_, rc, std::string(sqlite3_errmsg(db_)) + " in: " + sqlite3_sql(stmt_));
  }
  nlohmann::json row() const {
    nlohmann::json r = nlohmann::json::object();
    const int n = sqlite3_column_count(stmt_);
    for (int c = 0; c < n; ++c) {
      const char* name = sqlite3_column_name(stmt_, c);
      switch (sqlite3_column_type(stmt_, c)) {
        case SQLITE_INTEGER: r[name] = sqlite3_column_int64(stmt_, c); break;
        case SQLITE_FLOAT: r[name] = sqlite3_column_double(stmt_, c); break;
        case SQLITE_NULL: r[name] = nullptr; break;
        default: r[name] = std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt_, c)),
                                       static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c)));
      }
    }
    return r;
  }
  std::int64_t int64(int c) const { return sqlite3_column_int64(stmt_, c); }
  std::string text(int c) const {
    const auto* p = sqlite3_column_text(stmt_, c);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }
  // Ends the statement's execution (its read or write of the database); the bindings
  // stay until the next bind() replaces them.
  void reset() { sqlite3_reset(stmt_); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

Value opt_number(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return nullptr;
}
Value opt_string(const nlohmann::json& j, const char* key) {
  if (j.is_object() && j.contains(key) && !j[key].is_null())
    return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
  return nullptr;
}

bool has_sqlite_header(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char head[16] = {};
  in.read(head, sizeof head);
  return in.gcount() == 16 && std::string_view(head, 16) == std::string_view("SQLite format 3\0", 16);
}

}  // namespace

struct Database::Impl {
  sqlite3* db = nullptr;
  std::string file;
  // Prepared once per connection: a sweep inserts thousands of rows a second and
  // preparing the same SQL each time would cost more than the insert.
  std::map<const char*, std::unique_ptr<Statement>> statements;
  // Ids of plans and hardware profiles this connection wrote or found (add_run).
  std::map<std::string, std::int64_t, std::less<>> plan_ids, hardware_ids;
  struct LastHardware {
    std::string name, status, provenance_json;
    std::int64_t id = 0;
  } last_hardware;
  ~Impl() {
    statements.clear();
    sqlite3_close_v2(db);
  }
  // Keyed by the address of the SQL text (callers pass string literals): finding a
  // statement costs no string building or comparison, which on a sweep's thousands of
  // inserts a second showed in the profile.
  Statement& cached(const char* sql) {
    auto& st = statements[sql];
    if (!st) st = std::make_unique<Statement>(db, sql);
    return *st;
  }

  void exec(const std::string& sql) const {
    char* err = nullptr;
    clear_io_errno();
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      sqlite_failure(db, rc, msg + " in: " + sql);
    }
  }
  std::vector<nlohmann::json> rows(const std::string& sql, std::initializer_list<Value> values = {}) const {
    Statement st(db, sql);
    st.bind(values);
    std::vector<nlohmann::json> out;
    while (st.step()) out.push_back(st.row());
    return out;
  }
  std::int64_t scalar(const std::string& sql, std::initializer_list<Value> values = {}) const {
    Statement st(db, sql);
    st.bind(values);
    return st.step() ? st.int64(0) : 0;
  }
  std::string text(const std::string& sql) const {
    Statement st(db, sql);
    return st.step() ? st.text(0) : std::string();
  }
  // Switching a new database to WAL while another process does the same can return
  // SQLITE_BUSY without calling the busy handler (two sweeps started at once on a new
  // file failed with "database is locked" at once): retry for the busy timeout's 10 s.
  void exec_retrying_busy(const std::string& sql) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      clear_io_errno();
      const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
      if (rc == SQLITE_OK) return;
      if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() > until)
        sqlite_failure(db, rc, std::string(sqlite3_errmsg(db)) + " in: " + sql);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Ends a failed transaction. SQLite has already rolled back on some errors (a full
  // disk): a second ROLLBACK would fail with "no transaction is active" and hide the
  // real error, so it is skipped, and its own failure is not thrown over that error.
  void rollback_quietly() noexcept {
    if (db && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  // Inserts (ignoring a duplicate) and returns the id of the row with that unique key.
  std::int64_t put(const char* insert, const char* select, std::initializer_list<Value> values,
                   std::initializer_list<Value> key) {
    Statement& ins = cached(insert);
    ins.bind(values);
    ins.step();
    ins.reset();
    if (sqlite3_changes(db) == 1) return sqlite3_last_insert_rowid(db);
    Statement& sel = cached(select);
    sel.bind(key);
    if (!sel.step()) throw std::runtime_error(std::string("SQLite: row vanished after insert: ") + select);
    const std::int64_t id = sel.int64(0);
    sel.reset();
    return id;
  }
};

Database::Database(const std::string& file, Mode mode) : impl_(std::make_unique<Impl>()), file_(file) {
  namespace fs = std::filesystem;
  auto fail = [&](const std::string& msg) { throw InputError(file, "", msg); };
  // SQLite opens "" as a private temporary database that vanishes on close: a sweep
  // would run to the end and keep nothing.
  if (file.empty())
    throw InputError("command line", "--db", "the results database file name is empty (give a file, e.g. --db runs.db)");
  std::error_code ec;
  const bool exists = fs::exists(file, ec);
  const bool empty = exists && fs::is_regular_file(file, ec) && fs::file_size(file, ec) == 0;
  if (exists && !fs::is_regular_file(file, ec)) fail("not a regular file");
  if (!exists && mode == Mode::read_only) fail("no such results database");
  // SQLite would happily turn a text file into a database on the first write; check
  // the header first so that a wrong --db argument never damages anything.
  if (exists && !empty && !has_sqlite_header(file))
    fail("not a SQLite database (the file does not start with the SQLite header); left untouched");

  // A database in WAL mode is read through its -shm and -wal files, which SQLite
  // creates beside it, and a read-only connection leaves them behind. Where this
  // process cannot write (a read-only file, folder or file system) and no writer has a
  // -wal open, the file is read as immutable: no side files, no locks.
  const fs::path folder = fs::absolute(fs::path(file), ec).parent_path();
  const bool folder_writable = ::access(folder.c_str(), W_OK) == 0;
  const int folder_errno = errno;
  const bool file_writable = exists && ::access(file.c_str(), W_OK) == 0;
  const int file_errno = errno;
  if (mode == Mode::read_write && ((exists && !file_writable) || !folder_writable)) {
    const bool file_side = exists && !file_writable;
    fail(fmt::format("the database cannot be written here (the {} {}: {}); read-only commands (db list, db show, db "
                     "export) still work on it",
                     file_side ? "file" : "folder", file_side ? file : folder.string(),
                     std::strerror(file_side ? file_errno : folder_errno)));
  }
  const bool wal_in_use = fs::exists(file + "-wal", ec) && fs::file_size(file + "-wal", ec) > 0;
  const bool immutable = mode == Mode::read_only && (!file_writable || !folder_writable) && !wal_in_use;
  std::string name = file;
  int flags = mode == Mode::read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (immutable) {
    name = "file:";
    for (const unsigned char c : file) {
      if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '-' || c == '~') name += static_cast<char>(c);
      else name += fmt::format("%{:02X}", c);
    }
    name += "?immutable=1";
    flags |= SQLITE_OPEN_URI;
  }
  // SQLite's memory statistics (sqlite3_memory_used and friends, which nothing here
  // reads) take a process-wide mutex around every allocation: off, before SQLite
  // initialises (the VFS below is its first call; later, the call is refused and
  // changes nothing). A sweep's writer spent about 3 k instructions a row on them.
  static const int memstatus_off = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)memstatus_off;
  clear_io_errno();
  // No connection mutex (SQLITE_OPEN_NOMUTEX; it was FULLMUTEX): a Database is used by
  // one thread at a time (the sweep's writer thread, or MPI rank 0's, after the thread
  // that opened it handed it over), and its own statement cache and id maps are not
  // synchronised either, so SQLite's lock around every API call protected nothing and
  // cost about 90 instructions a call, 2.5 k per stored sweep point.
  if (sqlite3_open_v2(name.c_str(), &impl_->db, flags | SQLITE_OPEN_NOMUTEX, errno_recording_vfs()) != SQLITE_OK)
    fail(std::string("cannot open: ") + sqlite3_errmsg(impl_->db));
  sqlite3_busy_timeout(impl_->db, 10000);
  sqlite3_extended_result_codes(impl_->db, 1);

  int version = 0;
  std::int64_t app = 0, tables = 0;
  try {
    // One statement, so one snapshot: read one by one, another process creating the
    // same new database could commit its schema between the reads, and this one saw
    // tables without the application id ("not a clustersim results database").
    Statement st(impl_->db,
                 "SELECT (SELECT user_version FROM pragma_user_version), (SELECT application_id FROM "
                 "pragma_application_id), (SELECT count(*) FROM sqlite_master)");
    if (st.step()) {
      version = static_cast<int>(st.int64(0));
      app = st.int64(1);
      tables = st.int64(2);
    }
  } catch (const std::exception& e) {
    fail(std::string("unreadable or corrupt SQLite database (") + e.what() + "); left untouched");
  }
  if (app != 0 && app != application_id)
    fail("a SQLite database of another application (application_id " + std::to_string(app) + "); left untouched");
  if (app == 0 && tables > 0)
    fail("a SQLite database that is not a clustersim results database; left untouched");
  if (version > schema_version)
    fail("results database schema version " + std::to_string(version) + " is newer than this clustersim supports (" +
         std::to_string(schema_version) + "); use a newer clustersim. Left untouched");
  if (tables > 0) {
    std::string check;
    try {
      check = impl_->text("PRAGMA quick_check");
    } catch (const std::exception& e) {
      check = e.what();
    }
    if (check != "ok") fail("corrupt results database (" + check + "); left untouched");
  }
  if (mode == Mode::read_only) {
    if (version == 0) fail("empty results database (no schema)");
    impl_->exec("PRAGMA foreign_keys = ON");
    return;
  }
  // A new database gets 16 KiB pages: a run's row is 3-4 KB of JSON, so with 4 KiB
  // pages most rows overflowed onto pages of their own and a sweep wrote 55 MB where
  // 43 MB hold the same rows (and WAL writes every page twice). Only a database without
  // pages takes the setting; an existing one keeps its page size.
  if (tables == 0) impl_->exec("PRAGMA page_size = 16384");
  // WAL lets readers (db list, plots) run while a sweep writes; NORMAL sync in WAL mode
  // survives a killed process (not a power cut), which is what a sweep's resume needs.
  impl_->exec_retrying_busy("PRAGMA journal_mode = WAL");
  impl_->exec("PRAGMA synchronous = NORMAL");
  impl_->exec("PRAGMA foreign_keys = ON");
  if (version < schema_version) {
    // Under the write lock, read the version again: another process creating the same
    // new database may have migrated it while this one waited (two sweeps started at
    // once failed with "table scenarios already exists").
    impl_->exec("BEGIN IMMEDIATE");
    try {
      for (int v = static_cast<int>(impl_->scalar("PRAGMA user_version")); v < schema_version; ++v) {
        impl_->exec(migrations[static_cast<std::size_t>(v)]);
        impl_->exec("PRAGMA user_version = " + std::to_string(v + 1));
        impl_->exec("PRAGMA application_id = " + std::to_string(application_id));
      }
      impl_->exec("COMMIT");
    } catch (...) {
      impl_->rollback_quietly();
      throw;
    }
  }
}

Database::~Database() = default;

int Database::version() const { return static_cast<int>(impl_->scalar("PRAGMA user_version")); }

void Database::begin() { impl_->exec("BEGIN IMMEDIATE"); }
void Database::commit() { impl_->exec("COMMIT"); }
void Database::checkpoint() {
  // No busy wait: a reader (db list, a plot) would otherwise hold the end of a sweep
  // for the busy timeout's 10 s. Busy, the checkpoint goes as far as it can (PASSIVE).
  sqlite3_busy_timeout(impl_->db, 0);
  clear_io_errno();
  const int rc = sqlite3_wal_checkpoint_v2(impl_->db, nullptr, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  sqlite3_busy_timeout(impl_->db, 10000);
  if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
    sqlite_failure(impl_->db, rc, std::string(sqlite3_errmsg(impl_->db)) + " in: a WAL checkpoint");
}
void Database::rollback() {
  impl_->plan_ids.clear();
  impl_->hardware_ids.clear();
  impl_->last_hardware = {};
  impl_->rollback_quietly();
}

JsonText json_text(const nlohmann::json& object) {
  JsonText t;
  if (!object.is_object()) {
    t.json = dump(object);
    return t;
  }
  // dump() of an object is '{' "key":value (',' "key":value)* '}' in key order.
  t.json = "{";
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (t.json.size() > 1) t.json += ',';
    append_string(t.json, it.key());
    t.json += ':';
    const std::size_t begin = t.json.size();
    append_dump(t.json, it.value());
    t.spans.push_back({it.key(), {begin, t.json.size()}});
  }
  t.json += '}';
  return t;
}

JsonText json_text(std::string json, const std::vector<JsonWriter::Member>& members) {
  JsonText t;
  t.spans.reserve(members.size());
  for (const auto& m : members) t.spans.push_back({std::string(m.key), {m.begin, m.end}});
  t.json = std::move(json);
  return t;
}

std::string_view JsonText::section(std::string_view key) const {
  for (const auto& [k, span] : spans)
    if (k == key) return std::string_view(json).substr(span.first, span.second - span.first);
  return {};
}

namespace {
// The hash leaves out name and description (scenario_hash): the same "key":value pieces
// without those two.
ScenarioText with_hash(JsonText text) {
  ScenarioText t;
  static_cast<JsonText&>(t) = std::move(text);
  if (t.spans.empty() && (t.json.empty() || t.json.front() != '{')) {
    t.hash = fnv1a64_hex(t.json);
    return t;
  }
  std::string hashed = "{";
  for (const auto& [key, span] : t.spans) {
    if (key == "name" || key == "description") continue;
    if (hashed.size() > 1) hashed += ',';
    append_string(hashed, key);
    hashed += ':';
    hashed.append(t.json, span.first, span.second - span.first);
  }
  hashed += '}';
  t.hash = fnv1a64_hex(hashed);
  return t;
}

// A top-level number of the result, as the tree's get<double>() reads it: the text is
// nlohmann's shortest round-trip form, so from_chars gives the same double.
std::optional<double> number_at(const JsonText& t, std::string_view key) {
  const std::string_view v = t.section(key);
  if (v.empty() || !(v.front() == '-' || (v.front() >= '0' && v.front() <= '9'))) return std::nullopt;
  double x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size()) return std::nullopt;
  return x;
}
}  // namespace

ScenarioText scenario_text(const nlohmann::json& canonical) { return with_hash(json_text(canonical)); }

ScenarioText scenario_text(const Scenario& s) {
  std::string json;
  std::vector<JsonWriter::Member> sections;
  JsonWriter w(json);
  write_json(w, s, &sections);
  return with_hash(json_text(std::move(json), sections));
}

RunDocuments run_documents(const Scenario& s, ScenarioText scenario, JsonText result) {
  RunDocuments d;
  d.scenario = std::move(scenario);
  d.scenario_name = s.name;
  d.model_family = std::string(to_string(s.model.family));
  d.gpu = s.cluster.gpu;
  d.gpus = s.cluster.total_gpus();
  d.result = std::move(result);
  return d;
}

RunRow run_row(const RunRecord& r) { return run_row(r, scenario_text(r.scenario)); }

RunRow run_row(const RunRecord& r, ScenarioText text, const std::string* hardware_provenance_json) {
  RunDocuments d;
  const auto& c = r.scenario;
  const auto& cluster = c.at("cluster");
  d.scenario = std::move(text);
  d.scenario_name = c.value("name", std::string("unnamed"));
  d.model_family = c.at("model").at("family").get<std::string>();
  d.gpu = cluster.at("gpu").get<std::string>();
  d.gpus = cluster.at("nodes").get<std::int64_t>() * cluster.at("gpus_per_node").get<std::int64_t>();
  d.result = json_text(r.result);
  return run_row(r, std::move(d), hardware_provenance_json);
}

RunRow run_row(const RunRecord& r, RunDocuments d, const std::string* hardware_provenance_json) {
  RunRow row;
  row.method = r.method;
  row.scenario_name = std::move(d.scenario_name);
  row.model_family = std::move(d.model_family);
  row.gpu = std::move(d.gpu);
  row.gpus = d.gpus;
  const std::string_view plan = d.result.section("plan");
  row.plan_json = std::string(plan.empty() ? d.scenario.section("plan") : plan);
  row.scenario_hash = std::move(d.scenario.hash);
  row.scenario_json = std::move(d.scenario.json);
  row.hardware_name = r.hardware.name;
  row.hardware_status = r.hardware.status;
  row.hardware_provenance_json = hardware_provenance_json ? *hardware_provenance_json : dump(r.hardware.provenance);
  row.sweep_id = r.sweep_id;
  row.point_index = r.point_index;
  if (!r.axes.is_null()) row.axes_json = dump(r.axes);
  for (std::size_t i = 0; i < RunRow::figure_keys.size(); ++i) row.figures[i] = number_at(d.result, RunRow::figure_keys[i]);
  if (const std::string_view fits = d.result.section("fits"); fits == "true" || fits == "false")
    row.fits = fits == "true" ? 1 : 0;
  row.result_json = std::move(d.result.json);
  row.tool_version = r.provenance.tool_version;
  row.git_revision = r.provenance.git_revision;
  if (!r.provenance.simgrid_version.empty()) row.simgrid_version = r.provenance.simgrid_version;
  if (!r.provenance.simgrid_config.is_null()) row.simgrid_config_json = dump(r.provenance.simgrid_config);
  return row;
}

std::int64_t Database::put_scenario(const nlohmann::json& c) { return put_scenario(c, scenario_hash(c), c.dump()); }

std::int64_t Database::put_scenario(const nlohmann::json& c, const std::string& hash, const std::string& dump) {
  const auto& cluster = c.at("cluster");
  const std::int64_t gpus = cluster.at("nodes").get<std::int64_t>() * cluster.at("gpus_per_node").get<std::int64_t>();
  return impl_->put(
      "INSERT OR IGNORE INTO scenarios(hash, name, model_family, gpu, gpus, canonical_json) VALUES(?,?,?,?,?,?)",
      "SELECT id FROM scenarios WHERE hash = ?",
      {hash, c.value("name", std::string("unnamed")), c.at("model").at("family").get<std::string>(),
       cluster.at("gpu").get<std::string>(), gpus, dump},
      {hash});
}

std::int64_t Database::put_hardware(const HardwareRecord& h) {
  const std::string prov = h.provenance.dump();
  return impl_->put("INSERT OR IGNORE INTO hardware_profiles(name, status, provenance_json) VALUES(?,?,?)",
                    "SELECT id FROM hardware_profiles WHERE name = ? AND status = ? AND provenance_json = ?",
                    {h.name, h.status, prov}, {h.name, h.status, prov});
}

std::int64_t Database::put_plan(const nlohmann::json& plan) {
  const std::string dump = plan.dump();
  const std::string hash = fnv1a64_hex(dump);
  return impl_->put("INSERT OR IGNORE INTO plans(hash, plan_json) VALUES(?,?)", "SELECT id FROM plans WHERE hash = ?",
                    {hash, dump}, {hash});
}

std::int64_t Database::add_run(const RunRecord& r) { return add_run(run_row(r)); }

std::int64_t Database::add_run(const RunRow& r) {
  // Every text is bound where it lies (SQLITE_STATIC, no copy): `r` outlives the steps.
  using sv = std::string_view;
  const std::int64_t scenario_id = impl_->put(
      "INSERT OR IGNORE INTO scenarios(hash, name, model_family, gpu, gpus, canonical_json) VALUES(?,?,?,?,?,?)",
      "SELECT id FROM scenarios WHERE hash = ?",
      {sv(r.scenario_hash), sv(r.scenario_name), sv(r.model_family), sv(r.gpu), r.gpus, sv(r.scenario_json)},
      {sv(r.scenario_hash)});
  // A sweep stores thousands of runs on a handful of plans and one profile: their ids
  // are remembered (and forgotten on rollback, which may undo their insertion).
  auto& plan_id = impl_->plan_ids[r.plan_json];
  if (!plan_id) {
    const std::string hash = fnv1a64_hex(r.plan_json);
    plan_id = impl_->put("INSERT OR IGNORE INTO plans(hash, plan_json) VALUES(?,?)",
                         "SELECT id FROM plans WHERE hash = ?", {hash, r.plan_json}, {hash});
  }
  // The profile of the previous run first: a sweep has one, and building the map's key
  // (its provenance is about 1.4 KB of text) for every row cost more than the compare.
  auto& last = impl_->last_hardware;
  if (!last.id || last.name != r.hardware_name || last.status != r.hardware_status ||
      last.provenance_json != r.hardware_provenance_json) {
    auto& hardware_id =
        impl_->hardware_ids[r.hardware_name + '\n' + r.hardware_status + '\n' + r.hardware_provenance_json];
    if (!hardware_id)
      hardware_id = impl_->put(
          "INSERT OR IGNORE INTO hardware_profiles(name, status, provenance_json) VALUES(?,?,?)",
          "SELECT id FROM hardware_profiles WHERE name = ? AND status = ? AND provenance_json = ?",
          {r.hardware_name, r.hardware_status, r.hardware_provenance_json},
          {r.hardware_name, r.hardware_status, r.hardware_provenance_json});
    last = {r.hardware_name, r.hardware_status, r.hardware_provenance_json, hardware_id};
  }
  const std::int64_t hardware_id = last.id;
  auto opt = [](const auto& o) -> Value {
    if (!o) return nullptr;
    if constexpr (std::is_same_v<std::decay_t<decltype(*o)>, std::string>) return sv(*o);
    else return *o;
  };
  const auto& f = r.figures;
  const std::string created = utc_now();
  Statement& st = impl_->cached(
      "INSERT INTO simulated_runs(scenario_id, plan_id, hardware_id, sweep_id, point_index, axes_json, method,"
      " iteration_time_s, tokens_per_s, samples_per_s, tflops_per_gpu, model_tflops_per_gpu, mfu,"
      " memory_per_gpu_bytes, fits, result_json, tool_version, git_revision, simgrid_version,"
      " simgrid_config_json, created_utc) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
      " ON CONFLICT DO NOTHING");
  st.bind({scenario_id, plan_id, hardware_id, opt(r.sweep_id), r.sweep_id ? Value(r.point_index) : Value(nullptr),
           opt(r.axes_json), sv(r.method), opt(f[0]), opt(f[1]), opt(f[2]), opt(f[3]), opt(f[4]), opt(f[5]),
           opt(f[6]), opt(r.fits), sv(r.result_json), sv(r.tool_version), sv(r.git_revision), opt(r.simgrid_version),
           opt(r.simgrid_config_json), sv(created)});
  st.step();
  st.reset();
  // Only a sweep point can conflict (one run per sweep, scenario and method): another
  // process running the same sweep stored it first.
  if (sqlite3_changes(impl_->db) == 0) return 0;
  return sqlite3_last_insert_rowid(impl_->db);
}

std::int64_t Database::add_measured(const MeasuredRecord& m) {
  const std::int64_t scenario_id = put_scenario(m.scenario);
  const auto& me = m.measured;
  const auto& env = m.environment;
  Value steps = nullptr;
  if (me.contains("steps_measured") && me["steps_measured"].is_number_integer())
    steps = me["steps_measured"].get<std::int64_t>();
  Value date = opt_string(env, "date_utc");
  if (std::holds_alternative<std::nullptr_t>(date)) date = std::string();  // NULLs never collide in UNIQUE
  return impl_->put(
      "INSERT OR IGNORE INTO measured_runs(scenario_id, name, source, file, gpu, driver, cuda, cudnn, nccl, torch,"
      " python, hostname, date_utc, step_time_s, forward_time_s, backward_time_s, optimizer_time_s,"
      " peak_memory_bytes, peak_reserved_bytes, tokens_per_s, parameters, steps_measured, measured_json,"
      " environment_json, imported_utc) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
      "SELECT id FROM measured_runs WHERE scenario_id = ? AND source = ? AND name = ? AND date_utc = ?",
      {scenario_id, m.name, m.source, m.file, opt_string(env, "gpu"), opt_string(env, "driver"),
       opt_string(env, "cuda"), opt_string(env, "cudnn"), opt_string(env, "nccl"), opt_string(env, "torch"), opt_string(env, "python"),
       opt_string(env, "hostname"), date, opt_number(me, "step_time_s"), opt_number(me, "forward_time_s"),
       opt_number(me, "backward_time_s"), opt_number(me, "optimizer_time_s"), opt_number(me, "peak_memory_bytes"),
       opt_number(me, "peak_reserved_bytes"), opt_number(me, "tokens_per_s"), opt_number(me, "parameters"), steps,
       me.dump(), env.dump(), utc_now()},
      {scenario_id, m.source, m.name, date});
}

std::int64_t Database::add_measured_serving(const MeasuredServingRecord& m) {
  const std::int64_t scenario_id = put_scenario(m.scenario);
  const auto& env = m.environment;
  const auto& sum = m.summary;
  const auto pct = [&](const char* metric, const char* q) -> Value {
    if (sum.contains(metric) && sum[metric].is_object()) return opt_number(sum[metric], q);
    return nullptr;
  };
  Value date = opt_string(env, "date_utc");
  if (std::holds_alternative<std::nullptr_t>(date)) date = std::string();  // NULLs never collide in UNIQUE
  const std::int64_t requests = sum.value("measured_requests", std::int64_t(0));
  return impl_->put(
      "INSERT OR IGNORE INTO measured_serving_runs(scenario_id, name, source, file, gpu, engine, engine_version, torch,"
      " cuda, date_utc, request_count, ttft_p50_s, ttft_p90_s, ttft_p99_s, tpot_p50_s, tpot_p90_s, tpot_p99_s, e2e_p50_s,"
      " e2e_p90_s, e2e_p99_s, throughput_rps, output_tokens_per_s, summary_json, requests_json, environment_json,"
      " imported_utc) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
      "SELECT id FROM measured_serving_runs WHERE scenario_id = ? AND source = ? AND name = ? AND date_utc = ?",
      {scenario_id, m.name, m.source, m.file, opt_string(env, "gpu"), opt_string(env, "engine"),
       opt_string(env, "engine_version"), opt_string(env, "torch"), opt_string(env, "cuda"), date, requests,
       pct("ttft_s", "p50"), pct("ttft_s", "p90"), pct("ttft_s", "p99"), pct("tpot_s", "p50"), pct("tpot_s", "p90"),
       pct("tpot_s", "p99"), pct("e2e_s", "p50"), pct("e2e_s", "p90"), pct("e2e_s", "p99"),
       opt_number(sum, "throughput_rps"), opt_number(sum, "output_tokens_per_s"), sum.dump(), m.requests.dump(),
       env.dump(), utc_now()},
      {scenario_id, m.source, m.name, date});
}

std::int64_t Database::put_sweep(const std::string& name, const std::string& file, const nlohmann::json& spec,
                                 std::int64_t points) {
  const std::string dump = spec.dump();
  const std::string hash = fnv1a64_hex(dump);
  return impl_->put(
      "INSERT OR IGNORE INTO sweeps(name, file, spec_hash, spec_json, points, created_utc) VALUES(?,?,?,?,?,?)",
      "SELECT id FROM sweeps WHERE spec_hash = ?", {name, file, hash, dump, points, utc_now()}, {hash});
}

std::int64_t Database::add_calibration_sample(const HardwareRecord& hardware, const std::string& kind,
                                              const nlohmann::json& shape, double measured_s,
                                              std::optional<double> predicted_s, const std::string& source) {
  const std::int64_t hardware_id = put_hardware(hardware);
  Statement& st = impl_->cached(
      "INSERT INTO calibration_samples(hardware_id, kind, shape_json, measured_s, predicted_s, source, created_utc)"
      " VALUES(?,?,?,?,?,?,?)");
  st.bind({hardware_id, kind, shape.dump(), measured_s, predicted_s ? Value(*predicted_s) : Value(nullptr), source,
           utc_now()});
  st.step();
  st.reset();
  return sqlite3_last_insert_rowid(impl_->db);
}

std::vector<nlohmann::json> Database::calibration_samples(const std::string& hardware_name) const {
  return impl_->rows(
      "SELECT c.id, h.name AS hardware, h.status, c.kind, c.shape_json, c.measured_s, c.predicted_s, c.source,"
      " c.created_utc FROM calibration_samples c JOIN hardware_profiles h ON h.id = c.hardware_id"
      " WHERE h.name = ? ORDER BY c.id",
      {hardware_name});
}

void Database::add_failed_point(std::int64_t sweep_id, std::int64_t point_index, const std::string& point_key,
                                const std::string& method, const nlohmann::json& axes, const std::string& error) {
  Statement& st = impl_->cached(
      "INSERT OR IGNORE INTO failed_points(sweep_id, point_index, point_key, method, axes_json, error)"
      " VALUES(?,?,?,?,?,?)");
  st.bind({sweep_id, point_index, point_key, method, axes.dump(), error});
  st.step();
  st.reset();
}

std::set<std::string> Database::done_points(std::int64_t sweep_id, const std::string& method) {
  std::set<std::string> keys;
  Statement a(impl_->db,
              "SELECT s.hash FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id"
              " WHERE r.sweep_id = ? AND r.method = ?");
  a.bind({sweep_id, method});
  while (a.step()) keys.insert(a.text(0));
  Statement b(impl_->db, "SELECT point_key FROM failed_points WHERE sweep_id = ? AND method = ?");
  b.bind({sweep_id, method});
  while (b.step()) keys.insert(b.text(0));
  return keys;
}

std::vector<Database::DonePoint> Database::done_point_list(std::int64_t sweep_id, const std::string& method) {
  std::vector<DonePoint> out;
  Statement st(impl_->db,
               "SELECT r.point_index, s.hash, 0 FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id"
               " WHERE r.sweep_id = ?1 AND r.method = ?2 AND r.point_index IS NOT NULL"
               " UNION ALL SELECT point_index, point_key, 1 FROM failed_points WHERE sweep_id = ?1 AND method = ?2"
               " ORDER BY 1, 3");
  st.bind({sweep_id, method});
  while (st.step()) out.push_back({st.int64(0), st.text(1), st.int64(2) != 0});
  return out;
}

std::vector<nlohmann::json> Database::list_runs(std::int64_t limit) const {
  // A measured serving run has no step time or training throughput: those columns are null.
  const std::string serving = version() >= 2
                                  ? " UNION ALL"
                                    " SELECT 'measured-serving', m.id, m.source, s.name, s.hash, s.model_family, s.gpu,"
                                    "  s.gpus, NULL, NULL, m.imported_utc"
                                    " FROM measured_serving_runs m JOIN scenarios s ON s.id = m.scenario_id"
                                  : "";
  return impl_->rows(
      "SELECT * FROM ("
      " SELECT 'predicted' AS kind, r.id AS id, r.method AS method, s.name AS scenario, s.hash AS scenario_hash,"
      "  s.model_family AS family, s.gpu AS gpu, s.gpus AS gpus, r.iteration_time_s AS time_s,"
      "  r.tokens_per_s AS tokens_per_s, r.created_utc AS created_utc"
      " FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id"
      " UNION ALL"
      " SELECT 'measured', m.id, m.source, s.name, s.hash, s.model_family, s.gpu, s.gpus, m.step_time_s,"
      "  m.tokens_per_s, m.imported_utc"
      " FROM measured_runs m JOIN scenarios s ON s.id = m.scenario_id" +
          serving + ") ORDER BY created_utc DESC, kind, id DESC LIMIT ?",
      {limit});
}

std::optional<nlohmann::json> Database::simulated_run(std::int64_t id) const {
  auto r = impl_->rows(
      "SELECT r.*, s.hash AS scenario_hash, s.name AS scenario_name, s.canonical_json AS scenario_json,"
      " h.name AS hardware_name, h.status AS hardware_status, h.provenance_json AS hardware_provenance_json,"
      " p.plan_json AS plan_json"
      " FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id"
      " JOIN hardware_profiles h ON h.id = r.hardware_id JOIN plans p ON p.id = r.plan_id WHERE r.id = ?",
      {id});
  if (r.empty()) return std::nullopt;
  return r.front();
}

std::optional<nlohmann::json> Database::measured_run(std::int64_t id) const {
  auto r = impl_->rows(
      "SELECT m.*, s.hash AS scenario_hash, s.name AS scenario_name, s.canonical_json AS scenario_json"
      " FROM measured_runs m JOIN scenarios s ON s.id = m.scenario_id WHERE m.id = ?",
      {id});
  if (r.empty()) return std::nullopt;
  return r.front();
}

std::optional<nlohmann::json> Database::measured_serving_run(std::int64_t id) const {
  if (version() < 2) return std::nullopt;
  auto r = impl_->rows(
      "SELECT m.*, s.hash AS scenario_hash, s.name AS scenario_name, s.canonical_json AS scenario_json"
      " FROM measured_serving_runs m JOIN scenarios s ON s.id = m.scenario_id WHERE m.id = ?",
      {id});
  if (r.empty()) return std::nullopt;
  return r.front();
}

std::vector<nlohmann::json> Database::compare_rows(const std::string& method) const {
  return impl_->rows(
      "SELECT m.id AS measured_id, r.id AS simulated_id, s.name AS scenario, s.hash AS scenario_hash,"
      " s.model_family AS family, COALESCE(m.gpu, s.gpu) AS hardware, s.gpu AS gpu_profile, s.gpus AS gpus,"
      " m.name AS measured_name, m.step_time_s AS measured_s, r.iteration_time_s AS predicted_s,"
      " m.peak_memory_bytes AS measured_memory_bytes, r.memory_per_gpu_bytes AS predicted_memory_bytes,"
      " json_extract(r.result_json, '$.interval.low_s') AS interval_low_s,"
      " json_extract(r.result_json, '$.interval.high_s') AS interval_high_s,"
      " json_extract(r.result_json, '$.interval.confidence') AS interval_confidence"
      " FROM measured_runs m JOIN scenarios s ON s.id = m.scenario_id"
      " JOIN simulated_runs r ON r.id = (SELECT max(id) FROM simulated_runs x"
      "   WHERE x.scenario_id = m.scenario_id AND x.method = ?)"
      " ORDER BY hardware, family, s.name, m.id",
      {method});
}

std::vector<nlohmann::json> Database::serving_compare_rows() const {
  return impl_->rows(
      "SELECT m.id AS measured_id, r.id AS served_id, s.name AS scenario, s.hash AS scenario_hash,"
      " COALESCE(m.gpu, s.gpu) AS hardware, s.gpu AS gpu_profile, m.name AS measured_name, m.file AS measured_file,"
      " m.summary_json AS measured_json, r.result_json AS served_json"
      " FROM measured_serving_runs m JOIN scenarios s ON s.id = m.scenario_id"
      " JOIN simulated_runs r ON r.id = (SELECT max(id) FROM simulated_runs x"
      "   WHERE x.scenario_id = m.scenario_id AND x.method = 'served')"
      " ORDER BY m.id");
}

std::vector<nlohmann::json> Database::measured_serving_runs() const {
  return impl_->rows(
      "SELECT m.id, m.name, m.source, m.file, m.gpu, m.engine, m.engine_version, m.date_utc, m.request_count,"
      " m.ttft_p50_s, m.ttft_p90_s, m.e2e_p50_s, m.e2e_p90_s, m.throughput_rps, s.name AS scenario,"
      " s.hash AS scenario_hash FROM measured_serving_runs m JOIN scenarios s ON s.id = m.scenario_id ORDER BY m.id");
}

std::vector<nlohmann::json> Database::export_runs(std::optional<std::int64_t> sweep_id) const {
  const std::string sql =
      "SELECT r.id, r.method, r.sweep_id, r.point_index, r.axes_json, s.hash AS scenario_hash, s.name AS scenario,"
      " s.model_family AS family, s.gpu, s.gpus, p.plan_json, r.iteration_time_s, r.tokens_per_s, r.samples_per_s,"
      " r.tflops_per_gpu, r.model_tflops_per_gpu, r.mfu, r.memory_per_gpu_bytes, r.fits, r.tool_version,"
      " r.git_revision, r.simgrid_version, r.created_utc"
      " FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id JOIN plans p ON p.id = r.plan_id";
  if (sweep_id) return impl_->rows(sql + " WHERE r.sweep_id = ? ORDER BY r.point_index, r.id", {*sweep_id});
  return impl_->rows(sql + " ORDER BY r.id");
}

std::vector<nlohmann::json> Database::sweeps() const {
  return impl_->rows(
      "SELECT w.id, w.name, w.file, w.points, w.created_utc,"
      " (SELECT count(*) FROM simulated_runs r WHERE r.sweep_id = w.id) AS stored,"
      " (SELECT count(*) FROM failed_points f WHERE f.sweep_id = w.id) AS failed FROM sweeps w ORDER BY w.id");
}

std::vector<nlohmann::json> Database::failed_points(std::int64_t sweep_id) const {
  return impl_->rows("SELECT point_index, method, axes_json, error FROM failed_points WHERE sweep_id = ?"
                     " ORDER BY point_index",
                     {sweep_id});
}

std::int64_t Database::count(std::string_view table) const {
  static const std::set<std::string_view> known{"scenarios",    "hardware_profiles", "plans",
                                                "sweeps",       "simulated_runs",    "failed_points",
                                                "measured_runs", "calibration_samples", "measured_serving_runs"};
  if (!known.count(table)) throw std::invalid_argument("unknown table " + std::string(table));
  return impl_->scalar("SELECT count(*) FROM " + std::string(table));
}

std::string Database::integrity_check() const {
  std::string out;
  for (const auto& r : impl_->rows("PRAGMA integrity_check")) {
    if (!out.empty()) out += "; ";
    out += r.begin()->get<std::string>();
  }
  return out;
}

std::vector<nlohmann::json> Database::query(const std::string& sql) const { return impl_->rows(sql); }

}  // namespace clustersim::results

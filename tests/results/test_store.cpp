// The results database: schema and migrations, idempotent inserts, the hash that joins
// runs, and the refusal to touch files that are not (or not yet) ours.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <sys/resource.h>

#include "results/store.hpp"
#include "scenarios/diagnostics.hpp"
#include "scenarios/scenario.hpp"

namespace fs = std::filesystem;
using clustersim::results::Database;

namespace {
fs::path fresh(const std::string& name) {
  const fs::path p = clustersim::test::temp_dir() / ("clustersim-results-" + name);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p;
}
std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
clustersim::results::RunRecord sample_run(const nlohmann::json& scenario, double time) {
  clustersim::results::RunRecord r;
  r.method = "analytical";
  r.scenario = scenario;
  r.result = {{"iteration_time_s", time}, {"tokens_per_s", 1000.0 / time}, {"fits", true}};
  r.hardware = {"a100-sxm4-80gb", "datasheet", {{"sources", {"datasheet"}}}};
  r.provenance = {"0.1.0", "abc", "", nullptr};
  return r;
}
}  // namespace

TEST_CASE("FNV-1a 64 matches the published test vectors", "[results]") {
  // Vectors from the FNV reference (Fowler, Noll, Vo): "" and "a".
  CHECK(clustersim::results::fnv1a64_hex("") == "cbf29ce484222325");
  CHECK(clustersim::results::fnv1a64_hex("a") == "af63dc4c8601ec8c");
  CHECK(clustersim::results::fnv1a64_hex("foobar") == "85944171f73967e8");
}

TEST_CASE("the scenario hash ignores name and description only", "[results]") {
  const auto s = clustersim::default_scenario();
  auto a = clustersim::to_json(s);
  auto b = a;
  b["name"] = "another name";
  b["description"] = "another description";
  CHECK(clustersim::results::scenario_hash(a) == clustersim::results::scenario_hash(b));
  b["plan"]["zero"] = 2;
  CHECK(clustersim::results::scenario_hash(a) != clustersim::results::scenario_hash(b));
}

TEST_CASE("a new database gets the current schema, WAL and foreign keys", "[results]") {
  const auto file = fresh("new.db");
  Database db(file.string(), Database::Mode::read_write);
  CHECK(db.version() == clustersim::results::schema_version);
  CHECK(db.query("PRAGMA journal_mode").front()["journal_mode"] == "wal");
  CHECK(db.query("PRAGMA foreign_keys").front()["foreign_keys"] == 1);
  CHECK(db.query("PRAGMA page_size").front()["page_size"] == 16384);
  CHECK(db.query("PRAGMA application_id").front()["application_id"] == clustersim::results::application_id);
  for (const char* table : {"scenarios", "hardware_profiles", "plans", "sweeps", "simulated_runs", "failed_points",
                            "measured_runs", "calibration_samples", "measured_serving_runs"})
    CHECK(db.count(table) == 0);
  // A foreign key that points nowhere is refused.
  CHECK_THROWS(db.query("INSERT INTO calibration_samples(hardware_id, kind, shape_json, measured_s, source, "
                        "created_utc) VALUES(42, 'gemm', '{}', 1.0, 'x', 'now')"));
  CHECK(db.integrity_check() == "ok");
}

TEST_CASE("a version-1 database is migrated to version 2 and keeps its rows", "[results]") {
  const auto file = fresh("v1.db");
  const auto sc = clustersim::to_json(clustersim::default_scenario());
  {
    // Version 1 is today's schema without migration 2's table: build one by undoing it.
    Database db(file.string(), Database::Mode::read_write);
    db.begin();
    db.add_run(sample_run(sc, 1.5));
    db.add_measured({"m", "bench", "m.json", sc, {{"step_time_s", 2.5}}, {{"date_utc", "2026-11-25T10:00:00Z"}}});
    db.commit();
    db.query("DROP TABLE measured_serving_runs");
    db.query("PRAGMA user_version = 1");
  }
  {
    // Read-only opening does not migrate.
    const Database ro(file.string(), Database::Mode::read_only);
    CHECK(ro.version() == 1);
    CHECK(ro.query("SELECT count(*) AS n FROM sqlite_master WHERE name = 'measured_serving_runs'")[0]["n"] == 0);
  }
  Database db(file.string(), Database::Mode::read_write);
  CHECK(db.version() == 2);
  CHECK(db.count("simulated_runs") == 1);
  CHECK(db.count("measured_runs") == 1);
  CHECK(db.count("scenarios") == 1);
  CHECK(db.count("measured_serving_runs") == 0);
  CHECK(db.query("SELECT iteration_time_s FROM simulated_runs")[0]["iteration_time_s"] == 1.5);
  clustersim::results::MeasuredServingRecord m{
      "llama/rate0", "engine", "e.json", sc, {{"measured_requests", 3}, {"ttft_s", {{"p50", 0.1}}}},
      nlohmann::json::array({{{"arrival_s", 0.0}}}), {{"date_utc", "2026-11-26T00:00:00Z"}, {"engine_version", "5.17.0"}}};
  const auto id = db.add_measured_serving(m);
  CHECK(db.add_measured_serving(m) == id);  // idempotent
  CHECK(db.count("measured_serving_runs") == 1);
  CHECK(db.query("SELECT ttft_p50_s FROM measured_serving_runs")[0]["ttft_p50_s"] == 0.1);
  CHECK(db.integrity_check() == "ok");
}

TEST_CASE("scenarios, plans and hardware are stored once, runs reference them", "[results]") {
  const auto file = fresh("runs.db");
  Database db(file.string(), Database::Mode::read_write);
  const auto sc = clustersim::to_json(clustersim::default_scenario());
  db.begin();
  const auto r1 = db.add_run(sample_run(sc, 2.0));
  auto renamed = sc;
  renamed["name"] = "same physics";
  const auto r2 = db.add_run(sample_run(renamed, 3.0));
  db.commit();
  CHECK(r1 != r2);
  CHECK(db.count("scenarios") == 1);
  CHECK(db.count("plans") == 1);
  CHECK(db.count("hardware_profiles") == 1);
  CHECK(db.count("simulated_runs") == 2);
  const auto run = db.simulated_run(r2);
  REQUIRE(run);
  CHECK((*run)["iteration_time_s"] == 3.0);
  CHECK((*run)["scenario_hash"] == clustersim::results::scenario_hash(sc));
  CHECK(nlohmann::json::parse((*run)["result_json"].get<std::string>())["tokens_per_s"] == Approx(1000.0 / 3.0));
  CHECK_FALSE(db.simulated_run(999));
}

TEST_CASE("runs on alternating hardware profiles reference their own profile, also after a rollback", "[results]") {
  // add_run remembers the last profile's id to skip building its key for every row: a
  // change of profile must not reuse it, and a rolled-back insertion must be forgotten.
  const auto file = fresh("profiles.db");
  Database db(file.string(), Database::Mode::read_write);
  auto sc = clustersim::to_json(clustersim::default_scenario());
  auto run_on = [&](const std::string& profile, int zero) {
    auto s = sc;
    s["plan"]["zero"] = zero;  // another scenario for each run
    auto r = sample_run(s, 1.0 + zero);
    r.hardware.name = profile;
    return db.add_run(r);
  };
  db.begin();
  const auto a1 = run_on("a", 0);
  const auto b1 = run_on("b", 1);
  const auto a2 = run_on("a", 2);
  db.commit();
  db.begin();
  run_on("c", 3);  // inserts profile c, then undone
  db.rollback();
  db.begin();
  const auto c1 = run_on("c", 3);  // a stale id of c would break the foreign key
  db.commit();
  auto profile_of = [&](std::int64_t run) { return (*db.simulated_run(run))["hardware_name"].get<std::string>(); };
  CHECK(profile_of(a1) == "a");
  CHECK(profile_of(b1) == "b");
  CHECK(profile_of(a2) == "a");
  CHECK(profile_of(c1) == "c");
  CHECK(db.count("hardware_profiles") == 3);
  CHECK(db.query("PRAGMA foreign_key_check").empty());
}

TEST_CASE("a measured run joins the simulated run of the same scenario", "[results]") {
  const auto file = fresh("compare.db");
  Database db(file.string(), Database::Mode::read_write);
  const auto sc = clustersim::to_json(clustersim::default_scenario());
  db.add_run(sample_run(sc, 2.0));
  clustersim::results::MeasuredRecord m{"m", "bench", "m.json", sc, {{"step_time_s", 2.5}},
                                        {{"gpu", "A100"}, {"nccl", "2.21.5"}}};
  const auto id = db.add_measured(m);
  CHECK(db.add_measured(m) == id);  // re-import is idempotent
  const auto rows = db.compare_rows("analytical");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["measured_s"] == 2.5);
  CHECK(rows[0]["predicted_s"] == 2.0);
  CHECK(rows[0]["hardware"] == "A100");
  CHECK((*db.measured_run(id))["nccl"] == "2.21.5");
  CHECK(db.compare_rows("simulated").empty());
}

TEST_CASE("calibration samples reference their hardware profile", "[results]") {
  const auto file = fresh("calibration.db");
  Database db(file.string(), Database::Mode::read_write);
  const clustersim::results::HardwareRecord h{"h100-sxm5-80gb", "datasheet", {{"sources", {"datasheet"}}}};
  db.begin();
  db.add_calibration_sample(h, "gemm", {{"m", 4096}, {"n", 4096}, {"k", 4096}}, 1.9e-4, 1.8e-4, "cublas-bench");
  db.add_calibration_sample(h, "allreduce", {{"bytes", 1 << 30}, {"gpus", 8}}, 5.1e-3, std::nullopt, "nccl-tests");
  db.commit();
  CHECK(db.count("hardware_profiles") == 1);
  const auto rows = db.calibration_samples("h100-sxm5-80gb");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["kind"] == "gemm");
  CHECK(rows[0]["predicted_s"] == 1.8e-4);
  CHECK(rows[1]["predicted_s"].is_null());
  CHECK(db.calibration_samples("a100-sxm4-80gb").empty());
}

TEST_CASE("a sweep reopened by its specification resumes with its completed points", "[results]") {
  const auto file = fresh("sweep.db");
  Database db(file.string(), Database::Mode::read_write);
  const auto sc = clustersim::to_json(clustersim::default_scenario());
  const nlohmann::json spec{{"axes", "x"}};
  const auto sweep = db.put_sweep("s", "s.json", spec, 2);
  CHECK(db.put_sweep("s", "s.json", spec, 2) == sweep);
  auto r = sample_run(sc, 1.0);
  r.sweep_id = sweep;
  r.point_index = 0;
  CHECK(db.add_run(r) > 0);
  // The same point twice in one sweep is kept once by the schema; the second insert (the
  // same sweep running in another process) reports 0 instead of failing.
  CHECK(db.add_run(r) == 0);
  CHECK(db.count("simulated_runs") == 1);
  db.add_failed_point(sweep, 1, "badkey", "analytical", {{"tp", 3}}, "tp does not divide heads");
  const auto done = db.done_points(sweep, "analytical");
  CHECK(done == std::set<std::string>{clustersim::results::scenario_hash(sc), "badkey"});
  CHECK(db.done_points(sweep, "simulated").empty());
}

TEST_CASE("non-SQLite, foreign, corrupt and newer databases are refused and left untouched", "[results]") {
  using clustersim::InputError;
  SECTION("a text file") {
    const auto file = fresh("text.db");
    std::ofstream(file) << "name,value\nx,1\n";
    const auto before = bytes_of(file);
    CHECK_THROWS_WITH(Database(file.string(), Database::Mode::read_write), Catch::Contains("not a SQLite database"));
    CHECK(bytes_of(file) == before);
    CHECK_FALSE(fs::exists(file.string() + "-wal"));
  }
  SECTION("a newer schema") {
    const auto file = fresh("newer.db");
    {
      Database db(file.string(), Database::Mode::read_write);
      db.query("PRAGMA user_version = 99");
    }
    const auto before = bytes_of(file);
    CHECK_THROWS_WITH(Database(file.string(), Database::Mode::read_write),
                      Catch::Contains("schema version 99 is newer"));
    CHECK(bytes_of(file) == before);
  }
  SECTION("a corrupt file") {
    const auto file = fresh("corrupt.db");
    {
      Database db(file.string(), Database::Mode::read_write);
      const auto sc = clustersim::to_json(clustersim::default_scenario());
      db.begin();
      for (int i = 0; i < 200; ++i) {
        auto s = sc;
        s["simulation"]["seed"] = i;
        db.add_run(sample_run(s, 1.0 + i));
      }
      db.commit();
      db.query("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    // The page size, from the header (big-endian at offset 16).
    const std::string header = bytes_of(file).substr(0, 100);
    const std::size_t page = (static_cast<unsigned char>(header[16]) << 8) | static_cast<unsigned char>(header[17]);
    REQUIRE(fs::file_size(file) > 2 * page);
    {
      // Scribble over the second page (a b-tree page) and keep the header intact.
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(page + 8));
      const std::string junk(3000, '\x5a');
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    const auto before = bytes_of(file);
    CHECK_THROWS_WITH(Database(file.string(), Database::Mode::read_write), Catch::Contains("corrupt"));
    CHECK(bytes_of(file) == before);
  }
  SECTION("another application's database") {
    const auto file = fresh("foreign.db");
    {
      Database db(file.string(), Database::Mode::read_write);
      db.query("PRAGMA application_id = 1234");
    }
    const auto before = bytes_of(file);
    CHECK_THROWS_WITH(Database(file.string(), Database::Mode::read_only), Catch::Contains("another application"));
    CHECK(bytes_of(file) == before);
  }
  SECTION("a missing file read-only") {
    const auto file = fresh("missing.db");
    CHECK_THROWS_AS(Database(file.string(), Database::Mode::read_only), InputError);
    CHECK_FALSE(fs::exists(file));
  }
}

TEST_CASE("a reader sees committed runs while a writer inserts", "[results]") {
  const auto file = fresh("concurrent.db");
  { Database init(file.string(), Database::Mode::read_write); }
  const auto sc = clustersim::to_json(clustersim::default_scenario());
  constexpr int batches = 40, per_batch = 25;
  std::thread writer([&] {
    Database db(file.string(), Database::Mode::read_write);
    for (int b = 0; b < batches; ++b) {
      db.begin();
      for (int i = 0; i < per_batch; ++i) {
        auto s = sc;
        s["simulation"]["seed"] = b * per_batch + i;
        db.add_run(sample_run(s, 1.0));
      }
      db.commit();
    }
  });
  Database reader(file.string(), Database::Mode::read_only);
  std::int64_t last = 0;
  int reads = 0;
  while (last < batches * per_batch) {
    const std::int64_t n = reader.count("simulated_runs");
    // Only whole transactions are visible: counts are multiples of a batch and never go back.
    CHECK(n % per_batch == 0);
    CHECK(n >= last);
    last = n;
    ++reads;
  }
  writer.join();
  INFO("reads while writing: " << reads);
  CHECK(reader.count("simulated_runs") == batches * per_batch);
  CHECK(reader.integrity_check() == "ok");
}

namespace {
// A file-size limit for this process (SIGXFSZ ignored, so a write past it fails with
// EFBIG), lifted again at the end of the scope.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};
// 100 rows of 16,000 bytes: about 1.6 MB of pages.
const char* const kInsertBatch =
    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100) "
    "INSERT INTO filler SELECT zeroblob(16000) FROM c";
}  // namespace

TEST_CASE("a failed write names its errno whichever statement hits it", "[results]") {
  // SQLite's own sqlite3_system_errno() is set only where an error passes through
  // sqlite3Error(): a COMMIT that fails appending to the WAL does not, and it was 0
  // ("disk I/O error" alone). The store's VFS records the errno of the failed write.
  const fs::path db_file = fresh("efbig.db");
  Database db(db_file.string(), Database::Mode::read_write);
  db.query("CREATE TABLE filler(x BLOB)");
  db.query("PRAGMA wal_autocheckpoint = 0");  // checkpoints only when asked
  db.query("PRAGMA cache_size = -65536");      // a transaction's pages reach the WAL at its commit

  SECTION("the WAL append of a COMMIT") {
    const FileSizeLimit limit(1 << 20);
    db.begin();
    db.query(kInsertBatch);  // kept in the page cache until the commit
    try {
      db.commit();
      FAIL("the commit past the file-size limit succeeded");
    } catch (const clustersim::InputError& e) {
      INFO(e.what());
      CHECK_THAT(e.what(), Catch::Contains("I/O error on the database (File too large)") &&
                               Catch::Contains("COMMIT") && Catch::Contains("what was committed before is kept"));
    }
    db.rollback();
  }
  SECTION("a checkpoint growing the database file") {
    db.begin();
    db.query(kInsertBatch);
    db.commit();
    db.checkpoint();  // the file now holds about 1.6 MB, the WAL is empty again
    const FileSizeLimit limit(static_cast<rlim_t>(fs::file_size(db_file)) + (1 << 20));
    db.begin();
    db.query(kInsertBatch);  // 1.6 MB of WAL, under the limit; the file grows by as much
    try {
      db.commit();
      db.checkpoint();
      FAIL("the checkpoint past the file-size limit succeeded");
    } catch (const clustersim::InputError& e) {
      INFO(e.what());
      CHECK_THAT(e.what(), Catch::Contains("I/O error on the database (File too large)"));
    }
  }
}

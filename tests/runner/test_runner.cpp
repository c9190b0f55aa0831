// The runner layer as a library, without the CLI: the sweep engine reports progress
// through its callback and its counts in the summary (it prints nothing), a stop
// request ends it with what was computed stored, and the comparison statistics match
// their closed forms.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "results/store.hpp"
#include "runner/compare.hpp"
#include "runner/measured_import.hpp"
#include "runner/sweep.hpp"

using namespace clustersim;
namespace fs = std::filesystem;

namespace {

fs::path fresh_db(const std::string& name) {
  const fs::path p = clustersim::test::temp_dir() / ("clustersim-runner-" + name);
  fs::remove(p);
  return p;
}

// The built-in scenario at ZeRO 0 to 3 (four valid points).
SweepSpec zero_sweep() {
  Diagnostics diag("<test>");
  const SweepSpec spec = parse_sweep(
      nlohmann::json::parse(R"({"name": "zero", "base": "default", "axes": [{"field": "/plan/zero", "values": [0, 1, 2, 3]}]})"),
      "<test>", diag);
  REQUIRE(diag.ok());
  return spec;
}

}  // namespace

TEST_CASE("run_sweep stores every point, reports progress through its callback, and resumes", "[runner][sweep]") {
  const auto db = fresh_db("sweep.db");
  const SweepSpec spec = zero_sweep();
  std::vector<runner::SweepProgress> calls;
  runner::SweepOptions o;
  o.db_file = db.string();
  o.jobs = 2;
  o.progress = [&](const runner::SweepProgress& p) { calls.push_back(p); };
  const runner::SweepSummary first = runner::run_sweep(spec, o);
  CHECK(first.total == 4);
  CHECK(first.handled == 4);
  CHECK(first.stored == 4);
  CHECK(first.failed + first.skipped + first.already_done + first.duplicates == 0);
  CHECK(first.jobs == 2);
  CHECK(first.stopped_by == 0);
  REQUIRE(!calls.empty());
  CHECK(calls.back().final);
  CHECK(calls.back().handled == 4);
  CHECK(calls.back().total == 4);
  for (std::size_t i = 0; i + 1 < calls.size(); ++i) CHECK_FALSE(calls[i].final);
  CHECK(results::Database(db.string(), results::Database::Mode::read_only).count("simulated_runs") == 4);

  // The same sweep again: the same id, every point already done, found by its index
  // without being derived again.
  calls.clear();
  const runner::SweepSummary again = runner::run_sweep(spec, o);
  CHECK(again.sweep_id == first.sweep_id);
  CHECK(again.already_done == 4);
  CHECK(again.resumed_by_index == 4);
  CHECK(again.handled == 4);
  CHECK(again.stored == 0);
  REQUIRE(!calls.empty());
  CHECK(calls.back().resumed == 4);  // the progress printer leaves them out of the rate
  fs::remove(db);
}

TEST_CASE("a sweep ends with its write-ahead log checkpointed and truncated, another connection open",
          "[runner][sweep]") {
  // The sweep checkpoints every 64 MiB of WAL; closing the last connection would
  // checkpoint the rest, but with another connection open (a reader, another sweep) the
  // log would stay behind, up to 64 MiB, for every reader to search.
  const auto db = fresh_db("checkpointed.db");
  results::Database other(db.string(), results::Database::Mode::read_write);
  runner::SweepOptions o;
  o.db_file = db.string();
  o.jobs = 1;
  REQUIRE(runner::run_sweep(zero_sweep(), o).stored == 4);
  const fs::path wal = db.string() + "-wal";
  REQUIRE(fs::exists(wal));  // kept open by `other`
  INFO("WAL left after the sweep: " << fs::file_size(wal) << " bytes, expected 0");
  CHECK(fs::file_size(wal) == 0);
  CHECK(other.count("simulated_runs") == 4);
}

TEST_CASE("a resume whose stored points no longer derive to their keys checks every point by its key",
          "[runner][sweep]") {
  // What a change of the model's defaults since the first run looks like: the stored
  // scenario of a point is not what the point derives to today. The index alone would
  // wrongly call every point done; the check of a few stored points catches it.
  const auto db = fresh_db("rederive.db");
  const SweepSpec spec = zero_sweep();
  runner::SweepOptions o;
  o.db_file = db.string();
  o.jobs = 1;
  REQUIRE(runner::run_sweep(spec, o).stored == 4);
  {
    results::Database d(db.string(), results::Database::Mode::read_write);
    d.query("UPDATE scenarios SET hash = 'changed-model' WHERE id = (SELECT scenario_id FROM simulated_runs"
            " WHERE point_index = 0)");
  }
  const runner::SweepSummary again = runner::run_sweep(spec, o);
  CHECK(again.resumed_by_index == 0);
  CHECK(again.already_done == 3);
  CHECK(again.stored == 1);  // point 0, under the scenario it derives to today
  fs::remove(db);
}

TEST_CASE("run_sweep stops when asked and says by what", "[runner][sweep]") {
  const auto db = fresh_db("stopped.db");
  const std::atomic<int> stop{SIGTERM};
  runner::SweepOptions o;
  o.db_file = db.string();
  o.jobs = 1;
  o.stop = &stop;
  const runner::SweepSummary s = runner::run_sweep(zero_sweep(), o);
  CHECK(s.stopped_by == SIGTERM);
  CHECK(s.handled == 0);
  CHECK(s.total == 4);
  fs::remove(db);
}

TEST_CASE("comparison statistics: MAPE, bias and the worst error with its sign", "[runner][compare]") {
  runner::ErrorSummary e;
  CHECK(e.mape() == 0);
  CHECK(e.bias() == 0);
  for (double x : {0.10, -0.20, 0.05}) e.add(x);
  CHECK(e.n == 3);
  CHECK(e.mape() == Approx(0.35 / 3));
  CHECK(e.bias() == Approx(-0.05 / 3));
  CHECK(e.worst == -0.20);
  const auto j = e.to_json();
  CHECK(j["runs"] == 3);
  CHECK(j["mape"].get<double>() == Approx(0.35 / 3));
}

TEST_CASE("reading measured runs reports the problems of every file at once", "[runner][measured]") {
  const fs::path a = clustersim::test::temp_dir() / "clustersim-runner-measured-a.json";
  const fs::path b = clustersim::test::temp_dir() / "clustersim-runner-measured-b.json";
  std::ofstream(a) << R"({"format": "clustersim-measured-run/2", "measured": {"step_time_s": 1}})";
  std::ofstream(b) << R"({"format": "clustersim-measured-run/1", "measured": {"step_time_s": -1}})";
  try {
    runner::read_measured_runs({a.string(), b.string()});
    FAIL("no InputError");
  } catch (const InputError& e) {
    bool from_a = false, from_b = false;
    for (const auto& p : e.problems()) {
      from_a = from_a || (p.file == a.string() && p.path == "/format");
      from_b = from_b || (p.file == b.string() && p.path == "/measured/step_time_s");
    }
    INFO(e.what());
    CHECK(from_a);
    CHECK(from_b);
  }
  fs::remove(a);
  fs::remove(b);
}

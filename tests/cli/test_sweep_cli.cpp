// clustersim sweep end to end: storing, failing points, resume, SIGKILL mid-way, a
// reader while the sweep writes, and databases that must not be touched.
#include "test_temp.hpp"
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "results/store.hpp"
#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;

namespace {
using Result = clustersim::test::CliResult;

Result run(const std::string& args) { return clustersim::test::run_cli(args); }

fs::path fresh_db(const std::string& name) {
  const fs::path p = clustersim::test::temp_dir() / ("clustersim-cli-" + name);
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(p.string() + s);
  return p;
}

using clustersim::test::write_temp;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// "... 54 points; 54 stored, 0 failed, 0 invalid skipped, 0 already done"
struct Summary {
  long total = -1, stored = -1, failed = -1, skipped = -1, already = -1;
};
Summary summary(const std::string& out) {
  static const std::regex re(R"((\d+) points; (\d+) stored, (\d+) failed, (\d+) invalid skipped, (\d+) already done)");
  std::smatch m;
  Summary s;
  if (std::regex_search(out, m, re))
    s = {std::stol(m[1]), std::stol(m[2]), std::stol(m[3]), std::stol(m[4]), std::stol(m[5])};
  return s;
}

const std::string source = CLUSTERSIM_SOURCE_DIR;

// What a database holds for its runs and failures, without row ids and creation times
// (which differ between two runs of the same sweep), by point index.
std::string stored_rows(const fs::path& db) {
  const clustersim::results::Database d(db.string(), clustersim::results::Database::Mode::read_only);
  std::string out;
  for (const auto& r : d.query(
           "SELECT r.point_index, r.axes_json, r.method, r.iteration_time_s, r.tokens_per_s, r.samples_per_s,"
           " r.tflops_per_gpu, r.model_tflops_per_gpu, r.mfu, r.memory_per_gpu_bytes, r.fits, r.result_json,"
           " r.tool_version, r.git_revision, s.hash, s.name, s.canonical_json, p.plan_json, h.name AS hw,"
           " h.status, h.provenance_json FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id"
           " JOIN plans p ON p.id = r.plan_id JOIN hardware_profiles h ON h.id = r.hardware_id"
           " ORDER BY r.point_index"))
    out += r.dump() + '\n';
  for (const auto& r : d.query("SELECT point_index, point_key, method, axes_json, error FROM failed_points"
                               " ORDER BY point_index"))
    out += r.dump() + '\n';
  for (const char* table : {"scenarios", "plans", "hardware_profiles", "simulated_runs", "failed_points"})
    out += std::string(table) + ' ' + std::to_string(d.count(table)) + '\n';
  return out;
}
}  // namespace

TEST_CASE("a sweep stores every point once, a rerun skips them all", "[sweep-cli]") {
  const auto db = fresh_db("plans.db");
  const auto first = run("sweep " + source + "/sweeps/gpt-1.3b-plans.json --db " + db.string() + " --jobs 2");
  INFO(first.output);
  REQUIRE(first.code == 0);
  const auto s1 = summary(first.output);
  const long expected = 2 * 3 * 9;  // zero x micro-batch x layouts in the file
  CHECK(s1.total == expected);
  CHECK(s1.stored == expected);
  const auto second = run("sweep " + source + "/sweeps/gpt-1.3b-plans.json --db " + db.string());
  INFO(second.output);
  const auto s2 = summary(second.output);
  CHECK(s2.stored == 0);
  CHECK(s2.already == expected);
  // Plain log lines (no terminal here), with a rate.
  CHECK_THAT(first.output, Catch::Contains("points/s"));
  CHECK_THAT(first.output, !Catch::Contains("\r"));
}

TEST_CASE("invalid points are recorded with their error, or skipped when asked", "[sweep-cli]") {
  const std::string body = R"("base": ")" + source + R"(/data/scenarios/default.json",
      "axes": [{"field": "/plan/tp", "values": [1, 2, 3]}])";
  const auto record = write_temp("record.json", "{" + body + "}");
  const auto skip = write_temp("skip.json", "{\"skip_invalid\": true, " + body + "}");
  const auto db = fresh_db("invalid.db");
  const auto r = run("sweep " + record.string() + " --db " + db.string());
  INFO(r.output);
  CHECK(r.code == 0);
  const auto s = summary(r.output);
  CHECK(s.stored == 1);  // only tp = 2 tiles 16 GPUs with dp = 8
  CHECK(s.failed == 2);
  const auto f = run("db failed 1 --db " + db.string());
  INFO(f.output);
  CHECK_THAT(f.output, Catch::Contains("point 0") && Catch::Contains("point 2") && Catch::Contains("2 failed points"));
  CHECK_THAT(f.output, Catch::Contains("(point 2): /plan"));
  const auto again = run("sweep " + record.string() + " --db " + db.string());
  CHECK(summary(again.output).already == 3);
  const auto sk = run("sweep " + skip.string() + " --db " + db.string());
  INFO(sk.output);
  const auto ss = summary(sk.output);
  CHECK(ss.stored == 1);  // another sweep (the skip rule is part of its identity)
  CHECK(ss.skipped == 2);
  CHECK(ss.failed == 0);
}

namespace {
// Starts `clustersim sweep FILE --db DB --jobs 1` in the background with its output in
// `log` (removed first: the caller watches it, so no stale lines from an earlier run).
pid_t start_sweep(const std::string& sweep_file, const fs::path& db, const fs::path& log) {
  fs::remove(log);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(CLUSTERSIM_BINARY, "clustersim", "sweep", sweep_file.c_str(), "--db", db.c_str(), "--jobs", "1",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("a sweep killed with SIGKILL resumes without losing or duplicating a point", "[sweep-cli][kill]") {
  const auto db = fresh_db("killed.db");
  const auto log = clustersim::test::temp_dir() / "clustersim-cli-killed.log";
  const std::string sweep_file = source + "/sweeps/bench-10k.json";
  const pid_t pid = start_sweep(sweep_file, db, log);
  // Wait for a progress line past 2,000 points: the writer commits every 2,000 points
  // or every 0.5 s, whichever comes first, so some are committed by then and, at one
  // job, most are not yet computed.
  static const std::regex progress(R"(sweep: (\d+)/10000)");
  long seen = 0;
  bool reader_ok = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen < 2000 && std::chrono::steady_clock::now() < deadline) {
    const std::string text = read_file(log);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), progress); it != std::sregex_iterator(); ++it)
      seen = std::max(seen, std::stol((*it)[1]));
    if (!reader_ok && seen > 0) {
      // A reader while the sweep writes.
      const auto r = run("db sweeps --db " + db.string());
      INFO(r.output);
      CHECK(r.code == 0);
      reader_ok = r.code == 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(read_file(log));
  REQUIRE(WIFSIGNALED(status));  // killed mid-way, not finished
  CHECK(reader_ok);

  const auto check1 = run("db check --db " + db.string());
  INFO(check1.output);
  CHECK(check1.code == 0);
  CHECK_THAT(check1.output, Catch::Contains("integrity ok"));
  const auto listed = nlohmann::json::parse(run("db sweeps --json --db " + db.string()).output);
  REQUIRE(listed.size() == 1);
  const long committed = listed[0]["stored"].get<long>();
  INFO("committed before the kill: " << committed);
  CHECK(committed > 0);
  CHECK(committed < 10000);

  const auto resumed = run("sweep " + sweep_file + " --db " + db.string());
  INFO(resumed.output);
  CHECK(resumed.code == 0);
  const auto s = summary(resumed.output);
  CHECK(s.already == committed);
  CHECK(s.stored == 10000 - committed);
  // Every committed point was skipped by its index: none was derived again.
  CHECK_THAT(resumed.output, Catch::Contains("(" + std::to_string(committed) + " found by point index)"));

  const auto csv = run("db export --csv --sweep 1 --db " + db.string());
  REQUIRE(csv.code == 0);
  std::istringstream lines(csv.output);
  std::string line;
  std::getline(lines, line);  // header
  REQUIRE(line.rfind("id,method,sweep_id,point_index,", 0) == 0);
  std::set<long> points;
  long rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    // point_index is the fourth column.
    std::size_t pos = 0;
    for (int c = 0; c < 3; ++c) pos = line.find(',', pos) + 1;
    points.insert(std::stol(line.substr(pos, line.find(',', pos) - pos)));
  }
  CHECK(rows == 10000);
  CHECK(points.size() == 10000);
  CHECK(*points.begin() == 0);
  CHECK(*points.rbegin() == 9999);
  const auto check2 = run("db check --db " + db.string());
  CHECK_THAT(check2.output, Catch::Contains("integrity ok"));

  // The killed and resumed sweep stored what an uninterrupted one stores, row for row.
  const auto whole = fresh_db("uninterrupted.db");
  const auto uninterrupted = run("sweep " + sweep_file + " --db " + whole.string() + " --quiet");
  REQUIRE(uninterrupted.code == 0);
  const std::string a = stored_rows(db), b = stored_rows(whole);
  CHECK(a.size() > 10000);
  CHECK(a == b);
}

TEST_CASE("SIGTERM stops a sweep cleanly with its completed points committed", "[sweep-cli]") {
  const auto db = fresh_db("term.db");
  const auto log = clustersim::test::temp_dir() / "clustersim-cli-term.log";
  const std::string sweep_file = source + "/sweeps/bench-10k.json";
  const pid_t pid = start_sweep(sweep_file, db, log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_file(log).find("sweep: ") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string out = read_file(log);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  CHECK_THAT(out, Catch::Contains("stopped by signal") && Catch::Contains("rerun the same command"));
  const auto s = summary(out);
  const auto listed = nlohmann::json::parse(run("db sweeps --json --db " + db.string()).output);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0]["stored"].get<long>() == s.stored);  // everything it reported is committed
  CHECK(s.stored > 0);
}

TEST_CASE("a non-SQLite or newer database is refused and left untouched", "[sweep-cli]") {
  const auto text = write_temp("notes.db", "these are my notes, not a database\n");
  const std::string before = read_file(text);
  const auto r = run("sweep " + source + "/sweeps/gpt-1.3b-plans.json --db " + text.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(text.string() + ": /: not a SQLite database"));
  CHECK(read_file(text) == before);
  CHECK_FALSE(fs::exists(text.string() + "-wal"));
  const auto l = run("db list --db " + text.string());
  CHECK(l.code == 1);
  CHECK(read_file(text) == before);
}

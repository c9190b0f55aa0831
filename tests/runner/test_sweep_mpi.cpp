// Sweeps across MPI ranks against the single-process sweep: the clustersim binary under
// `mpirun --oversubscribe -np 3` (rank 0 stores, two workers) must store the rows that
// run_sweep stores for the same file, value for value (ids and timestamps aside), with
// the invalid points recorded as failed; a rerun finds everything done; a job stopped
// by SIGTERM (what mpirun and Slurm send) resumes to the same rows. Also the bytes the
// outcomes travel in, without MPI.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "results/store.hpp"
#include "runner/sweep.hpp"
#include "runner/sweep_engine.hpp"

using namespace clustersim;
namespace fs = std::filesystem;

namespace {

fs::path temp(const std::string& name) {
  const fs::path p = clustersim::test::temp_dir() / ("clustersim-mpi-" + name);
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(p.string() + suffix);
  return p;
}

// 5 layouts of the 16 GPUs (5 x 3 does not tile them: invalid, recorded as failed)
// x 4 ZeRO stages x 3 micro-batch sizes = 60 points, 12 of them failed.
const char* small_sweep = R"({"name": "mpi-test", "base": "default", "axes": [
  {"zip": [{"field": "/plan/dp", "values": [16, 8, 5, 4, 2]}, {"field": "/plan/tp", "values": [1, 2, 3, 4, 8]}]},
  {"field": "/plan/zero", "range": {"from": 0, "to": 3, "step": 1}},
  {"field": "/training/micro_batch", "values": [1, 2, 4]}]})";

// The simulator's own timings (wall and CPU time of the replay, events per second):
// measurements of this machine, not results.
const char* const simulator_timings[] = {"wall_time_s", "cpu_time_s", "events_per_s", "events_per_cpu_s"};

// Every stored column but the ids and the creation time, runs and failed points in
// point order: what "the same rows" means.
std::string stored_rows(const fs::path& db) {
  const results::Database d(db.string(), results::Database::Mode::read_only);
  std::string out;
  for (const auto& r : d.query(
           "SELECT r.point_index, r.axes_json, r.method, r.iteration_time_s, r.tokens_per_s, r.samples_per_s,"
           " r.tflops_per_gpu, r.model_tflops_per_gpu, r.mfu, r.memory_per_gpu_bytes, r.fits, r.result_json,"
           " r.tool_version, r.git_revision, r.simgrid_version, r.simgrid_config_json, s.hash, s.name,"
           " s.model_family, s.gpu, s.gpus, s.canonical_json, p.hash AS plan_hash, p.plan_json, h.name AS hw,"
           " h.status, h.provenance_json FROM simulated_runs r JOIN scenarios s ON s.id = r.scenario_id"
           " JOIN plans p ON p.id = r.plan_id JOIN hardware_profiles h ON h.id = r.hardware_id"
           " ORDER BY r.point_index")) {
    nlohmann::json row = r;
    nlohmann::json result = nlohmann::json::parse(row["result_json"].get<std::string>());
    if (result.contains("simulator"))
      for (const char* k : simulator_timings) result["simulator"].erase(k);
    row["result_json"] = result;
    out += row.dump() + '\n';
  }
  for (const auto& r : d.query("SELECT point_index, point_key, method, axes_json, error FROM failed_points"
                               " ORDER BY point_index"))
    out += r.dump() + '\n';
  for (const char* table : {"scenarios", "plans", "hardware_profiles", "simulated_runs", "failed_points"})
    out += std::string(table) + ' ' + std::to_string(d.count(table)) + '\n';
  return out;
}

void single_process(const fs::path& file, const fs::path& db) {
  runner::SweepOptions o;
  o.db_file = db.string();
  o.jobs = 2;
  runner::run_sweep(load_sweep(file.string()), o);
}

#ifdef CLUSTERSIM_MPIEXEC
// mpirun with what this 2-core machine and CI's root containers need: more ranks than
// cores, root allowed, no single-copy shared memory (ptrace is often denied in containers).
// A job that has not ended after 300 s (each takes seconds, under the sanitizers too) is
// killed by mpirun with every rank's state printed, so a hang fails this test with a
// diagnosis instead of running into CTest's timeout.
std::string mpirun(int ranks) {
  std::string cmd = std::string(CLUSTERSIM_MPIEXEC) + " --oversubscribe -np " + std::to_string(ranks) +
                    " --mca btl_vader_single_copy_mechanism none --timeout 300 --report-state-on-timeout";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd + " " + CLUSTERSIM_BINARY;
}

struct Run {
  int code;
  std::string output;
};
Run shell(const std::string& cmd) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}
#endif

}  // namespace

TEST_CASE("outcomes cross between ranks as bytes and come back identical", "[runner][mpi]") {
  Diagnostics diag("<test>");
  const SweepSpec spec = parse_sweep(nlohmann::json::parse(small_sweep), "<test>", diag);
  REQUIRE(diag.ok());
  runner::detail::Worker worker(spec);
  std::string bytes;
  std::vector<runner::detail::Outcome> sent;
  for (std::size_t i : {0u, 1u, 24u, 59u}) {  // 24: tp = 3, a failed point
    sent.push_back(runner::detail::evaluate(spec, i, {}, worker));
    runner::detail::encode(sent.back(), bytes);
  }
  REQUIRE(sent[2].kind == runner::detail::Outcome::Kind::failed);
  std::vector<runner::detail::Outcome> got;
  runner::detail::decode(bytes, got);
  REQUIRE(got.size() == sent.size());
  for (std::size_t k = 0; k < sent.size(); ++k) {
    const auto& a = sent[k];
    const auto& b = got[k];
    CHECK(a.kind == b.kind);
    CHECK(a.index == b.index);
    CHECK(a.key == b.key);
    CHECK(a.axes_json == b.axes_json);
    CHECK(a.error == b.error);
    REQUIRE(a.row.has_value() == b.row.has_value());
    if (!a.row) continue;
    CHECK(a.row->scenario_json == b.row->scenario_json);
    CHECK(a.row->result_json == b.row->result_json);
    CHECK(a.row->plan_json == b.row->plan_json);
    CHECK(a.row->hardware_provenance_json == b.row->hardware_provenance_json);
    CHECK(a.row->figures == b.row->figures);
    CHECK(a.row->fits == b.row->fits);
    CHECK(a.row->gpus == b.row->gpus);
    CHECK(a.row->axes_json == b.row->axes_json);
  }
  CHECK_THROWS(runner::detail::decode(std::string_view(bytes).substr(0, bytes.size() - 3), got));
  const runner::detail::DoneKeys keys{"0123456789abcdef", "fedcba9876543210"};
  CHECK(runner::detail::unpack_keys(runner::detail::pack_keys(keys)) == keys);
  CHECK(runner::detail::unpack_keys("").empty());
}

#ifdef CLUSTERSIM_MPIEXEC

TEST_CASE("an MPI sweep stores the rows of a single-process sweep, and a rerun finds them done", "[runner][mpi]") {
  const fs::path file = temp("small.json");
  std::ofstream(file) << small_sweep;
  const fs::path one = temp("one.db"), many = temp("many.db");
  single_process(file, one);
  // --chunk 4: 48 valid points in many requests, so that both workers take part.
  const Run r = shell(mpirun(3) + " sweep " + file.string() + " --db " + many.string() + " --quiet --chunk 4");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("60 points; 48 stored, 12 failed, 0 invalid skipped, 0 already done") != std::string::npos);
  CHECK(r.output.find("2 worker ranks") != std::string::npos);
  CHECK(stored_rows(many) == stored_rows(one));

  // Rank 0 holding back requests whenever one outcome waits for the writer changes
  // nothing either.
  const fs::path held = temp("held.db");
  const Run slow_writer =
      shell(mpirun(3) + " sweep " + file.string() + " --db " + held.string() + " --quiet --chunk 2 --mpi-backlog 1");
  INFO(slow_writer.output);
  REQUIRE(slow_writer.code == 0);
  CHECK(stored_rows(held) == stored_rows(one));

  const Run again = shell(mpirun(3) + " sweep " + file.string() + " --db " + many.string() + " --quiet");
  INFO(again.output);
  CHECK(again.code == 0);
  // Rank 0 hands out none of them: stored and failed points are found by their index.
  CHECK(again.output.find("0 stored, 0 failed, 0 invalid skipped, 60 already done (60 found by point index)") !=
        std::string::npos);
  CHECK(stored_rows(many) == stored_rows(one));
}

TEST_CASE("a simulated sweep on MPI ranks stores the rows of a single-process one", "[runner][mpi]") {
  // Each worker runs the SimGrid replays of its points (in forked children).
  const fs::path file = temp("simulated.json");
  std::ofstream(file) << R"({"name": "mpi-simulated", "base": "default", "method": "simulated", "axes": [
    {"zip": [{"field": "/plan/dp", "values": [16, 8, 5]}, {"field": "/plan/tp", "values": [1, 2, 3]}]},
    {"field": "/plan/zero", "values": [0, 1]}]})";
  const fs::path one = temp("simulated-one.db"), many = temp("simulated-many.db");
  single_process(file, one);
  const Run r = shell(mpirun(3) + " sweep " + file.string() + " --db " + many.string() + " --quiet --chunk 1");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("6 points; 4 stored, 2 failed") != std::string::npos);
  const std::string rows = stored_rows(many);
  CHECK(rows == stored_rows(one));
  CHECK(rows.find("\"method\":\"simulated\"") != std::string::npos);
  CHECK(rows.find("\"simgrid_version\":\"3.") != std::string::npos);
}

TEST_CASE("an MPI sweep refuses a database it cannot use, on every rank", "[runner][mpi]") {
  const fs::path file = temp("refuse.json");
  std::ofstream(file) << small_sweep;
  const fs::path db = temp("not-a-db.txt");
  std::ofstream(db) << "not a database\n";
  const Run r = shell(mpirun(3) + " sweep " + file.string() + " --db " + db.string() + " --quiet");
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.output.find("not a SQLite database") != std::string::npos);
  std::ifstream in(db);
  std::string line;
  std::getline(in, line);
  CHECK(line == "not a database");
}

TEST_CASE("ranks that read a different sweep stop the job, which says which rank", "[runner][mpi]") {
  // MPMD launch: rank 0 reads one file, ranks 1 and 2 another.
  const fs::path a = temp("rank0.json"), b = temp("others.json");
  std::ofstream(a) << small_sweep;
  nlohmann::json other = nlohmann::json::parse(small_sweep);
  other["axes"][1]["range"]["to"] = 2;
  std::ofstream(b) << other.dump();
  const fs::path db = temp("mismatch.db");
  std::string cmd = mpirun(1) + " sweep " + a.string() + " --db " + db.string() + " --quiet : -np 2 ";
  cmd += std::string(CLUSTERSIM_BINARY) + " sweep " + b.string() + " --db " + db.string() + " --quiet";
  const Run r = shell(cmd);
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK((r.output.find("rank 1: ") != std::string::npos || r.output.find("rank 2: ") != std::string::npos));
  CHECK(r.output.find("differs from rank 0's") != std::string::npos);
}

TEST_CASE("an MPI sweep stopped by SIGTERM resumes to the rows of a single-process sweep", "[runner][mpi][slow]") {
  // bench-10k times three network latencies: 30,000 points, a few seconds of work.
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(fs::path(CLUSTERSIM_SOURCE_DIR) / "sweeps" / "bench-10k.json"));
  doc["axes"].push_back({{"field", "/cluster/inter_node/latency"}, {"values", {"5us", "10us", "20us"}}});
  const fs::path file = temp("bench-30k.json");
  std::ofstream(file) << doc.dump();
  const fs::path one = temp("bench-one.db"), many = temp("bench-many.db");
  // mpirun forwards SIGTERM to the ranks: rank 0 stops handing out points, stores what
  // comes back and exits 143.
  // (appended piece by piece: GCC 12 warns, wrongly, about "(" + std::string)
  std::string stop_after_1s = "(";
  stop_after_1s += mpirun(3) + " sweep " + file.string() + " --db " + many.string();
  stop_after_1s += " --quiet & pid=$!; sleep 1; kill -TERM $pid; wait $pid)";
  const Run stopped = shell(stop_after_1s);
  INFO(stopped.output);
  if (stopped.output.find("stopped by signal 15") == std::string::npos) {
    WARN("the sweep finished before SIGTERM; only the rerun is checked");
  } else {
    CHECK(stopped.code != 0);  // mpirun's own code for a job whose rank failed
    CHECK(results::Database(many.string(), results::Database::Mode::read_only).count("simulated_runs") < 30000);
  }
  const Run resumed = shell(mpirun(3) + " sweep " + file.string() + " --db " + many.string() + " --quiet");
  INFO(resumed.output);
  REQUIRE(resumed.code == 0);
  single_process(file, one);
  CHECK(stored_rows(many) == stored_rows(one));
}

#endif

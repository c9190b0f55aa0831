// Issue 14, hardening: every way a user broke the binary, reproduced end to end. User
// mistakes exit 1 with `FILE: /json/path: message`, never "internal error" (exit 3) or
// a signal; files that cannot be written are said so, never reported as written.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <fcntl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "results/store.hpp"
#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;
using clustersim::test::run_cli;
using clustersim::test::write_temp;

namespace {

// A scenario that runs and simulates in a fraction of a second.
const char* kSmall = R"({"name": "small",
 "model": {"family": "gpt", "hidden": 256, "layers": 4, "heads": 4, "seq_len": 128, "vocab": 1000},
 "training": {"global_batch": 8, "micro_batch": 1},
 "cluster": {"gpu": "a100-sxm4-80gb", "nodes": 1, "gpus_per_node": 4},
 "plan": {"dp": 2, "tp": 1, "pp": 2}})";

// A fresh empty folder under the temporary folder.
fs::path temp_folder(const std::string& name) {
  const fs::path dir = clustersim::test::temp_dir() / ("clustersim-hardening-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("input rules: duplicate keys, overflowing numbers, hex and absurd units exit 1 with FILE: /path",
          "[cli][hardening]") {
  std::string text = kSmall;
  text.replace(text.find("\"layers\": 4"), 11, "\"layers\": 4, \"layers\": 8");
  const auto dup = write_temp("dup.json", text);
  for (const char* cmd : {"validate ", "run ", "simulate "}) {
    const auto r = run_cli(cmd + dup.string());
    INFO(cmd << r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains(dup.string() + ": /model/layers: duplicate key \"layers\""));
  }
  text = kSmall;
  text.replace(text.find("\"global_batch\": 8"), 17, "\"global_batch\": 1e999999999");
  const auto big = write_temp("big.json", text);
  auto r = run_cli("run " + big.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(big.string() + ": /training/global_batch: the number 1e999999999"));
  CHECK_THAT(r.output, !Catch::Contains("internal error"));

  text = kSmall;
  text.replace(text.find("\"nodes\": 1"), 10,
               "\"nodes\": 1, \"intra_node\": {\"bandwidth\": \"0x10Gbps\", \"latency\": \"1e300s\"}");
  const auto units = write_temp("units.json", text);
  r = run_cli("validate " + units.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(units.string() + ": /cluster/intra_node/bandwidth: \"0x10Gbps\" is not a decimal"));
  CHECK_THAT(r.output, Catch::Contains(units.string() + ": /cluster/intra_node/latency: expected a duration from") &&
                           Catch::Contains("got \"1e300s\""));
}

TEST_CASE("simulate: a missing or binary --platform file and an unwritable --trace are user errors",
          "[cli][hardening]") {
  const auto small = write_temp("hardening-" + std::to_string(__LINE__) + ".json", kSmall);
  auto r = run_cli("simulate " + small.string() + " --platform /nonexistent/platform.xml");
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/platform.xml: /: cannot open the platform file"));

  const fs::path binary = clustersim::test::temp_dir() / "clustersim-test-binary.xml";
  {
    std::ofstream out(binary, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>((i * 7919) % 256));
  }
  r = run_cli("simulate " + small.string() + " --platform " + binary.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(binary.string() + ": /: not a valid SimGrid platform file"));

  r = run_cli("simulate " + small.string() + " --trace /nonexistent/folder/trace.json");
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/folder/trace.json: /: cannot write the file: No such file"));
  CHECK_THAT(r.output, !Catch::Contains("iteration time"));

  // A full device: the open succeeds, the writes fail.
  if (fs::exists("/dev/full")) {
    r = run_cli("simulate " + small.string() + " --trace /dev/full");
    INFO(r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains("/dev/full: /: cannot write the file: No space left on device"));
  }
  const fs::path dir = temp_folder("trace");
  r = run_cli("simulate " + small.string() + " --trace " + (dir / "t.json").string());
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(fs::file_size(dir / "t.json") > 100);
}

namespace {

// A 16-GPU scenario and a sweep over pp (1, 2, 16) of it, stored in `db`.
fs::path pp_sweep(const fs::path& dir) {
  std::ofstream(dir / "base.json") << R"({"name": "pp-base",
 "model": {"family": "gpt", "hidden": 256, "layers": 16, "heads": 4, "seq_len": 128, "vocab": 1000},
 "training": {"global_batch": 16, "micro_batch": 1},
 "cluster": {"gpu": "a100-sxm4-80gb", "nodes": 1, "gpus_per_node": 16},
 "plan": {"dp": 16, "tp": 1, "pp": 1}})";
  std::ofstream(dir / "sweep.json") << R"({"name": "pp-sweep", "base": "base.json", "axes": [
    {"field": "/training/micro_batch", "values": [1]},
    {"zip": [{"field": "/plan/dp", "values": [16, 8, 1]}, {"field": "/plan/pp", "values": [1, 2, 16]}]}]})";
  const fs::path db = dir / "runs.db";
  const auto r = run_cli("sweep -q " + (dir / "sweep.json").string() + " --db " + db.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  return db;
}

}  // namespace

TEST_CASE("db plot sweep leaves out points with an infinite metric instead of crashing", "[cli][hardening]") {
  const fs::path dir = temp_folder("plot-inf");
  const fs::path db = pp_sweep(dir);
  {
    clustersim::results::Database d(db.string(), clustersim::results::Database::Mode::read_write);
    d.query("UPDATE simulated_runs SET iteration_time_s = 9e999, tokens_per_s = 0 WHERE point_index = 1");
  }
  const fs::path svg = dir / "plot.svg";
  const auto r = run_cli("db plot sweep --sweep 1 --x dp --y iteration_time_s --out " + svg.string() + " --db " +
                         db.string());
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("left out 1 point(s) of sweep 1 whose iteration_time_s is not a finite number"));
  std::ifstream in(svg);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  CHECK_THAT(text, Catch::Contains("</svg>") && !Catch::Contains("inf") && !Catch::Contains("nan"));
}

TEST_CASE("db plot sweep takes the best over the other axes among plans that fit", "[cli][hardening]") {
  const fs::path dir = temp_folder("plot-fit");
  const fs::path db = pp_sweep(dir);
  const fs::path db_without = dir / "without.db";
  fs::copy_file(db, db_without);
  {
    // Point 1 becomes the fastest by far, but it does not fit: it must not be drawn.
    clustersim::results::Database d(db.string(), clustersim::results::Database::Mode::read_write);
    d.query("UPDATE simulated_runs SET iteration_time_s = 1e-9, tokens_per_s = 1e15, fits = 0 WHERE point_index = 1");
    clustersim::results::Database w(db_without.string(), clustersim::results::Database::Mode::read_write);
    w.query("DELETE FROM simulated_runs WHERE point_index = 1");
  }
  const fs::path svg = dir / "with.svg", svg_without = dir / "without.svg";
  auto r = run_cli("db plot sweep --sweep 1 --x micro_batch --y tokens_per_s --out " + svg.string() + " --db " +
                   db.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("left out 1 point(s) of sweep 1 that do not fit in GPU memory"));
  r = run_cli("db plot sweep --sweep 1 --x micro_batch --y tokens_per_s --out " + svg_without.string() + " --db " +
              db_without.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  // The chart is the one drawn without the point at all.
  const auto read_all = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string{std::istreambuf_iterator<char>(in), {}};
  };
  CHECK(read_all(svg) == read_all(svg_without));
  // No point fits: a clear error, not an empty chart.
  {
    clustersim::results::Database d(db.string(), clustersim::results::Database::Mode::read_write);
    d.query("UPDATE simulated_runs SET fits = 0");
  }
  r = run_cli("db plot sweep --sweep 1 --x micro_batch --y tokens_per_s --out " + svg.string() + " --db " +
              db.string());
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("has no stored point that fits in GPU memory"));
}

TEST_CASE("validate, run and simulate agree on plans whose layers do not split over the stages", "[cli][hardening]") {
  const fs::path dir = temp_folder("split");
  struct Case {
    std::string name, scenario, message;
  };
  const std::string wresnet = R"({"name": "wr",
    "model": {"family": "wresnet", "depth": 50, "channels": 64, "width": 2},
    "training": {"global_batch": 64, "micro_batch": 1},
    "cluster": {"gpu": "a100-sxm4-80gb", "nodes": 1, "gpus_per_node": 8},
    "plan": PLAN})";
  const auto with_plan = [](std::string s, const std::string& plan) { return s.replace(s.find("PLAN"), 4, plan); };
  std::string uneven = kSmall;
  uneven.replace(uneven.find("\"layers\": 4"), 11, "\"layers\": 5");
  const Case cases[] = {
      // 16 bottleneck blocks over 4 x 3 virtual stages: refused by all three alike.
      {"wr-interleaved", with_plan(wresnet, R"({"dp": 2, "tp": 1, "pp": 4, "schedule": "interleaved", "virtual_stages": 3})"),
       "/plan/pp: a wresnet of depth 50 has 16 bottleneck blocks, which the interleaved schedule must divide by "
       "pp*virtual_stages = 4*3 = 12"},
      {"gpt-uneven", uneven, "/plan/pp: layers (5) must be divisible by pp*virtual_stages = 2*1 = 2"},
      // Accepted by all three: 16 blocks over 4 x 2, and over 8 stages without interleaving.
      {"wr-even", with_plan(wresnet, R"({"dp": 2, "tp": 1, "pp": 4, "schedule": "interleaved", "virtual_stages": 2})"), ""},
      {"wr-1f1b", with_plan(wresnet, R"({"dp": 1, "tp": 1, "pp": 8})"), ""},
  };
  for (const auto& c : cases) {
    const fs::path f = dir / (c.name + ".json");
    std::ofstream(f) << c.scenario;
    for (const char* cmd : {"validate ", "run ", "simulate "}) {
      const auto r = run_cli(cmd + f.string());
      INFO(c.name << ": " << cmd << "\n" << r.output);
      if (c.message.empty()) {
        CHECK(r.code == 0);
      } else {
        CHECK(r.code == 1);
        CHECK_THAT(r.output, Catch::Contains(f.string() + ": " + c.message));
      }
    }
  }
}

namespace {

// Runs the binary with `args` in the folder `dir`; stdout and stderr together.
clustersim::test::CliResult run_in(const fs::path& dir, const std::string& args) {
  return clustersim::test::run_shell("cd '" + dir.string() + "' && " + std::string(CLUSTERSIM_BINARY) + " " + args +
                                     " 2>&1");
}

}  // namespace

TEST_CASE("output files that cannot be written fail with exit 1 and the reason, never 'written'", "[cli][hardening]") {
  const fs::path dir = temp_folder("outputs");
  const auto small = write_temp("hardening-" + std::to_string(__LINE__) + ".json", kSmall);
  for (const std::string target : {"/nonexistent/folder/out.json", "/dev/full"}) {
    const std::string reason = target == "/dev/full" ? "No space left on device" : "No such file or directory";
    auto r = run_cli("search " + small.string() + " -o " + target);
    INFO(r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains(target + ": /: cannot write the file: " + reason));
    CHECK_THAT(r.output, !Catch::Contains("plan written"));
  }
  const fs::path db = pp_sweep(dir);
  for (const std::string target : {"/nonexistent/folder/out.csv", "/dev/full"}) {
    const std::string reason = target == "/dev/full" ? "No space left on device" : "No such file or directory";
    for (const std::string cmd : {"db export --csv --sweep 1 --out ", "db plot sweep --sweep 1 --x dp --out "}) {
      const auto r = run_cli(cmd + target + " --db " + db.string());
      INFO(cmd << target << "\n" << r.output);
      CHECK(r.code == 1);
      CHECK_THAT(r.output, Catch::Contains(target + ": /: cannot write the file: " + reason));
      CHECK_THAT(r.output, !Catch::Contains("wrote"));
    }
  }
}

TEST_CASE("the default plan file stays in the working folder whatever the scenario's name", "[cli][hardening]") {
  const fs::path dir = temp_folder("plan-name");
  fs::create_directories(dir / "work");
  for (const std::string& name : {std::string("../x"), std::string("/tmp/abs"), std::string(".."), std::string("a b/c")}) {
    std::string text = kSmall;
    text.replace(text.find("\"small\""), 7, nlohmann::json(name).dump());
    std::ofstream(dir / "s.json") << text;
    const auto r = run_in(dir / "work", "search ../s.json");
    INFO(name << "\n" << r.output);
    CHECK(r.code == 0);
    CHECK_FALSE(fs::exists(dir / "x.plan.json"));
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir / "work")) {
      ++files;
      CHECK_THAT(e.path().filename().string(), Catch::EndsWith(".plan.json") && !Catch::StartsWith("."));
      CHECK_THAT(r.output, Catch::Contains("plan written to " + e.path().filename().string()));
      fs::remove(e.path());
    }
    CHECK(files == 1);
  }
}

TEST_CASE("an empty --db and a missing sweep id are errors, not silent successes", "[cli][hardening]") {
  const fs::path dir = temp_folder("db-args");
  const auto r = run_cli("sweep -q " + std::string(CLUSTERSIM_SOURCE_DIR) + "/sweeps/gpt-1.3b-plans.json --db ''");
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("--db: the results database file name is empty"));
  const fs::path db = pp_sweep(dir);
  for (const std::string cmd : {"db failed 99", "db export --csv --sweep 99", "db export --json --sweep 99"}) {
    const auto m = run_cli(cmd + " --db " + db.string());
    INFO(cmd << "\n" << m.output);
    CHECK(m.code == 1);
    CHECK_THAT(m.output, Catch::Contains(db.string() + ": /: no sweep 99"));
  }
  CHECK(run_cli("db failed 1 --db " + db.string()).code == 0);
}

namespace {

// Runs `command` through the shell; its exit status.
int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::int64_t count_rows(const fs::path& db, const std::string& sql) {
  clustersim::results::Database d(db.string(), clustersim::results::Database::Mode::read_only);
  return d.query(sql).front().begin()->get<std::int64_t>();
}

}  // namespace

TEST_CASE("two processes creating one new database both store their run", "[cli][hardening]") {
  const fs::path dir = temp_folder("create-race");
  const auto small = write_temp("hardening-" + std::to_string(__LINE__) + ".json", kSmall);
  const std::string bin = CLUSTERSIM_BINARY;
  for (int trial = 0; trial < 6; ++trial) {
    const fs::path db = dir / ("new" + std::to_string(trial) + ".db");
    const std::string one = bin + " run " + small.string() + " --db " + db.string();
    shell("cd '" + dir.string() + "' && { (" + one + " > o1 2>&1; echo $? > rc1) & (" + one +
          " > o2 2>&1; echo $? > rc2) & wait; }");
    const std::string out = slurp(dir / "o1") + slurp(dir / "o2");
    INFO("trial " << trial << "\n" << out);
    CHECK(slurp(dir / "rc1") == "0\n");
    CHECK(slurp(dir / "rc2") == "0\n");
    CHECK_THAT(out, !Catch::Contains("already exists") && !Catch::Contains("internal error"));
    CHECK(count_rows(db, "SELECT count(*) AS n FROM simulated_runs") == 2);
  }
}

TEST_CASE("the same sweep run twice at once stores every point exactly once", "[cli][hardening]") {
  const fs::path dir = temp_folder("sweep-race");
  const fs::path db = dir / "runs.db";
  const std::string one =
      std::string(CLUSTERSIM_BINARY) + " sweep -q " + CLUSTERSIM_SOURCE_DIR + "/sweeps/bench-10k.json --jobs 1 --db " + db.string();
  shell("cd '" + dir.string() + "' && { (" + one + " > o1 2>&1; echo $? > rc1) & (" + one +
        " > o2 2>&1; echo $? > rc2) & wait; }");
  const std::string o1 = slurp(dir / "o1"), o2 = slurp(dir / "o2");
  INFO(o1 << o2);
  CHECK(slurp(dir / "rc1") == "0\n");
  CHECK(slurp(dir / "rc2") == "0\n");
  CHECK(count_rows(db, "SELECT count(*) AS n FROM simulated_runs") == 10000);
  CHECK(count_rows(db, "SELECT count(DISTINCT point_index) AS n FROM simulated_runs") == 10000);
  // What one stored the other counts as done: together they stored each point once.
  const std::regex re(R"((\d+) stored, \d+ failed, \d+ invalid skipped, (\d+) already done)");
  std::smatch m1, m2;
  REQUIRE(std::regex_search(o1, m1, re));
  REQUIRE(std::regex_search(o2, m2, re));
  CHECK(std::stol(m1[1]) + std::stol(m2[1]) == 10000);
  CHECK(std::stol(m1[1]) + std::stol(m1[2]) == 10000);
  CHECK(std::stol(m2[1]) + std::stol(m2[2]) == 10000);
}

TEST_CASE("a database that runs out of room says so and keeps what was committed", "[cli][hardening]") {
  const fs::path dir = temp_folder("full");
  const std::string sweep = std::string(CLUSTERSIM_SOURCE_DIR) + "/sweeps/bench-10k.json";
  // A file size limit (SIGXFSZ ignored): writes past 20-40 MB (the whole sweep takes
  // 55) fail with EFBIG, as a small disk would fail them with ENOSPC; no privileges
  // needed.
  const fs::path db = dir / "limited.db";
  const int rc = shell("cd '" + dir.string() + "' && sh -c \"trap '' XFSZ; ulimit -f 40000; exec " +
                       std::string(CLUSTERSIM_BINARY) + " sweep -q " + sweep + " --jobs 1 --db " + db.string() +
                       "\" > out 2>&1");
  std::string out = slurp(dir / "out");
  INFO(out);
  CHECK(rc == 1);
  CHECK_THAT(out, Catch::Contains(db.filename().string() + ": /: I/O error on the database (File too large)") &&
                      Catch::Contains("what was committed before is kept"));
  CHECK_THAT(out, !Catch::Contains("cannot rollback") && !Catch::Contains("internal error"));
  const std::int64_t kept = count_rows(db, "SELECT count(*) AS n FROM simulated_runs");
  CHECK(kept > 0);
  CHECK(kept < 10000);

  // A real full file system where this process may mount one (root in a container).
  const fs::path mnt = dir / "mnt";
  fs::create_directories(mnt);
  if (geteuid() != 0 || shell("mount -t tmpfs -o size=300k tmpfs '" + mnt.string() + "' 2>/dev/null") != 0) {
    WARN("skipped the full tmpfs check: mounting one needs root with mount rights");
    return;
  }
  const int full = shell(std::string(CLUSTERSIM_BINARY) + " sweep -q " + sweep + " --jobs 1 --db " +
                         (mnt / "full.db").string() + " > '" + (dir / "out2").string() + "' 2>&1");
  out = slurp(dir / "out2");
  shell("umount '" + mnt.string() + "'");
  INFO(out);
  CHECK(full == 1);
  CHECK_THAT(out, Catch::Contains("full.db: /: the disk is full") && !Catch::Contains("cannot rollback"));
}

TEST_CASE("a database in a read-only folder or file: read commands work, writes are refused, no side files",
          "[cli][hardening]") {
  const fs::path dir = temp_folder("read-only");
  const fs::path db = pp_sweep(dir);
  // As root, permissions do not stop writes: run the binary as nobody instead.
  std::string as_user;
  if (geteuid() == 0) {
    if (shell("setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null") != 0) {
      WARN("skipped: running as root without setpriv, so a chmod'ed folder cannot be tested");
      return;
    }
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  const auto small = write_temp("hardening-" + std::to_string(__LINE__) + ".json", kSmall);
  fs::permissions(small, fs::perms::all, fs::perm_options::add);
  const auto sides = [&] { return fs::exists(db.string() + "-wal") || fs::exists(db.string() + "-shm"); };
  REQUIRE_FALSE(sides());
  for (const bool folder_read_only : {true, false}) {
    INFO((folder_read_only ? "read-only folder" : "read-only file in a writable folder"));
    fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(dir, folder_read_only ? fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                                fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec
                                          : fs::perms::all);
    const std::string bin = as_user + CLUSTERSIM_BINARY;
    const std::string out = (dir.parent_path() / "clustersim-hardening-ro-out").string();
    CHECK(shell(bin + " db list --db " + db.string() + " > " + out + " 2>&1") == 0);
    CHECK_THAT(slurp(out), Catch::Contains("pp-sweep"));
    CHECK(shell(bin + " db show 1 --db " + db.string() + " > " + out + " 2>&1") == 0);
    CHECK(shell(bin + " db export --csv --sweep 1 --db " + db.string() + " > " + out + " 2>&1") == 0);
    CHECK_FALSE(sides());
    const int rc = shell(bin + " run " + small.string() + " --db " + db.string() + " > " + out + " 2>&1");
    INFO(slurp(out));
    CHECK(rc == 1);
    CHECK_THAT(slurp(out), Catch::Contains("iteration time") && Catch::Contains("the database cannot be written here") &&
                               Catch::Contains("read-only commands"));
    CHECK_FALSE(sides());
  }
  fs::permissions(dir, fs::perms::all);
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
}

TEST_CASE("output consistency: db list, db compare, legend order, sweep progress, gpus", "[cli][hardening]") {
  const fs::path dir = temp_folder("consistency");
  const fs::path db = pp_sweep(dir);
  // An analytical run is listed as a prediction by the analytical method, not "simulated".
  auto r = run_cli("db list --db " + db.string());
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("predicted analytical") && !Catch::Contains("simulated"));
  r = run_cli("db compare --db " + db.string());
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("has an analytical run") && !Catch::Contains(" a analytical"));

  // Legends follow the axis's numbers: pp=1, pp=2, pp=16.
  const fs::path svg = dir / "legend.svg";
  r = run_cli("db plot sweep --sweep 1 --x micro_batch --series pp --y tokens_per_s --out " + svg.string() + " --db " +
              db.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string chart = slurp(svg);
  const auto p1 = chart.find(">pp=1<"), p2 = chart.find(">pp=2<"), p16 = chart.find(">pp=16<");
  REQUIRE(p1 != std::string::npos);
  REQUIRE(p2 != std::string::npos);
  REQUIRE(p16 != std::string::npos);
  CHECK(p1 < p2);
  CHECK(p2 < p16);

  // The first progress line of a fast sweep has no rate yet (it once said 15,701,668 points/s).
  fs::remove(db);
  r = run_cli("sweep " + (dir / "sweep.json").string() + " --db " + db.string());
  INFO(r.output);
  CHECK(r.code == 0);
  const auto first = r.output.find("sweep: ");
  REQUIRE(first != std::string::npos);
  const std::string line = r.output.substr(first, r.output.find('\n', first) - first);
  CHECK_THAT(line, Catch::Contains(", - points/s, ETA -"));

  // Every row of `gpus` has its columns where the header has them, long names included.
  r = run_cli("gpus");
  REQUIRE(r.code == 0);
  std::istringstream rows(r.output);
  std::string header, row;
  std::getline(rows, header);
  const auto status_at = header.find("status");
  REQUIRE(status_at != std::string::npos);
  int n = 0;
  while (std::getline(rows, row)) {
    INFO(row);
    CHECK((row.compare(status_at, 9, "datasheet") == 0 || row.compare(status_at, 10, "calibrated") == 0 ||
           row.compare(status_at, 11, "transferred") == 0));
    ++n;
  }
  CHECK(n >= 3);
}

TEST_CASE("micro-batch counts: a plan file's is checked, simulate bounds the replay's", "[cli][hardening]") {
  const fs::path dir = temp_folder("micro-batches");
  const auto small = write_temp("hardening-mb.json", kSmall);
  const fs::path plan = dir / "p.plan.json";
  REQUIRE(run_cli("search " + small.string() + " -o " + plan.string()).code == 0);
  nlohmann::json doc = nlohmann::json::parse(slurp(plan));
  const std::int64_t right = doc["micro_batches"].get<std::int64_t>();
  CHECK(run_cli("run " + small.string() + " --plan " + plan.string()).code == 0);
  for (const std::int64_t wrong : {std::int64_t{1} << 62, right + 1}) {
    doc["micro_batches"] = wrong;
    std::ofstream(plan) << doc.dump(2);
    const auto r = run_cli("run " + small.string() + " --plan " + plan.string());
    INFO(wrong << "\n" << r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains(plan.string() + ": /micro_batches: expected "));
  }

  std::string text = kSmall;
  text.replace(text.find("\"global_batch\": 8"), 17, "\"global_batch\": 4294967296");
  text.replace(text.find("\"dp\": 2, \"tp\": 1, \"pp\": 2"), 25, "\"dp\": 1, \"tp\": 1, \"pp\": 4");
  const fs::path huge = dir / "huge.json";
  std::ofstream(huge) << text;
  auto r = run_cli("simulate " + huge.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(huge.string() + ": /training/global_batch: the simulator replays every "
                                                       "micro-batch") &&
                           Catch::Contains("4294967296"));
  CHECK(run_cli("run " + huge.string()).code == 0);  // the estimator takes it
}

namespace {

// The pids whose parent is `parent`, from /proc/*/stat.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// Alive: the process exists and is neither a zombie nor dead.
bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto close = stat.rfind(')');
  const char state = close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : 'X';
  return state != 'Z' && state != 'X';
}

}  // namespace

TEST_CASE("simulate's replay child dies with a parent killed by SIGTERM", "[cli][hardening]") {
  if (!fs::exists("/proc/self/stat")) {
    WARN("skipped: no /proc to find the child process");
    return;
  }
  // 100,000 micro-batches: a replay of several seconds.
  std::string text = kSmall;
  text.replace(text.find("\"global_batch\": 8"), 17, "\"global_batch\": 200000");
  const auto file = write_temp("hardening-long.json", text);
  const pid_t parent = fork();
  REQUIRE(parent >= 0);
  if (parent == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execl(CLUSTERSIM_BINARY, CLUSTERSIM_BINARY, "simulate", file.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::vector<pid_t> kids;
  for (int i = 0; i < 500 && kids.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kids = children_of(parent);
  }
  REQUIRE(kids.size() == 1);
  const pid_t child = kids.front();
  CHECK(alive(child));
  kill(parent, SIGTERM);
  int status = 0;
  waitpid(parent, &status, 0);
  CHECK(WIFSIGNALED(status));
  bool gone = false;
  for (int i = 0; i < 300 && !gone; ++i) {
    gone = !alive(child);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
  if (!gone) kill(child, SIGKILL);  // leave no orphan behind a failed check
}

TEST_CASE("results printed to a full device are an error and not a silent success", "[cli][hardening]") {
  if (!fs::exists("/dev/full")) {
    WARN("skipped: no /dev/full");
    return;
  }
  const fs::path dir = temp_folder("stdout-full");
  const fs::path db = pp_sweep(dir);
  for (const std::string& cmd : {std::string("gpus"), "db export --csv --sweep 1 --db " + db.string()}) {
    const int rc = shell(std::string(CLUSTERSIM_BINARY) + " " + cmd + " > /dev/full 2> '" + (dir / "err").string() + "'");
    const std::string err = slurp(dir / "err");
    INFO(cmd << "\n" << err);
    CHECK(rc == 1);
    CHECK_THAT(err, Catch::Contains("cannot write the standard output: No space left on device"));
  }
}

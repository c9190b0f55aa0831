// `clustersim rank` end to end: the top-N table, its CSV and JSON exports with the same
// rows, each row's time equal to what `run` prints for that plan (the scenario with the
// row's knobs, or `run --plan` with the Alpa-style plan file), bad input; and the
// progress of `search` and `rank`: a bar on a terminal, nothing on a pipe.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;
using clustersim::test::run_cli;
using clustersim::test::run_shell;

namespace {

const char* kScenario = R"({
  "name": "rank-cli-test",
  "model": {"family": "gpt", "hidden": 512, "layers": 4, "heads": 8, "seq_len": 256, "vocab": 1024},
  "training": {"global_batch": 32, "micro_batch": 2, "recompute": "full"},
  "cluster": {"gpu": "a100-sxm4-80gb", "nodes": 1, "gpus_per_node": 4},
  "plan": {"dp": 2, "tp": 2, "pp": 1, "sequence_parallel": true}
})";

fs::path setup_dir(const std::string& name) {
  const fs::path dir = clustersim::test::temp_dir() / ("clustersim-rank-cli-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "s.json") << kScenario;
  return dir;
}

std::vector<std::string> csv_lines(const fs::path& f) {
  std::ifstream in(f);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

double run_time(const std::string& args) {
  const auto r = run_cli(args + " --json", false);
  INFO(args << "\n" << r.output);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.output)["iteration_time_s"].get<double>();
}

}  // namespace

TEST_CASE("rank prints the top plans, exports the same rows, and run agrees with every row", "[cli][rank]") {
  const fs::path dir = setup_dir("main");
  const std::string s = (dir / "s.json").string();
  const auto r = run_cli("rank " + s + " --top 4 --clusters 6 --csv " + (dir / "r.csv").string() + " --json " +
                         (dir / "r.json").string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("rank  plan") && Catch::Contains("likely range") &&
                           Catch::Contains("plans considered") && Catch::Contains("do not fit in GPU memory"));
  const auto doc = nlohmann::json::parse(std::ifstream(dir / "r.json"));
  const auto& rows = doc["rows"];
  const auto lines = csv_lines(dir / "r.csv");
  REQUIRE(rows.size() >= 4);
  REQUIRE(lines.size() == rows.size() + 1);
  CHECK(lines[0] == "rank,source,plan,iteration_time_s,tokens_per_s,mfu,memory_per_gpu_gib,fits,interval_low_s,interval_high_s");
  // The top rows: ranks 1..4, fastest first, all fitting; the counts add up.
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(rows[i]["rank"].get<std::size_t>() == i + 1);
    CHECK(rows[i]["fits"].get<bool>());
    if (i > 0) CHECK(rows[i]["iteration_time_s"].get<double>() >= rows[i - 1]["iteration_time_s"].get<double>());
    // The CSV row is the JSON row.
    CHECK(lines[i + 1].rfind(std::to_string(i + 1) + "," + rows[i]["source"].get<std::string>() + ",\"" +
                                 rows[i]["label"].get<std::string>() + "\",",
                             0) == 0);
  }
  const std::size_t considered = doc["considered"], manual = doc["manual_space"], not_fitting = doc["not_fitting"];
  CHECK(considered >= manual + 1);  // + the Alpa-style plan (the scenario's is in the space)
  CHECK(not_fitting < considered);
  // The scenario's own plan and the Alpa-style plan are among the rows.
  bool alpa = false, own = false;
  for (const auto& row : rows) {
    const double t = row["iteration_time_s"].get<double>();
    const std::string source = row["source"];
    INFO(row["label"].get<std::string>());
    if (source == "alpa") {
      alpa = true;
      std::ofstream(dir / "alpa.plan.json") << row["plan"].dump(2);
      CHECK(run_time("run " + s + " --plan " + (dir / "alpa.plan.json").string()) == Approx(t).epsilon(1e-12));
    } else if (source == "scenario") {
      own = true;
      CHECK(run_time("run " + s) == Approx(t).epsilon(1e-12));
    }
  }
  CHECK(alpa);
  CHECK(own);
  // A manual row (the fastest one) as a scenario: run prints the same time.
  for (const auto& row : rows) {
    if (row["source"] != "manual") continue;
    auto scenario = nlohmann::json::parse(kScenario);
    scenario["plan"] = row["plan"]["plan"];
    scenario["training"]["micro_batch"] = row["plan"]["training"]["micro_batch"];
    scenario["training"]["recompute"] = row["plan"]["training"]["recompute"];
    std::ofstream(dir / "manual.json") << scenario.dump(2);
    CHECK(run_time("run " + (dir / "manual.json").string()) == Approx(row["iteration_time_s"].get<double>()).epsilon(1e-12));
    break;
  }
  // Same inputs, same bytes.
  const auto again = run_cli("rank " + s + " --top 4 --clusters 6 --csv -", false);
  REQUIRE(again.code == 0);
  std::stringstream csv;
  csv << std::ifstream(dir / "r.csv").rdbuf();
  CHECK(again.output == csv.str());
}

TEST_CASE("rank: bad options are errors that name them", "[cli][rank]") {
  const fs::path dir = setup_dir("bad");
  const std::string s = (dir / "s.json").string();
  const auto mb = run_cli("rank " + s + " --no-alpa --micro-batches 3");
  CHECK(mb.code == 1);
  CHECK_THAT(mb.output, Catch::Contains("--micro-batches") && Catch::Contains("3"));
  const auto top = run_cli("rank " + s + " --no-alpa --top 0");
  CHECK(top.code == 2);
  const auto out = run_cli("rank " + s + " --no-alpa --csv /nonexistent-folder/r.csv");
  CHECK(out.code == 1);
  CHECK_THAT(out.output, Catch::Contains("/nonexistent-folder/r.csv"));
  const auto missing = run_cli("rank " + (dir / "missing.json").string());
  CHECK(missing.code == 1);
}

TEST_CASE("search and rank: progress on a terminal, nothing on a pipe or with --quiet", "[cli][rank][search]") {
  const fs::path dir = setup_dir("progress");
  const std::string s = (dir / "s.json").string(), plan = (dir / "p.plan.json").string();
  const std::string bin = CLUSTERSIM_BINARY;
  // stderr on a pipe: silent.
  const auto piped = run_shell(bin + " search " + s + " -o " + plan + " --clusters 3 2>&1 >/dev/null");
  CHECK(piped.code == 0);
  CHECK(piped.output.empty());
  const auto rank_piped = run_shell(bin + " rank " + s + " --clusters 3 2>&1 >/dev/null");
  CHECK(rank_piped.code == 0);
  CHECK(rank_piped.output.empty());
  // On a terminal (util-linux `script` gives the command one): a bar with rate and ETA.
  if (run_shell("command -v script >/dev/null 2>&1").code != 0) return;
  const auto tty = run_shell("script -qec '" + bin + " search " + s + " -o " + plan + " --clusters 3 >/dev/null' /dev/null");
  INFO(tty.output);
  CHECK(tty.code == 0);
  CHECK_THAT(tty.output, Catch::Contains("steps/s ETA") && Catch::Contains("plans/s ETA") && Catch::Contains("100%"));
  const auto quiet =
      run_shell("script -qec '" + bin + " search " + s + " -o " + plan + " --clusters 3 --quiet >/dev/null' /dev/null");
  CHECK(quiet.code == 0);
  CHECK(quiet.output.find("ETA") == std::string::npos);
}

TEST_CASE("search names the best manual plan over every knob, rank's first row", "[cli][rank][search]") {
  const fs::path dir = setup_dir("search-best");
  const std::string s = (dir / "s.json").string(), plan = (dir / "p.plan.json").string();
  const auto r = run_cli("search " + s + " -o " + plan + " --clusters 3 --json", false);
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto doc = nlohmann::json::parse(r.output);
  const auto& best = doc["search"]["best_manual_estimated"];
  const auto rk = run_cli("rank " + s + " --top 1 --no-alpa --json -", false);
  REQUIRE(rk.code == 0);
  const auto row = nlohmann::json::parse(rk.output)["rows"][0];
  CHECK(best["label"] == row["label"]);
  CHECK(best["prediction"]["iteration_time_s"].get<double>() == Approx(row["iteration_time_s"].get<double>()).epsilon(1e-12));
  const auto text = run_cli("search " + s + " -o " + plan + " --clusters 3");
  CHECK_THAT(text.output, Catch::Contains("Best manual plan over every knob") && Catch::Contains(row["label"].get<std::string>()));
}

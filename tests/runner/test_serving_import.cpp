// Measured serving runs (runner/serving_import): the committed engine runs imported with
// their summary (the simulator's statistics over the measured requests) and provenance,
// once; paired with a served run of the same scenario by compare_serving; bad files
// rejected with the file, the JSON path and the value.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "costmodel/cluster.hpp"
#include "results/store.hpp"
#include "runner/compare.hpp"
#include "runner/serving_import.hpp"
#include "runner/store.hpp"
#include "scenarios/json_reader.hpp"
#include "sim/serve.hpp"

using namespace clustersim;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
const fs::path kData = fs::path(CLUSTERSIM_SOURCE_DIR) / "calibration/data/h100-sxm5-80gb";
const std::string kFile = (kData / "serving-engine-2026-11-26.json").string();
const std::string kHost = (kData / "serving-engine-host-2026-11-26.json").string();

fs::path fresh_db(const std::string& name) {
  const fs::path p = test::temp_dir() / ("clustersim-serving-import-" + name);
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(p.string() + s);
  return p;
}

const runner::MeasuredServingRun& run_named(const runner::ServingImport& im, const std::string& label) {
  const auto it = std::find_if(im.runs.begin(), im.runs.end(), [&](const auto& r) { return r.label == label; });
  REQUIRE(it != im.runs.end());
  return *it;
}
}  // namespace

TEST_CASE("db import-serving: the engine's trace runs are stored with their summary and provenance, once",
          "[serving][results]") {
  const runner::ServingImport im = runner::read_serving_engine_runs(kFile, kHost, "h100-sxm5-80gb");
  // 9 Poisson runs replayed a trace; warm-up, single, probe and the deadline-skipped runs did not.
  CHECK(im.runs.size() == 9);
  CHECK(im.skipped.size() == 15);
  const auto& r = run_named(im, "llama-1b/rate0");

  // TTFT p50 and E2E p90 by the closed nearest-rank rule over the file's requests.
  const json data = read_json_file(kFile);
  std::vector<double> ttft, e2e;
  for (const auto& run : data["runs"])
    if (run["model"] == "llama-1b" && run["label"] == "rate0")
      for (const auto& q : run["requests"]) {
        ttft.push_back(q["first_token_s"].get<double>() - q["arrival_s"].get<double>());
        e2e.push_back(q["finish_s"].get<double>() - q["arrival_s"].get<double>());
      }
  REQUIRE(ttft.size() == 50);
  std::sort(ttft.begin(), ttft.end());
  std::sort(e2e.begin(), e2e.end());
  const double ttft_p50 = ttft[std::size_t(std::ceil(0.5 * 50)) - 1], e2e_p90 = e2e[std::size_t(std::ceil(0.9 * 50)) - 1];
  const auto& sm = r.record.summary;
  std::printf("llama-1b/rate0: TTFT p50 expected %.6f s, stored %.6f s; E2E p90 expected %.6f s, stored %.6f s\n",
              ttft_p50, sm["ttft_s"]["p50"].get<double>(), e2e_p90, sm["e2e_s"]["p90"].get<double>());
  CHECK(sm["ttft_s"]["p50"].get<double>() == ttft_p50);
  CHECK(sm["e2e_s"]["p90"].get<double>() == e2e_p90);
  CHECK(sm["measured_requests"] == 50);
  CHECK(sm["tbt_s"]["p50"].get<double>() > 0);
  CHECK(r.record.requests.size() == 50);
  CHECK(r.record.requests[0].contains("token_s"));
  // Provenance: the GPU, the engine and its version, the date and the producing script.
  CHECK(r.record.environment["gpu"] == "NVIDIA H100 80GB HBM3");
  CHECK(r.record.environment["engine_version"] == "5.17.0");
  CHECK(r.record.environment["date_utc"] == "2026-11-26T15:07:32Z");
  CHECK(r.record.source == "calibration/serving/measure_engine.py");
  CHECK(r.record.file == kFile);
  CHECK(r.scenario.scheduler.kind == SchedulerKind::transformers_fifo);
  CHECK(r.scenario.engine.host.enabled);

  const fs::path db_file = fresh_db("once.db");
  const auto first = runner::store_measured_serving_runs(db_file.string(), im.runs);
  const auto second = runner::store_measured_serving_runs(db_file.string(), im.runs);
  REQUIRE(first.size() == 9);
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(first[i].id == second[i].id);
  const results::Database db(db_file.string(), results::Database::Mode::read_only);
  CHECK(db.count("measured_serving_runs") == 9);
  const auto rows = db.query("SELECT name, request_count, ttft_p50_s, engine_version, json_array_length(requests_json) AS n"
                             " FROM measured_serving_runs WHERE name = 'llama-1b/rate0'");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0]["request_count"] == 50);
  CHECK(rows[0]["n"] == 50);
  CHECK(rows[0]["ttft_p50_s"].get<double>() == ttft_p50);
  CHECK(rows[0]["engine_version"] == "5.17.0");
}

TEST_CASE("db compare --method served: a measured serving run against the served run of its scenario",
          "[serving][results]") {
  const runner::ServingImport im = runner::read_serving_engine_runs(kFile, kHost, "h100-sxm5-80gb");
  const fs::path db_file = fresh_db("compare.db");
  runner::store_measured_serving_runs(db_file.string(), im.runs);
  CHECK(runner::compare_serving(db_file.string()).pairs.empty());

  // Replay one run from the scenario file the import writes (as `clustersim serve FILE --db` does).
  const auto& r = run_named(im, "llama-1b/rate2");
  const fs::path scenario_file = test::temp_dir() / "clustersim-serving-import-llama-1b-rate2.json";
  std::ofstream(scenario_file) << r.scenario_document.dump(2);
  const ServingScenario s = load_serving_scenario(scenario_file.string());
  Diagnostics cd(s.source);
  const ClusterModel c = resolve_cluster(s.cluster, cd);
  REQUIRE(cd.ok());
  const sim::ServeResult served = sim::simulate_serving(s, c);
  json out = sim::to_json(served.summary);
  out["plan"] = {{"scheduler", to_json(s)["scheduler"]}};
  runner::store_serving_run(db_file.string(), s, out);

  const runner::ServingComparison cmp = runner::compare_serving(db_file.string());
  REQUIRE(cmp.pairs.size() == 1);
  CHECK(cmp.unpaired == 8);
  const json& p = cmp.pairs[0];
  CHECK(p["measured_name"] == "llama-1b/rate2");
  for (const char* f : {"ttft_p50", "ttft_p90", "e2e_p50", "e2e_p90", "throughput_rps"}) {
    REQUIRE(p["figures"].contains(f));
    const auto& x = p["figures"][f];
    const double m = x["measured"].get<double>(), v = x["served"].get<double>();
    std::printf("%-15s measured %.6g, served %.6g, error expected %+.2f%%, reported %+.2f%%\n", f, m, v,
                100 * (v - m) / m, 100 * x["error"].get<double>());
    CHECK(x["error"].get<double>() == Approx((v - m) / m).epsilon(1e-12));
    // The ground-truth test's bound on every figure (tests/runner/test_serve_engine.cpp).
    CHECK(std::fabs(x["error"].get<double>()) <= 0.30);
  }
  CHECK(p["figures"]["ttft_p50"]["measured"].get<double>() == r.record.summary["ttft_s"]["p50"].get<double>());
  CHECK(p["figures"]["e2e_p90"]["served"].get<double>() == served.summary.e2e.p90);
  CHECK(cmp.figures.at("ttft_p50").n == 1);
  fs::remove(scenario_file);
}

TEST_CASE("db import-serving: a damaged file names the file, the JSON path and the value, and nothing is stored",
          "[serving][results]") {
  json data = read_json_file(kFile);
  const fs::path dir = test::temp_dir() / "clustersim-serving-import-bad";
  fs::create_directories(dir);
  if (!fs::exists(dir / "serving-traces")) fs::create_directory_symlink(kData / "serving-traces", dir / "serving-traces");
  std::size_t rate0 = 0, rate1 = 0, rate2 = 0;
  for (std::size_t i = 0; i < data["runs"].size(); ++i) {
    if (data["runs"][i]["model"] != "llama-1b") continue;
    if (data["runs"][i]["label"] == "rate0") rate0 = i;
    if (data["runs"][i]["label"] == "rate1") rate1 = i;
    if (data["runs"][i]["label"] == "rate2") rate2 = i;
  }
  data["runs"][rate0]["requests"][3]["first_token_s"] = "soon";
  data["runs"][rate1]["engine"] = 99;
  data["runs"][rate2]["requests"][7]["finish_s"] = 0.0001;
  const fs::path bad = dir / "serving-engine-bad.json";
  std::ofstream(bad) << data.dump();
  const auto message = [&] {
    try {
      runner::read_serving_engine_runs(bad.string(), kHost, "h100-sxm5-80gb");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  }();
  std::printf("%s\n", message.c_str());
  const std::string f = bad.string() + ": ";
  CHECK_THAT(message, Catch::Contains(f + "/runs/" + std::to_string(rate0) + "/requests/3/first_token_s") &&
                          Catch::Contains("\"soon\""));
  CHECK_THAT(message, Catch::Contains(f + "/runs/" + std::to_string(rate1) + "/engine") && Catch::Contains("99"));
  CHECK_THAT(message, Catch::Contains(f + "/runs/" + std::to_string(rate2) + "/requests/7/finish_s"));

  // Not the format, and a missing trace.
  const fs::path other = dir / "other.json";
  std::ofstream(other) << R"({"format": "clustersim-measured-run/1"})";
  CHECK_THROWS_WITH(runner::read_serving_engine_runs(other.string(), kHost, "h100-sxm5-80gb"),
                    Catch::Contains(other.string() + ": /format") && Catch::Contains("clustersim-measured-run/1"));
  json missing = read_json_file(kFile);
  missing["runs"][rate0]["trace"]["file"] = "no-such-trace.csv";
  const fs::path mfile = dir / "missing-trace.json";
  std::ofstream(mfile) << missing.dump();
  CHECK_THROWS_WITH(runner::read_serving_engine_runs(mfile.string(), kHost, "h100-sxm5-80gb"),
                    Catch::Contains("/runs/" + std::to_string(rate0) + "/trace/file") &&
                        Catch::Contains("no-such-trace.csv"));
  fs::remove_all(dir);
}

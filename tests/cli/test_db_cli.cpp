// clustersim db end to end: importing a measured run (the GPU machine's format), the
// comparison's error figures against their closed form, exports and charts.
#include "test_temp.hpp"
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {
using Result = clustersim::test::CliResult;

// stdout only unless `merge`: JSON outputs must not mix with stderr notes.
Result run(const std::string& args, bool merge = true) { return clustersim::test::run_cli(args, merge); }

fs::path temp(const std::string& name) { return clustersim::test::temp_dir() / ("clustersim-db-" + name); }

fs::path fresh_db(const std::string& name) {
  const fs::path p = temp(name);
  for (const char* s : {"", "-wal", "-shm"}) fs::remove(p.string() + s);
  return p;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A measured run exactly as the GPU machine's script writes it (partial scenario: no
// name, no intra/inter node sections, no simulation section).
json measured_doc(double step_time, const std::string& name, int layers = 12) {
  json doc = json::parse(R"({"format": "clustersim-measured-run/1", "source": "test fixture",
    "scenario": {"model": {"family": "gpt", "hidden": 768, "heads": 12, "seq_len": 1024, "vocab": 50304},
                 "training": {"global_batch": 8, "micro_batch": 8, "precision": "amp-bf16"},
                 "cluster": {"gpu": "h100-sxm5-80gb", "nodes": 1, "gpus_per_node": 1},
                 "plan": {"dp": 1, "tp": 1, "pp": 1}},
    "measured": {"forward_time_s": 0.06, "backward_time_s": 0.12, "optimizer_time_s": 0.01,
                 "peak_memory_bytes": 2.0e10, "peak_reserved_bytes": 2.2e10, "tokens_per_s": 40960,
                 "parameters": 1.24e8, "steps_measured": 3, "step_times_s": [0.2, 0.21, 0.19]},
    "environment": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "550.54", "cuda": "12.4", "cudnn": 90100,
                    "torch": "2.4.0", "python": "3.11.9", "hostname": "gpu1", "date_utc": "2026-11-25T10:00:00Z",
                    "attention_kernel": "flash", "optimizer_impl": "fused"}})");
  doc["name"] = name;
  doc["measured"]["step_time_s"] = step_time;
  doc["scenario"]["model"]["layers"] = layers;
  return doc;
}

fs::path write_json(const std::string& name, const json& j) {
  const auto p = temp(name);
  std::ofstream(p) << j.dump(2);
  return p;
}
}  // namespace

TEST_CASE("measured runs join predictions of the same scenario, errors match their closed form", "[db-cli]") {
  const auto db = fresh_db("compare.db");
  const double measured_a = 0.2, measured_b = 0.5;
  const auto a = write_json("a.json", measured_doc(measured_a, "gpt-12l", 12));
  const auto b = write_json("b.json", measured_doc(measured_b, "gpt-24l", 24));
  const auto imp = run("db import-measured " + a.string() + " " + b.string() + " --db " + db.string());
  INFO(imp.output);
  REQUIRE(imp.code == 0);
  // Re-importing the same files adds nothing.
  REQUIRE(run("db import-measured " + a.string() + " --db " + db.string()).code == 0);

  // The completed scenario of each measured run, as a full scenario file, run with --db.
  double predicted[2];
  int i = 0;
  for (const auto& [file, layers] : {std::pair{a, 12}, std::pair{b, 24}}) {
    auto sc = measured_doc(1, "x", layers)["scenario"];
    sc["name"] = "completed " + std::to_string(layers);
    const auto sc_file = write_json("scenario-" + std::to_string(layers) + ".json", sc);
    const auto r = run("run --json --db " + db.string() + " " + sc_file.string(), false);
    REQUIRE(r.code == 0);
    predicted[i++] = json::parse(r.output)["iteration_time_s"].get<double>();
  }
  const auto c = run("db compare --json --db " + db.string(), false);
  INFO(c.output);
  REQUIRE(c.code == 0);
  const auto cmp = json::parse(c.output);
  REQUIRE(cmp["pairs"].size() == 2);
  const double err_a = (predicted[0] - measured_a) / measured_a, err_b = (predicted[1] - measured_b) / measured_b;
  const double mape = (std::abs(err_a) + std::abs(err_b)) / 2, bias = (err_a + err_b) / 2;
  const double worst = std::abs(err_a) > std::abs(err_b) ? err_a : err_b;
  const auto& overall = cmp["overall"];
  INFO("expected MAPE " << mape << ", bias " << bias << ", worst " << worst << "; got " << overall.dump());
  CHECK(overall["runs"] == 2);
  CHECK(overall["mape"].get<double>() == Approx(mape).epsilon(1e-12));
  CHECK(overall["bias"].get<double>() == Approx(bias).epsilon(1e-12));
  CHECK(overall["worst"].get<double>() == Approx(worst).epsilon(1e-12));
  REQUIRE(cmp["groups"].size() == 1);
  CHECK(cmp["groups"][0]["hardware"] == "NVIDIA H100 80GB HBM3");
  CHECK(cmp["groups"][0]["family"] == "gpt");
  const auto text = run("db compare --db " + db.string());
  CHECK_THAT(text.output, Catch::Contains("MAPE") && Catch::Contains("bias") && Catch::Contains("worst"));

  // The measured run keeps its environment and figures.
  const auto show = json::parse(run("db show m1 --db " + db.string(), false).output);
  CHECK(show["torch"] == "2.4.0");
  CHECK(show["environment"]["optimizer_impl"] == "fused");
  CHECK(show["measured"]["step_times_s"].size() == 3);
  CHECK(show.at("scenario").at("cluster").at("intra_node").at("fabric") == "nvswitch");  // defaults filled in

  // Predicted against measured, with the y = x line.
  const auto svg = temp("pm.svg");
  REQUIRE(run("db plot predicted-vs-measured --out " + svg.string() + " --db " + db.string()).code == 0);
  const auto s = read_file(svg);
  CHECK_THAT(s, Catch::StartsWith("<svg") && Catch::Contains("y = x") && Catch::Contains("measured step time (s)") &&
                    Catch::Contains("predicted step time (s)") && Catch::Contains("NVIDIA H100 80GB HBM3 / gpt"));
}

TEST_CASE("a bad measured-run file names the key and imports nothing", "[db-cli]") {
  const auto db = fresh_db("badimport.db");
  auto bad = measured_doc(0.2, "bad");
  bad["format"] = "clustersim-measured-run/2";
  bad["measured"].erase("step_time_s");
  bad["measured"]["step_time"] = 0.2;
  bad["scenario"]["plan"]["tp"] = 2;
  const auto f = write_json("bad.json", bad);
  const auto good = write_json("good.json", measured_doc(0.2, "good"));
  const auto r = run("db import-measured " + good.string() + " " + f.string() + " --db " + db.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(f.string() + ": /format: expected \"clustersim-measured-run/1\""));
  CHECK_THAT(r.output, Catch::Contains("/measured/step_time_s: required key is missing"));
  CHECK_THAT(r.output, Catch::Contains("/measured/step_time_s: "));
  CHECK_THAT(r.output, Catch::Contains(f.string() + ": /scenario/plan"));
  CHECK_FALSE(fs::exists(db));  // nothing imported, not even an empty database
}

TEST_CASE("export and plot a sweep: every run once, axes as columns, titled charts", "[db-cli]") {
  const auto db = fresh_db("export.db");
  const std::string sweep = std::string(CLUSTERSIM_SOURCE_DIR) + "/sweeps/gpt-1.3b-plans.json";
  REQUIRE(run("sweep -q " + sweep + " --db " + db.string()).code == 0);
  const auto csv = run("db export --csv --sweep 1 --db " + db.string(), false);
  REQUIRE(csv.code == 0);
  std::istringstream in(csv.output);
  std::string header, line;
  std::getline(in, header);
  CHECK_THAT(header, Catch::Contains("axis:/plan/tp") && Catch::Contains("axis:/training/micro_batch") &&
                         Catch::Contains("tokens_per_s") && Catch::Contains("plan.zero"));
  int rows = 0;
  while (std::getline(in, line)) ++rows;
  CHECK(rows == 54);
  const auto js = json::parse(run("db export --json --sweep 1 --db " + db.string(), false).output);
  REQUIRE(js.size() == 54);
  CHECK(js[0]["axes"]["/plan/tp"] == 1);
  CHECK(js[0]["plan"]["dp"] == 16);
  CHECK(run("db export --sweep 1 --db " + db.string()).code == 1);  // neither --csv nor --json

  const auto svg = temp("sweep.svg");
  const auto p = run("db plot sweep --sweep 1 --x tp --series micro_batch --y tokens_per_s --where zero=1 --out " +
                     svg.string() + " --db " + db.string());
  INFO(p.output);
  REQUIRE(p.code == 0);
  const auto s = read_file(svg);
  CHECK_THAT(s, Catch::Contains("gpt-1.3b-plans: tokens_per_s against /plan/tp") &&
                    Catch::Contains("throughput (tokens/s)") && Catch::Contains(">micro_batch=1<") &&
                    Catch::Contains(">micro_batch=4<"));
  // One polyline per series.
  std::size_t lines = 0;
  for (auto pos = s.find("<polyline"); pos != std::string::npos; pos = s.find("<polyline", pos + 1)) ++lines;
  CHECK(lines == 3);
  const auto bad = run("db plot sweep --sweep 1 --x tpp --out " + svg.string() + " --db " + db.string());
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Catch::Contains("no axis \"tpp\"") && Catch::Contains("/plan/tp"));
  // Analytical runs carry no timeline: a clear error, not an empty chart.
  const auto tl = run("db plot timeline 1 --out " + svg.string() + " --db " + db.string());
  CHECK(tl.code == 1);
  CHECK_THAT(tl.output, Catch::Contains("has no timeline"));
  const auto list = run("db list --limit 3 --db " + db.string());
  CHECK(list.code == 0);
  CHECK_THAT(list.output, Catch::Contains("gpt-1.3b-plans ["));
}

TEST_CASE("db import-serving, serve --db and db compare --method served end to end", "[cli][serving]") {
  const fs::path data = fs::path(CLUSTERSIM_SOURCE_DIR) / "calibration/data/h100-sxm5-80gb";
  const auto db = fresh_db("serving.db");
  const fs::path dir = temp("serving-scenarios");
  fs::remove_all(dir);
  const std::string import = "db import-serving " + (data / "serving-engine-2026-11-26.json").string() +
                             " --gpu h100-sxm5-80gb --host " + (data / "serving-engine-host-2026-11-26.json").string() +
                             " --scenarios-out " + dir.string() + " --db " + db.string();
  const auto first = run(import);
  INFO(first.output);
  REQUIRE(first.code == 0);
  CHECK_THAT(first.output, Catch::Contains("measured serving run s1 llama-1b/rate0 (50 requests"));
  CHECK_THAT(first.output, Catch::Contains("skipped") && Catch::Contains("llama-8b/rate1 (poisson): no trace to replay"));
  CHECK(fs::is_regular_file(dir / "llama-8b-rate4.json"));
  // Importing again stores nothing new: the same ids come back.
  const auto again = run(import);
  CHECK(again.code == 0);
  CHECK_THAT(again.output, Catch::Contains("measured serving run s1 llama-1b/rate0"));
  const auto check = run("db check --db " + db.string());
  CHECK_THAT(check.output, Catch::Contains("measured_serving_runs") && Catch::Contains("9"));

  // Listed and shown like the other runs: sN, with the per-request records and the provenance.
  CHECK_THAT(run("db list --db " + db.string()).output, Catch::Contains("s1 ") && Catch::Contains("measured-serving"));
  const json shown = json::parse(run("db show s1 --db " + db.string(), false).output);
  CHECK(shown["name"] == "llama-1b/rate0");
  CHECK(shown["requests"].size() == 50);  // every request as measured
  CHECK(shown["request_count"] == 50);
  CHECK(shown["environment"]["engine_version"] == "5.17.0");
  CHECK(shown["summary"]["ttft_s"]["p50"].get<double>() == shown["ttft_p50_s"].get<double>());
  CHECK(run("db show s99 --db " + db.string()).code == 1);

  const auto served = run("serve " + (dir / "llama-8b-rate4.json").string() + " --db " + db.string());
  INFO(served.output);
  REQUIRE(served.code == 0);
  const auto cmp = run("db compare --method served --json --db " + db.string(), false);
  INFO(cmp.output);
  REQUIRE(cmp.code == 0);
  const json j = json::parse(cmp.output);
  REQUIRE(j["pairs"].size() == 1);
  CHECK(j["pairs"][0]["measured_name"] == "llama-8b/rate4");
  CHECK(j["unpaired"] == 8);
  for (const char* f : {"ttft_p50", "ttft_p90", "e2e_p50", "e2e_p90"}) {
    const auto& x = j["pairs"][0]["figures"][f];
    std::printf("llama-8b/rate4 %-9s measured %.4f s, served %.4f s, error %+.1f%%\n", f, x["measured"].get<double>(),
                x["served"].get<double>(), 100 * x["error"].get<double>());
    CHECK(std::fabs(x["error"].get<double>()) <= 0.30);
  }
  const auto table = run("db compare --method served --db " + db.string());
  CHECK_THAT(table.output, Catch::Contains("llama-8b/rate4") && Catch::Contains("MAPE") &&
                               Catch::Contains("8 measured serving run(s) have no served run"));
  // A bad file: file, JSON path, value; exit 1.
  const auto bad = run("db import-serving " + (data / "serving-engine-host-2026-11-26.json").string() +
                       " --gpu h100-sxm5-80gb --db " + db.string());
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Catch::Contains("serving-engine-host-2026-11-26.json: /format"));
  const json after = json::parse(run("db compare --method served --json --db " + db.string(), false).output);
  CHECK(after["pairs"].size() == 1);  // nothing stored by the bad import
  CHECK(after["unpaired"] == 8);
  fs::remove_all(dir);
}

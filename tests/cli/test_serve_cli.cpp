// `clustersim serve` end to end: the shipped scenario, its outputs (JSON, per-request
// CSV, Perfetto trace), a trace workload, and bad input (exit 1 with file and path).
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "run_cli.hpp"

using namespace clustersim::test;

TEST_CASE("serve prints latencies and writes the per-request CSV and the trace", "[serving][cli]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto csv = clustersim::test::temp_dir() / "clustersim-test-serve.csv";
  const auto trace = clustersim::test::temp_dir() / "clustersim-test-serve-trace.json";
  const auto r = run_cli("serve " + root + "/data/scenarios/serving/llama3-8b-vllm-h100.json --requests-csv " +
                         csv.string() + " --trace " + trace.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("TTFT") && Catch::Contains("SLO attainment") && Catch::Contains("KV cache"));
  std::ifstream in(csv);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) ++lines;
  CHECK(lines == 401);
  const auto t = nlohmann::json::parse(std::ifstream(trace));
  CHECK(t["traceEvents"].size() > 100);

  const auto db = clustersim::test::temp_dir() / "clustersim-test-serve.db";
  std::filesystem::remove(db);
  const auto stored = run_cli("serve " + root + "/data/scenarios/serving/llama3-8b-vllm-h100.json --db " + db.string());
  INFO(stored.output);
  CHECK(stored.code == 0);
  CHECK_THAT(stored.output, Catch::Contains("stored run 1"));
  const auto listed = run_cli("db list --db " + db.string());
  CHECK(listed.code == 0);
  CHECK_THAT(listed.output, Catch::Contains("served"));

  const auto j = run_cli("serve --json " + root + "/data/scenarios/serving/llama3-8b-vllm-h100.json", false);
  REQUIRE(j.code == 0);
  const auto doc = nlohmann::json::parse(j.output);
  CHECK(doc["requests"] == 400);
  CHECK(doc["ttft_s"]["p99"].get<double>() >= doc["ttft_s"]["p50"].get<double>());
}

TEST_CASE("serve replays a trace file, and bad traces and scenarios exit 1 naming the place", "[serving][cli]") {
  const auto trace = write_temp("serve-trace.csv", "arrival_time,prompt_tokens,output_tokens\n0,100,10\n0.5,200,5\n");
  const std::string scenario = R"({"name": "t",
    "model": {"family": "llama", "hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8, "ffn_hidden": 8192,
              "vocab": 128256, "seq_len": 4096},
    "cluster": {"gpu": "h100-sxm5-80gb", "nodes": 1, "gpus_per_node": 1},
    "serving": {"replicas": 1, "scheduler": {"policy": "orca"}},
    "workload": {"arrival": "trace", "trace": ")" + trace.string() + R"("}})";
  const auto file = write_temp("serve-scenario.json", scenario);
  const auto ok = run_cli("serve --json " + file.string(), false);
  INFO(ok.output);
  REQUIRE(ok.code == 0);
  CHECK(nlohmann::json::parse(ok.output)["requests"] == 2);

  write_temp("serve-trace.csv", "arrival_time,prompt_tokens,output_tokens\n0,100,10\n0.5,-3,5\n");
  const auto bad = run_cli("serve " + file.string());
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Catch::Contains("serve-trace.csv: line 3/prompt_tokens") && Catch::Contains("\"-3\""));

  const auto valid = run_cli("validate " + std::string(CLUSTERSIM_SOURCE_DIR) +
                             "/data/scenarios/serving/llama2-70b-sarathi-disagg-h100.json");
  CHECK(valid.code == 0);

  const auto unknown = write_temp("serve-bad.json", R"({"model": {"family": "llama"}, "serving": {"replica": 2}})");
  const auto u = run_cli("serve " + unknown.string());
  CHECK(u.code == 1);
  CHECK_THAT(u.output, Catch::Contains("/serving/replica") && Catch::Contains("replicas"));
  CHECK(run_cli("validate " + unknown.string()).code == 1);
}

TEST_CASE("serve --capacity finds the fewest GPUs meeting the SLOs, and more load needs more", "[serving][cli]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto gpus_at = [&](double rate) {
    const auto r = run_cli("serve --json --jobs 2 --capacity " + std::to_string(rate) + " " + root +
                               "/data/scenarios/serving/llama3-8b-vllm-h100.json",
                           false);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.output);
    REQUIRE(j["best"].is_object());
    // Nothing cheaper meets the SLOs.
    for (const auto& c : j["candidates"])
      if (c["meets_slo"].get<bool>()) CHECK(c["gpus"].get<int>() >= j["best"]["gpus"].get<int>());
    return j["best"]["gpus"].get<int>();
  };
  const int low = gpus_at(4), high = gpus_at(40);
  std::printf("serve --capacity: %d GPU(s) at 4 req/s, %d at 40 req/s\n", low, high);
  CHECK(low == 1);
  CHECK(high > low);
}

TEST_CASE("db plot draws latency distributions of served runs and a metric against offered load", "[serving][cli]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto db = clustersim::test::temp_dir() / "clustersim-test-serve-plots.db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + suffix);
  const std::string scenario = root + "/data/scenarios/serving/llama3-8b-vllm-h100.json";
  for (const char* rate : {"3", "6", "9"}) {
    const auto r = run_cli("serve " + scenario + " --rate " + rate + " --db " + db.string());
    INFO(r.output);
    REQUIRE(r.code == 0);
  }
  const auto j3 = nlohmann::json::parse(run_cli("serve --json --rate 3 " + scenario, false).output);
  const auto j9 = nlohmann::json::parse(run_cli("serve --json --rate 9 " + scenario, false).output);
  CHECK(j3["scenario"]["workload"]["rate"] == 3.0);
  // More load, more queueing: the tail of the time to first token grows.
  CHECK(j9["ttft_s"]["p99"].get<double>() > j3["ttft_s"]["p99"].get<double>());

  // "-o -": the chart on standard output.
  const auto cdf = run_cli("db plot latency-cdf 1 3 --latency e2e --db " + db.string() + " -o -", false);
  REQUIRE(cdf.code == 0);
  CHECK_THAT(cdf.output, Catch::Contains("<svg") && Catch::Contains("run 1: llama3-8b-vllm-2x-h100") &&
                             Catch::Contains("run 3: ") && Catch::Contains("end-to-end latency (ms)") &&
                             Catch::Contains("fraction of requests"));

  const auto load = run_cli("db plot serving-load --y ttft_p99 --db " + db.string() + " -o -", false);
  REQUIRE(load.code == 0);
  CHECK_THAT(load.output, Catch::Contains("<svg") && Catch::Contains("offered load (requests/s)") &&
                              Catch::Contains("TTFT p99 (ms)") &&
                              Catch::Contains("llama3-8b-vllm-2x-h100 (vllm, 2 x (tp 1 x pp 1))"));

  const auto bad_metric = run_cli("db plot serving-load --y ttft_p98 --db " + db.string() + " -o -");
  CHECK(bad_metric.code == 1);
  CHECK_THAT(bad_metric.output, Catch::Contains("--y") && Catch::Contains("ttft_p98"));
  const auto no_run = run_cli("db plot latency-cdf 7 --db " + db.string() + " -o -");
  CHECK(no_run.code == 1);
  CHECK_THAT(no_run.output, Catch::Contains("no served run 7"));
  const auto trace = write_temp("serve-rate-trace.csv", "arrival_time,prompt_tokens,output_tokens\n0,100,10\n");
  const auto traced = write_temp("serve-rate-trace.json", R"({"name": "t",
    "model": {"family": "llama", "hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8, "ffn_hidden": 8192,
              "vocab": 128256, "seq_len": 4096},
    "cluster": {"gpu": "h100-sxm5-80gb", "nodes": 1, "gpus_per_node": 1},
    "serving": {"replicas": 1, "scheduler": {"policy": "orca"}},
    "workload": {"arrival": "trace", "trace": ")" + trace.string() + R"("}})");
  const auto rate_on_trace = run_cli("serve --rate 4 " + traced.string());
  CHECK(rate_on_trace.code == 1);
  CHECK_THAT(rate_on_trace.output, Catch::Contains("--rate") && Catch::Contains("trace"));
}

TEST_CASE("a stored disaggregated served run records the SimGrid version and network model it ran on", "[serving][cli]") {
  const auto db = clustersim::test::temp_dir() / "clustersim-serve-disagg.db";
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + s);
  const auto r = run_cli("serve " + std::string(CLUSTERSIM_SOURCE_DIR) +
                         "/data/scenarios/serving/llama2-70b-sarathi-disagg-h100.json --db " + db.string());
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("KV transfer     mean"));
  const auto shown = run_cli("db show 1 --db " + db.string(), false);
  INFO(shown.output);
  const auto j = nlohmann::json::parse(shown.output);
  CHECK(j.dump().find("\"simgrid_version\":\"3.") != std::string::npos);
  CHECK(j.dump().find("CM02") != std::string::npos);
}

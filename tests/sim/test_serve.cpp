// The serving simulator (sim/serve) and its schedulers (strategies/serving_scheduler):
// closed forms (one request; a saturated static batch; M/D/1 waiting), invariants of
// every policy (no request lost or duplicated, KV capacity never exceeded, FIFO),
// determinism, bad input, and the shipped serving scenarios' key figures
// (tests/expected/serving_figures.json; CLUSTERSIM_UPDATE_EXPECTED=1 rewrites it).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "scenarios/json_reader.hpp"
#include "sim/serve.hpp"
#include "strategies/serving_batch.hpp"

using namespace clustersim;
namespace fs = std::filesystem;

namespace {
nlohmann::json base_doc() {
  return nlohmann::json::parse(R"({
    "name": "test",
    "model": {"family": "llama", "hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
              "vocab": 128256, "seq_len": 8192, "tie_embeddings": false},
    "cluster": {"gpu": "h100-sxm5-80gb", "nodes": 1, "gpus_per_node": 8},
    "serving": {"engine": {"launch": "cuda-graphs"}, "replicas": 1,
                "scheduler": {"policy": "vllm"}},
    "workload": {"arrival": "fixed-rate", "rate": 1, "requests": 1,
                 "prompt": {"dist": "fixed", "value": 512}, "output": {"dist": "fixed", "value": 64}}
  })");
}

ServingScenario parse(const nlohmann::json& doc) {
  Diagnostics diag("<test>");
  ServingScenario s = parse_serving_scenario(doc, diag);
  INFO((diag.ok() ? std::string() : diag.problems()[0].to_string()));
  REQUIRE(diag.ok());
  return s;
}

ClusterModel cluster_of(const ServingScenario& s) {
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(s.cluster, diag);
  REQUIRE(diag.ok());
  return c;
}
}  // namespace

TEST_CASE("serve: one request takes a prefill and D-1 decode steps", "[serving]") {
  for (const char* policy : {"static", "orca", "vllm", "sarathi"}) {
    auto doc = base_doc();
    doc["serving"]["scheduler"]["policy"] = policy;
    const ServingScenario s = parse(doc);
    const ClusterModel c = cluster_of(s);
    const BatchTimeModel m(s.model, c, s.engine, 1, 1);
    const std::int64_t P = 512, D = 64;
    const double ttft = m.prefill(1, P).total;
    double e2e = ttft;
    for (std::int64_t k = 1; k < D; ++k) e2e += m.decode(1, P + k).total;
    const auto r = sim::simulate_serving(s, c);
    REQUIRE(r.records.size() == 1);
    std::printf("%-8s single request: TTFT expected %.3f ms, simulated %.3f ms; E2E expected %.3f ms, simulated %.3f ms\n",
                policy, ttft * 1e3, r.records[0].ttft() * 1e3, e2e * 1e3, r.records[0].e2e() * 1e3);
    CHECK(r.records[0].ttft() == Approx(ttft).epsilon(1e-12));
    CHECK(r.records[0].e2e() == Approx(e2e).epsilon(1e-12));
    CHECK(r.records[0].tokens == D);
  }
}

TEST_CASE("serve: iteration_overhead adds its host time to every iteration of one request", "[serving]") {
  auto doc = base_doc();
  const ServingScenario plain = parse(doc);
  doc["serving"]["engine"]["iteration_overhead"] = "5ms";
  const ServingScenario s = parse(doc);
  CHECK(s.engine.iteration_overhead == Approx(5e-3).epsilon(1e-12));
  const ClusterModel c = cluster_of(s);
  const auto base = sim::simulate_serving(plain, c);
  const auto r = sim::simulate_serving(s, c);
  REQUIRE(r.records.size() == 1);
  REQUIRE(base.records.size() == 1);
  // One prefill and D-1 decode steps, each 5 ms longer (the host's work outside the forward
  // does not overlap the GPU's).
  const double D = 64;
  const double expected = base.records[0].e2e() + D * 5e-3;
  std::printf("iteration_overhead 5 ms: TTFT expected %.3f ms, simulated %.3f ms; E2E expected %.3f ms, simulated %.3f ms\n",
              (base.records[0].ttft() + 5e-3) * 1e3, r.records[0].ttft() * 1e3, expected * 1e3, r.records[0].e2e() * 1e3);
  CHECK(r.records[0].ttft() == Approx(base.records[0].ttft() + 5e-3).epsilon(1e-9));
  CHECK(r.records[0].e2e() == Approx(expected).epsilon(1e-9));
  doc["serving"]["engine"]["iteration_overhead"] = "-1ms";
  Diagnostics diag("<test>");
  (void)parse_serving_scenario(doc, diag);
  REQUIRE_FALSE(diag.ok());
  CHECK_THAT(diag.problems()[0].to_string(), Catch::Contains("/serving/engine/iteration_overhead"));
}

TEST_CASE("serve: a saturated static batch decodes in lock-step", "[serving]") {
  auto doc = base_doc();
  doc["serving"]["scheduler"] = {{"policy", "static"}, {"max_batch_size", 32}, {"max_batched_tokens", 32 * 512}};
  doc["workload"]["rate"] = 1e6;  // all 32 arrive within 31 us, before the first iteration ends
  doc["workload"]["requests"] = 32;
  const ServingScenario s = parse(doc);
  const ClusterModel c = cluster_of(s);
  const BatchTimeModel m(s.model, c, s.engine, 1, 1);
  // The first request starts alone; the other 31 form the next batch at its end.
  const double first = m.prefill(1, 512).total + [&] {
    double t = 0;
    for (int k = 1; k < 64; ++k) t += m.decode(1, 512 + k).total;
    return t;
  }();
  double batch = m.prefill(31, 512).total;
  for (int k = 1; k < 64; ++k) batch += m.decode(31, 512 + k).total;
  const auto r = sim::simulate_serving(s, c);
  const double last_end = r.records.back().last_token;
  std::printf("static: first batch ends at %.3f ms (expected %.3f), batch of 31 ends at %.3f ms (expected %.3f)\n",
              r.records[0].last_token * 1e3, first * 1e3, last_end * 1e3, (first + batch) * 1e3);
  CHECK(r.records[0].last_token == Approx(first).epsilon(1e-12));
  CHECK(last_end == Approx(first + batch).epsilon(1e-12));
  for (std::size_t i = 1; i < r.records.size(); ++i) CHECK(r.records[i].last_token == r.records.back().last_token);
}

TEST_CASE("serve: waiting at low load follows M/D/1", "[serving]") {
  // One replica serving one request at a time, prompt-only requests (one output token):
  // deterministic service S, Poisson arrivals at rate lambda. Pollaczek-Khinchine:
  // mean wait = rho S / (2 (1 - rho)).
  auto doc = base_doc();
  doc["serving"]["scheduler"] = {{"policy", "static"}, {"max_batch_size", 1}};
  doc["workload"] = nlohmann::json::parse(R"({"arrival": "poisson", "rate": 1, "requests": 40000, "seed": 11,
      "prompt": {"dist": "fixed", "value": 1024}, "output": {"dist": "fixed", "value": 1}})");
  const ServingScenario s0 = parse(doc);
  const ClusterModel c = cluster_of(s0);
  const double S = BatchTimeModel(s0.model, c, s0.engine, 1, 1).prefill(1, 1024).total;
  for (double rho : {0.2, 0.5}) {
    doc["workload"]["rate"] = rho / S;
    const auto r = sim::simulate_serving(parse(doc), c);
    const double expected = S + rho * S / (2 * (1 - rho));
    std::printf("M/D/1 rho=%.1f: mean TTFT expected %.4f ms, simulated %.4f ms\n", rho, expected * 1e3,
                r.summary.ttft.mean * 1e3);
    CHECK(r.summary.ttft.mean == Approx(expected).epsilon(0.03));
  }
}

TEST_CASE("serve: no request lost or duplicated, KV capacity never exceeded, under preemption", "[serving]") {
  for (const char* policy : {"static", "orca", "vllm", "sarathi"})
    for (const char* preemption : {"recompute", "swap"}) {
      auto doc = base_doc();
      // A small KV cache (memory_fraction) and a heavy load force preemptions.
      doc["serving"]["engine"]["memory_fraction"] = 0.27;
      doc["serving"]["replicas"] = 2;
      doc["serving"]["router"] = "least-outstanding-tokens";
      doc["serving"]["scheduler"] = {{"policy", policy},
                                     {"max_batch_size", 128},
                                     {"max_batched_tokens", 4096},
                                     {"preemption", preemption}};
      doc["workload"] = nlohmann::json::parse(R"({"arrival": "poisson", "rate": 40, "requests": 600, "seed": 5,
          "prompt": {"dist": "uniform", "min": 16, "max": 3000}, "output": {"dist": "zipf", "min": 1, "max": 1500}})");
      const ServingScenario s = parse(doc);
      const auto r = sim::simulate_serving(s, cluster_of(s));
      INFO(policy << " " << preemption);
      std::printf("%-8s %-9s: %lld requests, %lld preemptions, KV peak use %.3f, p50 TTFT %.0f ms\n", policy,
                  preemption, (long long)r.summary.requests, (long long)r.summary.preemptions, r.summary.kv_peak_use,
                  r.summary.ttft.p50 * 1e3);
      REQUIRE(r.records.size() == 600);
      for (const auto& x : r.records) {
        CHECK(x.tokens == x.output);
        CHECK(x.first_token >= x.arrival);
        CHECK(x.last_token >= x.first_token);
      }
      CHECK(r.summary.kv_peak_use <= 1.0);
      if (std::string(policy) == "vllm" || std::string(policy) == "sarathi") {
        CHECK(r.summary.kv_peak_use > 0.9);
        CHECK(r.summary.preemptions > 0);
      } else {
        CHECK(r.summary.preemptions == 0);  // they reserve a request's whole length
      }
    }
}

TEST_CASE("serve: first come, first served without preemption", "[serving]") {
  for (const char* policy : {"orca", "vllm", "sarathi", "static"}) {
    auto doc = base_doc();
    doc["serving"]["scheduler"] = {{"policy", policy}, {"max_batch_size", 8}};
    doc["workload"] = nlohmann::json::parse(R"({"arrival": "poisson", "rate": 30, "requests": 300, "seed": 2,
        "prompt": {"dist": "fixed", "value": 700}, "output": {"dist": "fixed", "value": 40}})");
    const ServingScenario s = parse(doc);
    const auto r = sim::simulate_serving(s, cluster_of(s));
    INFO(policy);
    CHECK(r.summary.preemptions == 0);
    for (std::size_t i = 1; i < r.records.size(); ++i) CHECK(r.records[i].first_token >= r.records[i - 1].first_token);
  }
}

TEST_CASE("serve: the same scenario gives the same bytes", "[serving]") {
  auto doc = base_doc();
  doc["serving"]["scheduler"] = {{"policy", "sarathi"}, {"max_batched_tokens", 1024}};
  doc["workload"] = nlohmann::json::parse(R"({"arrival": "gamma", "cv": 3, "rate": 8, "requests": 300, "seed": 9,
      "prompt": {"dist": "zipf", "min": 10, "max": 4000, "exponent": 1.1}, "output": {"dist": "uniform", "min": 1, "max": 300}})");
  const ServingScenario s = parse(doc);
  const auto a = sim::simulate_serving(s, cluster_of(s)), b = sim::simulate_serving(s, cluster_of(s));
  CHECK(sim::requests_csv(a) == sim::requests_csv(b));
  CHECK(sim::to_json(a.summary).dump() == sim::to_json(b.summary).dump());
  doc["workload"]["seed"] = 10;
  const ServingScenario s2 = parse(doc);
  CHECK(sim::requests_csv(sim::simulate_serving(s2, cluster_of(s2))) != sim::requests_csv(a));
}

TEST_CASE("serve: the stored latency distribution agrees with the requests and the percentiles", "[serving]") {
  auto doc = base_doc();
  doc["workload"] = nlohmann::json::parse(R"({"arrival": "poisson", "rate": 6, "requests": 250, "seed": 3,
      "prompt": {"dist": "uniform", "min": 64, "max": 3000}, "output": {"dist": "uniform", "min": 2, "max": 200}})");
  const ServingScenario s = parse(doc);
  const auto r = sim::simulate_serving(s, cluster_of(s));
  std::vector<double> ttft;
  for (const auto& x : r.records) ttft.push_back(x.ttft());
  std::sort(ttft.begin(), ttft.end());
  const auto& q = r.summary.ttft.quantiles;
  REQUIRE(q.size() == 101);
  // k/100 quantile = the ceil(k n / 100)-th smallest request (the smallest for k = 0).
  for (int k : {0, 1, 37, 50, 90, 99, 100}) {
    const auto rank = std::max<std::size_t>(1, std::size_t(std::ceil(k * double(ttft.size()) / 100.0)));
    std::printf("TTFT quantile %3d%%: expected %.6f s (request %zu of %zu), computed %.6f s\n", k, ttft[rank - 1], rank,
                ttft.size(), q[std::size_t(k)]);
    CHECK(q[std::size_t(k)] == ttft[rank - 1]);
  }
  CHECK(q[50] == r.summary.ttft.p50);
  CHECK(q[90] == r.summary.ttft.p90);
  CHECK(q[99] == r.summary.ttft.p99);
  CHECK(std::is_sorted(q.begin(), q.end()));
  CHECK(r.summary.e2e.quantiles.size() == 101);
  CHECK(r.summary.tpot.quantiles.size() == 101);
  CHECK(r.summary.tbt.quantiles.empty());  // binned: percentiles only
  const auto j = sim::to_json(r.summary);
  CHECK(j["ttft_s"]["quantiles"].size() == 101);
  CHECK(!j["tbt_s"].contains("quantiles"));
}

TEST_CASE("serve: bad serving scenarios name the file, the JSON path and the value", "[serving]") {
  auto doc = base_doc();
  doc["serving"]["scheduler"]["policy"] = "vlm";
  doc["workload"]["prompt"]["value"] = -4;
  doc["slo"] = {{"ttft", 5}};
  doc["serving"]["engine"]["kernels"] = "transformer";
  doc["serving"]["engine"]["gqa"] = "masked";
  Diagnostics diag("bad.json");
  parse_serving_scenario(doc, diag);
  std::string all;
  for (const auto& p : diag.problems()) all += p.to_string() + "\n";
  std::printf("%s", all.c_str());
  CHECK_THAT(all, Catch::Contains("bad.json: /serving/scheduler/policy") && Catch::Contains("did you mean \"vllm\"") &&
                      Catch::Contains("/workload/prompt/value") && Catch::Contains("-4") &&
                      Catch::Contains("/slo/ttft") && Catch::Contains("/serving/engine/kernels") &&
                      Catch::Contains("\"transformer\"") && Catch::Contains("/serving/engine/gqa"));
  // A KV cache too small for the longest request is an error, not a hang.
  auto big = base_doc();
  big["serving"]["engine"]["memory_fraction"] = 0.225;  // about 11,700 tokens of KV cache (85.0e9-byte H100)
  big["workload"]["prompt"]["value"] = 8000;
  big["workload"]["output"]["value"] = 6000;
  big["model"]["seq_len"] = 16384;
  const ServingScenario s = parse(big);
  CHECK_THROWS_WITH(sim::simulate_serving(s, cluster_of(s)), Catch::Contains("needs the KV cache of 14000 tokens"));
}

TEST_CASE("serve: every shipped serving scenario runs and reproduces its key figures", "[serving][shipped]") {
  const fs::path root = CLUSTERSIM_SOURCE_DIR;
  const fs::path expected_file = root / "tests/expected/serving_figures.json";
  const bool update = std::getenv("CLUSTERSIM_UPDATE_EXPECTED") != nullptr;
  nlohmann::json expected = fs::exists(expected_file) ? read_json_file(expected_file.string()) : nlohmann::json::object();
  nlohmann::json actual = nlohmann::json::object();
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(root / "data/scenarios/serving"))
    if (e.path().extension() == ".json") files.push_back(fs::relative(e.path(), root).generic_string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 2);
  for (const auto& rel : files) {
    INFO(rel);
    const ServingScenario s = load_serving_scenario((root / rel).string());
    const auto r = sim::simulate_serving(s, cluster_of(s));
    const auto& m = r.summary;
    actual[rel] = {{"ttft_p50_s", m.ttft.p50}, {"ttft_p99_s", m.ttft.p99}, {"tpot_p50_s", m.tpot.p50},
                   {"e2e_p90_s", m.e2e.p90},   {"throughput_rps", m.throughput_rps}, {"kv_blocks", m.kv_blocks},
                   {"preemptions", m.preemptions}};
    for (const auto& x : r.records) CHECK(x.tokens == x.output);
    if (update) continue;
    REQUIRE(expected.contains(rel));
    const auto& x = expected[rel];
    std::printf("%-56s TTFT p50 expected %.6g s, simulated %.6g s\n", rel.c_str(), x["ttft_p50_s"].get<double>(), m.ttft.p50);
    for (const auto& [k, v] : actual[rel].items()) CHECK(v.get<double>() == Approx(x[k].get<double>()).epsilon(1e-9));
  }
  if (update) {
    std::ofstream(expected_file) << actual.dump(2) << '\n';
    WARN("rewrote " << expected_file.string());
  } else {
    CHECK(expected.size() == actual.size());
  }
}

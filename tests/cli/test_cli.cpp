// The clustersim binary end to end: exit codes and messages a user sees.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "tests/cli/run_cli.hpp"

namespace fs = std::filesystem;

namespace {
using Result = clustersim::test::CliResult;

Result run(const std::string& args) { return clustersim::test::run_cli(args); }

using clustersim::test::write_temp;
}  // namespace

TEST_CASE("run with no file uses the built-in default scenario", "[cli]") {
  const auto r = run("run");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("iteration time") && Catch::Contains("memory per GPU"));
}

TEST_CASE("run --json has the documented keys", "[cli]") {
  const auto r = run("run --json " + std::string(CLUSTERSIM_SOURCE_DIR) + "/data/scenarios/default.json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.output);
  for (const char* key : {"iteration_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "mfu",
                          "memory_per_gpu_bytes", "fits", "breakdown", "memory"})
    CHECK(j.contains(key));
  for (const char* key : {"compute_forward_s", "compute_backward_s", "compute_recompute_s", "tp_comm_exposed_s",
                          "pp_comm_exposed_s", "dp_comm_exposed_s", "bubble_s", "optimizer_s"})
    CHECK(j["breakdown"].contains(key));
  for (const char* key : {"weights_bytes", "gradients_bytes", "optimizer_states_bytes", "activations_bytes",
                          "temporary_bytes"})
    CHECK(j["memory"].contains(key));
}

TEST_CASE("bad input: file, JSON path, value, non-zero exit", "[cli]") {
  const auto bad = write_temp("bad.json", R"({"name": "x",
    "model": {"family": "gpt", "hidden": 1024, "layers": 24, "heads": 16, "seq_len": 1024, "vocab": 51200},
    "training": {"global_batch": 64, "micro_batch": 2},
    "cluster": {"gpu": "a100-sxm4-80gbb", "nodes": 1, "gpus_per_node": 8,
                "intra_node": {"bandwidth": 300}},
    "plan": {"dp": 8, "tp": 1, "pp": 1, "zerro": 1}})");
  const auto r = run("validate " + bad.string());
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains(bad.string() + ": /cluster/intra_node/bandwidth: 300 has no unit"));
  CHECK_THAT(r.output, Catch::Contains("/plan/zerro: unknown key \"zerro\"; did you mean \"zero\"?"));
  const auto gpu = write_temp("badgpu.json", R"({"name": "x",
    "model": {"family": "gpt", "hidden": 1024, "layers": 24, "heads": 16, "seq_len": 1024, "vocab": 51200},
    "training": {"global_batch": 64, "micro_batch": 2},
    "cluster": {"gpu": "a100-sxm4-80gbb", "nodes": 1, "gpus_per_node": 8},
    "plan": {"dp": 8, "tp": 1, "pp": 1}})");
  const auto g = run("run " + gpu.string());
  CHECK(g.code == 1);
  CHECK_THAT(g.output, Catch::Contains("/cluster/gpu: unknown GPU \"a100-sxm4-80gbb\"") &&
                           Catch::Contains("did you mean \"a100-sxm4-80gb\""));
}

TEST_CASE("missing files, broken JSON and bad command lines fail cleanly", "[cli]") {
  auto r = run("run /nonexistent/scenario.json");
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/scenario.json") && Catch::Contains("cannot open"));
  const auto broken = write_temp("broken.json", "{\"name\": ");
  r = run("run " + broken.string());
  CHECK(r.code == 1);
  CHECK_THAT(r.output, Catch::Contains("invalid JSON at line 1"));
  CHECK(run("frobnicate").code == 2);
  CHECK(run("run --no-such-flag").code == 2);
}

TEST_CASE("gpus lists the built-in profiles", "[cli]") {
  const auto r = run("gpus");
  CHECK(r.code == 0);
  for (const char* name : {"v100-sxm2-16gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb"})
    CHECK_THAT(r.output, Catch::Contains(name));
}

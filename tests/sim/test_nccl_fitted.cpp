// The simulator prices collectives inside an H100 node by the profile's NCCL fit, as
// collective_time does (sim/collectives/nccl_fitted.cpp): a lone collective on 2 and 4
// GPUs of an 8-GPU NVSwitch node takes the estimator's time, for every operation and
// sizes from 1 KiB to 1 GiB; contention still emerges; and a profile without the fit
// simulates as before.
#include <catch2/catch.hpp>
#include <cstdio>

#include "costmodel/collectives.hpp"
#include "costmodel/nccl_model.hpp"
#include "sim/simulate.hpp"

using namespace clustersim;

namespace {

ClusterModel h100_node(const std::string& gpu) {
  ClusterSpec spec;
  spec.gpu = gpu;
  spec.nodes = 1;
  spec.gpus_per_node = 8;
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  return c;
}

std::vector<std::int64_t> first(std::int64_t n) {
  std::vector<std::int64_t> r;
  for (std::int64_t i = 0; i < n; ++i) r.push_back(i);
  return r;
}

constexpr Collective kOps[] = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                               Collective::all_to_all, Collective::broadcast,  Collective::send_recv};

}  // namespace

TEST_CASE("simulated collectives inside an H100 node match collective_time with the NCCL fit", "[sim][collectives][nccl]") {
  const ClusterModel c = h100_node("h100-sxm5-80gb");
  REQUIRE(nvlink_fit_applies(c));
  for (std::int64_t n : {2, 4})
    for (Collective op : kOps) {
      std::vector<sim::CollectiveProbe> probes;
      const double sizes[] = {1024, 65536, 1048576, 16777216, 268435456, 1073741824};
      for (double bytes : sizes) probes.push_back({"auto", op, bytes, {first(n)}});
      for (std::size_t i = 0; i < probes.size(); ++i) {
        // One probe per simulation: probes started together would share the links.
        const double simulated = sim::time_collectives(c, {probes[i]}).at(0);
        const double expected = collective_time(c, op, sizes[i], Group{n, n}, 1);
        std::printf("%-14s n=%lld %10.0f B: collective_time %.3f us, simulated %.3f us, busbw %.1f GB/s\n",
                    std::string(to_string(op)).c_str(), (long long)n, sizes[i], 1e6 * expected, 1e6 * simulated,
                    bus_factor(op, n) * sizes[i] / simulated / 1e9);
        CHECK(simulated == Approx(expected).epsilon(0.02));
      }
    }
}

TEST_CASE("two fitted all-gathers on the same GPUs share their NVLink ports", "[sim][collectives][nccl]") {
  const ClusterModel c = h100_node("h100-sxm5-80gb");
  const double B = 256e6;
  const sim::CollectiveProbe a{"auto", Collective::all_gather, B, {{0, 1, 2, 3}}};
  const double alone = sim::time_collectives(c, {a}).at(0);
  const auto both = sim::time_collectives(c, {a, a});
  const double latency = fitted_latency(c.gpu.nccl.nvlink, Collective::all_gather, 4);
  std::printf("all-gather of 256 MB on 4 GPUs: alone %.1f us, two at once %.1f us and %.1f us (latency %.1f us)\n",
              1e6 * alone, 1e6 * both[0], 1e6 * both[1], 1e6 * latency);
  CHECK(both[0] - latency == Approx(2 * (alone - latency)).epsilon(0.02));
}

TEST_CASE("a profile without the NCCL fit simulates intra-node collectives as before", "[sim][collectives][nccl]") {
  const ClusterModel c = h100_node("h100-sxm5-80gb-datasheet");
  REQUIRE_FALSE(nvlink_fit_applies(c));
  const double B = 64e6, n = 4, bw = c.intra_bandwidth * c.gpu.efficiency.collective_nvlink;
  const double expected = 2 * (n - 1) / n * B / bw + 2 * (n - 1) * c.intra_latency;
  const double t = sim::time_collectives(c, {{"ring-pipelined", Collective::all_reduce, B, {first(4)}}}).at(0);
  std::printf("datasheet profile, ring all-reduce 64 MB on 4 GPUs: expected %.3f us, simulated %.3f us\n", 1e6 * expected,
              1e6 * t);
  CHECK(t == Approx(expected).epsilon(0.01));
}

// Collective model against its closed forms.
#include <catch2/catch.hpp>

#include "costmodel/collectives.hpp"

using namespace clustersim;

namespace {
ClusterModel dgx(std::int64_t nodes) {
  ClusterModel c;
  c.gpu = *find_gpu_profile("a100-sxm4-80gb");
  c.gpu.nccl = NcclCalibration{};  // the closed forms below are the constant-efficiency model's
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.intra_bandwidth = 300e9;
  c.intra_latency = 3e-6;
  c.nics_per_node = 8;
  c.nic_bandwidth = 25e9;
  c.inter_latency = 5e-6;
  return c;
}
}  // namespace

TEST_CASE("ring all-reduce inside a node: 2(n-1)/n B/bw + 2(n-1) alpha", "[collectives]") {
  const ClusterModel c = dgx(1);
  const double B = 1e9, n = 8;
  const double bw = 300e9 * c.gpu.efficiency.collective_nvlink;
  const double expected = 2 * (n - 1) / n * B / bw + 2 * (n - 1) * 3e-6;
  const double t = collective_time(c, Collective::all_reduce, B, Group{8, 8}, 1.0);
  INFO("expected " << expected << " s, model " << t);
  CHECK(t == Approx(expected).epsilon(1e-12));
  CHECK(collective_time(c, Collective::all_gather, B, Group{8, 8}, 1.0) ==
        Approx((n - 1) / n * B / bw + (n - 1) * 3e-6).epsilon(1e-12));
}

TEST_CASE("small all-reduces over many ranks take the tree's log latency", "[collectives]") {
  const ClusterModel c = dgx(64);
  const double B = 4096, n = 512;
  const double t = collective_time(c, Collective::all_reduce, B, Group{512, 8}, 1.0);
  const double bw = 8 * 25e9 * c.gpu.efficiency.collective_network;
  const double tree = 2 * B / std::min(bw, 300e9 * c.gpu.efficiency.collective_nvlink) + 2 * 9 * 5e-6;
  CHECK(t == Approx(tree).epsilon(1e-12));
  CHECK(t < 2 * (n - 1) * 5e-6);
}

TEST_CASE("a group spanning nodes is bound by its share of the NICs", "[collectives]") {
  const ClusterModel c = dgx(4);
  const double B = 4e9;
  // One rank per node (as a DP group under TP 8): one NIC's worth each.
  const double share = 1.0 / 8;
  const double net = 8 * 25e9 * c.gpu.efficiency.collective_network * share;
  const double expected = 2 * 3.0 / 4 * B / net + 2 * 3 * 5e-6;
  CHECK(collective_time(c, Collective::all_reduce, B, Group{4, 1}, share) == Approx(expected).epsilon(1e-12));
  // Eight ranks per node: the ring is bound by the slower of NVLink and all 8 NICs.
  const double full = collective_time(c, Collective::all_reduce, B, Group{32, 8}, 1.0);
  const double bw = std::min(300e9 * c.gpu.efficiency.collective_nvlink, 8 * 25e9 * c.gpu.efficiency.collective_network);
  CHECK(full == Approx(2 * 31.0 / 32 * B / bw + 2 * 31 * 5e-6).epsilon(1e-12));
}

TEST_CASE("all-to-all splits traffic between NVLink and the network", "[collectives]") {
  const ClusterModel c = dgx(2);
  const double B = 1e9;
  const double intra = B * 7 / 16 / (300e9 * c.gpu.efficiency.collective_nvlink);
  const double inter = 8 * B * 8 / 16 / (8 * 25e9 * c.gpu.efficiency.collective_network);
  CHECK(collective_time(c, Collective::all_to_all, B, Group{16, 8}, 1.0) ==
        Approx(std::max(intra, inter) + 15 * 5e-6).epsilon(1e-12));
  CHECK(collective_time(c, Collective::all_reduce, B, Group{1, 1}, 1.0) == 0);
}

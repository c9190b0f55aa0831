// Fabric nvlink-mesh (costmodel/nvlink_mesh.hpp): the DGX-1V wiring, the rings packed
// on it against figures derived by hand, and collective_time on those rings.
#include <catch2/catch.hpp>
#include <array>
#include <cstdio>

#include "costmodel/collectives.hpp"
#include "costmodel/nvlink_mesh.hpp"

using namespace clustersim;

namespace {

ClusterModel dgx1(std::int64_t gpus_per_node = 8, std::int64_t nodes = 1) {
  ClusterSpec spec;
  spec.gpu = "v100-sxm2-16gb";
  spec.nodes = nodes;
  spec.gpus_per_node = gpus_per_node;
  spec.intra_node.fabric = Fabric::nvlink_mesh;
  if (nodes > 1) spec.inter_node = InterNodeSpec{Topology::fat_tree, 1, 25e9 / 8, 10e-6, 1.0};
  Diagnostics diag("<test>");
  ClusterModel c = resolve_cluster(spec, diag);
  REQUIRE(diag.ok());
  c.gpu.nccl = NcclCalibration{};  // the closed forms below are the constant-efficiency model's
  c.gpu.efficiency.collective_nvlink = 0.70;  // with the NCCL efficiency they state
  return c;
}

std::string describe(const MeshRings& r) {
  std::string s;
  for (const auto& ring : r.rings) {
    s += s.empty() ? "" : ", ";
    for (std::size_t i = 0; i < ring.order.size(); ++i) {
      if (i) s += '-';
      s += std::to_string(ring.order[i]);
    }
    s += " x" + std::to_string(ring.width);
  }
  return s + (r.nvlink ? "" : " (through the host)");
}

constexpr double kLink = 25e9;  // one NVLink2 brick, per direction

}  // namespace

TEST_CASE("nvlink-mesh: the DGX-1V table gives every GPU 6 link ends", "[collectives][mesh]") {
  std::array<int, kHybridCubeMeshGpus> ends{};
  int doubled = 0;
  for (const auto& p : hybrid_cube_mesh()) {
    CHECK(p.a < p.b);
    CHECK((p.links == 1 || p.links == 2));
    ends[static_cast<std::size_t>(p.a)] += p.links;
    ends[static_cast<std::size_t>(p.b)] += p.links;
    doubled += p.links == 2;
  }
  for (int g = 0; g < kHybridCubeMeshGpus; ++g) {
    INFO("GPU " << g);
    CHECK(ends[static_cast<std::size_t>(g)] == kHybridCubeMeshLinksPerGpu);
  }
  // 12 cube edges + 4 face diagonals, the doubled ones forming one ring through all 8.
  CHECK(hybrid_cube_mesh().size() == 16);
  CHECK(doubled == 8);
  const MeshWiring w = mesh_wiring(dgx1());
  CHECK(w.link_bandwidth == Approx(kLink * dgx1().gpu.efficiency.collective_nvlink));
  CHECK(w.links(0, 3) == 2);
  CHECK(w.links(3, 0) == 2);
  CHECK(w.links(0, 1) == 1);
  CHECK(w.links(0, 5) == 0);
}

TEST_CASE("nvlink-mesh: rings packed on a pair, a quad and all 8 GPUs", "[collectives][mesh]") {
  const MeshWiring w = mesh_wiring(dgx1());
  const double eff = 0.70;
  struct Case {
    std::vector<int> gpus;
    int width;  // links per direction, derived by hand
    const char* why;
  };
  const Case cases[] = {
      {{0, 3}, 2, "NV2: the ring 0 -> 3 -> 0 takes both directions of the two links"},
      {{0, 1}, 1, "NV1"},
      {{0, 1, 2, 3}, 4,
       "GPUs 0 and 1 have 4 link ends each inside the quad, so at most 4 directed rings; the packing finds 4"},
      {{4, 5, 6, 7}, 4, "the other quad, the same wiring mirrored"},
      {{0, 2, 4, 6}, 2, "only the ring 0-2-6-4 (bottleneck 1) and its reverse: 0-6 and 2-4 have no NVLink"},
      {{0, 1, 2, 3, 4, 5, 6, 7}, 6,
       "the doubled links form the ring 0-3-2-1-5-6-7-4 (width 2 both ways), the single ones 0-1-3-7-5-4-6-2 (width 1 "
       "both ways): all 6 link ends of every GPU, 150 GB/s"},
  };
  for (const auto& c : cases) {
    const MeshRings& r = hybrid_cube_mesh_rings(c.gpus);
    const double bw = ring_bandwidth(w, r);
    std::printf("GPUs %zu: rings %s = %d links: expected %.1f GB/s, model %.1f GB/s (before the %.2f NCCL efficiency)\n",
                c.gpus.size(), describe(r).c_str(), r.width(), c.width * kLink / 1e9, bw / eff / 1e9, eff);
    INFO(c.why << ": " << describe(r));
    CHECK(r.nvlink);
    CHECK(r.width() == c.width);
    CHECK(bw == Approx(c.width * kLink * eff).epsilon(1e-12));
  }
  // The 8-GPU packing, ring by ring (deterministic: the lexicographically first of the
  // widest rings first).
  const MeshRings& all = hybrid_cube_mesh_rings({0, 1, 2, 3, 4, 5, 6, 7});
  REQUIRE(all.rings.size() == 4);
  CHECK(all.rings[0].order == std::vector<int>{0, 3, 2, 1, 5, 6, 7, 4});
  CHECK(all.rings[0].width == 2);
  CHECK(all.rings[1].order == std::vector<int>{0, 4, 7, 6, 5, 1, 2, 3});
  CHECK(all.rings[1].width == 2);
  CHECK(all.rings[2].order == std::vector<int>{0, 1, 3, 7, 5, 4, 6, 2});
  CHECK(all.rings[2].width == 1);
  CHECK(all.rings[3].order == std::vector<int>{0, 2, 6, 4, 5, 7, 3, 1});
  CHECK(all.rings[3].width == 1);
  CHECK(all.share(0) == Approx(2.0 / 6));
  // Where the greedy packing falls short, the exact search widens it: on GPUs 0-6 the
  // greedy rings reach 3 links; 4 fit, the most GPUs 4 and 6 (4 link ends each) allow.
  std::printf("GPUs 0-6: rings %s\n", describe(hybrid_cube_mesh_rings({0, 1, 2, 3, 4, 5, 6})).c_str());
  CHECK(hybrid_cube_mesh_rings({0, 1, 2, 3, 4, 5, 6}).width() == 4);
  CHECK(hybrid_cube_mesh_rings({0, 1, 3, 4, 5, 7}).width() == 4);
}

TEST_CASE("nvlink-mesh: a packing never puts more ring width on a link than it has", "[collectives][mesh]") {
  for (unsigned mask = 0; mask < 256; ++mask) {
    std::vector<int> gpus;
    for (int g = 0; g < 8; ++g)
      if (mask & (1u << g)) gpus.push_back(g);
    const MeshRings& r = hybrid_cube_mesh_rings(gpus);
    INFO(describe(r));
    if (gpus.size() < 2) {
      CHECK(r.rings.empty());
      continue;
    }
    if (!r.nvlink) continue;
    int used[8][8] = {};
    for (const auto& ring : r.rings)
      for (std::size_t i = 0; i < ring.order.size(); ++i) {
        const int a = ring.order[i], b = ring.order[(i + 1) % ring.order.size()];
        used[a][b] += ring.width;
      }
    const MeshWiring w = mesh_wiring(dgx1());
    int min_ends = 99;
    for (int a : gpus) {
      int ends = 0;
      for (int b : gpus) {
        if (a == b) continue;
        CHECK(used[a][b] <= w.links(a, b));
        ends += w.links(a, b);
      }
      min_ends = std::min(min_ends, ends);
    }
    // Every directed ring leaves each GPU once: no packing beats the least-connected GPU.
    CHECK(r.width() <= min_ends);
  }
}

TEST_CASE("nvlink-mesh: a group without an NVLink ring goes through the host over PCIe", "[collectives][mesh]") {
  const MeshWiring w = mesh_wiring(dgx1());
  const double pcie = 16e9 * 0.70;
  // GPUs 0 and 5 sit on different sockets with no NVLink (SYS).
  const MeshRings& pair = hybrid_cube_mesh_rings({0, 5});
  CHECK_FALSE(pair.nvlink);
  CHECK(ring_bandwidth(w, pair) == Approx(pcie));
  // 0-1-2-3-4: GPU 4's only NVLink inside the set goes to 0, so no ring; the rank-order
  // ring 0-1-2-3-4 has the hop 3 -> 4 through the host.
  const MeshRings& five = hybrid_cube_mesh_rings({0, 1, 2, 3, 4});
  CHECK_FALSE(five.nvlink);
  CHECK(ring_bandwidth(w, five) == Approx(pcie));
  std::printf("no NVLink ring over {0, 5} or {0, ..., 4}: %.1f GB/s through the host (PCIe 16 GB/s x 0.70)\n",
              ring_bandwidth(w, pair) / 1e9);
}

TEST_CASE("nvlink-mesh: collective_time prices the packed rings", "[collectives][mesh]") {
  const double B = 1e9, eff = 0.70, lat = 5e-6;
  SECTION("all 8 GPUs: the full 150 GB/s, as a switch would give") {
    const ClusterModel c = dgx1();
    const double bw = 6 * kLink * eff;
    CHECK(collective_time(c, Collective::all_reduce, B, Group{8, 8}, 1.0) ==
          Approx(2 * 7.0 / 8 * B / bw + 14 * lat).epsilon(1e-12));
    CHECK(collective_time(c, Collective::all_gather, B, Group{8, 8}, 1.0) ==
          Approx(7.0 / 8 * B / bw + 7 * lat).epsilon(1e-12));
  }
  SECTION("a 4-GPU node (p3.8xlarge, or GPUs 0-3 of a DGX-1): 100 GB/s") {
    const ClusterModel c = dgx1(4);
    const double bw = 4 * kLink * eff;
    CHECK(collective_time(c, Collective::all_reduce, B, Group{4, 4}, 1.0) ==
          Approx(2 * 3.0 / 4 * B / bw + 6 * lat).epsilon(1e-12));
  }
  SECTION("a 2-GPU node: GPUs 0 and 1, one NVLink") {
    const ClusterModel c = dgx1(2);
    CHECK(collective_time(c, Collective::all_reduce, B, Group{2, 2}, 1.0) ==
          Approx(B / (kLink * eff) + 2 * lat).epsilon(1e-12));
    CHECK(collective_time(c, Collective::send_recv, B, Group{2, 2}, 1.0) == Approx(B / (kLink * eff) + lat).epsilon(1e-12));
  }
  SECTION("placements: a known stride picks its sets, an unknown one the slower placement") {
    const ClusterModel c = dgx1();
    // Groups of 4 on 8 GPUs: adjacent {0-3}, {4-7} have 4 links each, strided
    // {0,2,4,6}, {1,3,5,7} only 2.
    CHECK(intra_ring_bandwidth(c, Group{4, 4, 1}) == Approx(4 * kLink * eff));
    CHECK(intra_ring_bandwidth(c, Group{4, 4, 2}) == Approx(2 * kLink * eff));
    CHECK(intra_ring_bandwidth(c, Group{4, 4}) == Approx(2 * kLink * eff));
    // Pairs: {0,1} NV1 bounds the adjacent ones, {2,6} NV1 the stride-4 ones.
    CHECK(intra_ring_bandwidth(c, Group{2, 2, 1}) == Approx(kLink * eff));
    CHECK(intra_ring_bandwidth(c, Group{2, 2, 4}) == Approx(kLink * eff));
    CHECK(node_placements(8, 4, 2) == std::vector<std::vector<int>>{{0, 2, 4, 6}, {1, 3, 5, 7}});
    CHECK(node_placements(8, 2, 6) == std::vector<std::vector<int>>{{0, 6}, {1, 7}});
    CHECK(node_placements(8, 4, 0).size() == 4);
  }
  SECTION("the per-shape figures collective_time keeps equal the rings' and the all-to-all's own") {
    for (std::int64_t gpn = 2; gpn <= 8; ++gpn) {
      const ClusterModel c = dgx1(gpn);
      const MeshWiring w = mesh_wiring(c);
      for (std::int64_t k = 2; k <= gpn; ++k)
        for (std::int64_t stride = 0; stride < gpn; ++stride) {
          const auto sets = node_placements(gpn, k, stride);
          if (sets.empty()) continue;
          double ring = 1e300, a2a = 0;
          for (const auto& set : sets) {
            ring = std::min(ring, ring_bandwidth(w, hybrid_cube_mesh_rings(set)));
            a2a = std::max(a2a, mesh_all_to_all_time(w, set, B / double(k)));
          }
          INFO(gpn << " GPUs, groups of " << k << ", stride " << stride);
          CHECK(intra_ring_bandwidth(c, Group{k, k, stride}) == Approx(ring).epsilon(1e-12));
          CHECK(collective_time(c, Collective::all_to_all, B, Group{k, k, stride}, 1.0) ==
                Approx(a2a + double(k - 1) * lat).epsilon(1e-12));
        }
    }
  }
  SECTION("all-to-all: direct NVLinks, host-routed pairs share each GPU's PCIe link") {
    // 8 GPUs: every GPU has 3 peers without NVLink (B/8 each over its PCIe link) and
    // NV1 peers (B/8 over one link): the PCIe link is the bottleneck.
    const ClusterModel c = dgx1();
    const double expected = std::max(3 * B / 8 / (16e9 * eff), B / 8 / (kLink * eff)) + 7 * lat;
    CHECK(collective_time(c, Collective::all_to_all, B, Group{8, 8}, 1.0) == Approx(expected).epsilon(1e-12));
    // A quad is fully NVLinked: its NV1 pairs bound it.
    const ClusterModel c4 = dgx1(4);
    CHECK(collective_time(c4, Collective::all_to_all, B, Group{4, 4}, 1.0) ==
          Approx(B / 4 / (kLink * eff) + 3 * lat).epsilon(1e-12));
  }
}

TEST_CASE("nvlink-mesh: nodes the hybrid cube mesh does not define are an input error", "[collectives][mesh]") {
  ClusterSpec spec;
  spec.gpu = "v100-sxm2-16gb";
  spec.gpus_per_node = 16;
  spec.intra_node.fabric = Fabric::nvlink_mesh;
  Diagnostics diag("x.json");
  (void)resolve_cluster(spec, diag);
  REQUIRE_FALSE(diag.ok());
  const std::string message = diag.problems().front().to_string();
  INFO(message);
  CHECK_THAT(message, Catch::Contains("/cluster/gpus_per_node"));
  CHECK_THAT(message, Catch::Contains("at most 8"));
  CHECK_THAT(message, Catch::Contains("got 16"));
}

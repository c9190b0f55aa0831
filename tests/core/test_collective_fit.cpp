// Collective fit (costmodel/collective_fit) and the NCCL model (costmodel/nccl_model): the
// fitter recovers a known model from synthetic data the model itself made (a unit test
// of the fitter, not a calibration); the fitted profile makes collective_time give the
// fitted times inside a node and leaves every other case, and every profile without the
// section, as it was; the profile section survives its JSON round trip and is checked
// with JSON paths. The committed one-GPU NCCL smoke file is read, and refused as having
// no link samples.
#include "test_temp.hpp"
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "costmodel/collective_fit.hpp"
#include "costmodel/collectives.hpp"
#include "costmodel/nccl_model.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {

const Collective kKinds[] = {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                             Collective::all_to_all, Collective::broadcast,  Collective::send_recv};

// A model with every term in use: a curve with an LL-like ramp and a slow climb to 1 at
// 1 GiB, exponents on the fitter's grid, buffer terms where the bus factor varies.
NcclLinkFit known_model() {
  NcclLinkFit m;
  m.max_ranks = 8;
  for (int e = 10; e <= 32; ++e) {
    const double x = e - 10;
    m.curve.push_back({std::ldexp(1.0, e), std::min(1.0, 0.05 + 0.95 * (1 - std::exp(-x / 6)) / (1 - std::exp(-20.0 / 6)))});
  }
  m.ops[0] = {5e-6, 0.6e-6, 400e9, 900e9, 1.0};   // all-reduce
  m.ops[1] = {4.5e-6, 0.7e-6, 420e9, 1200e9, 1.5};  // all-gather
  m.ops[2] = {4.8e-6, 0.5e-6, 430e9, 1100e9, 1.3};  // reduce-scatter
  m.ops[3] = {6.5e-6, 0.1e-6, 380e9, 2000e9, 1.4};  // all-to-all
  m.ops[4] = {4.7e-6, 0.4e-6, 390e9, 0, 1.25};      // broadcast: bus factor 1, no buffer term
  m.ops[5] = {6.4e-6, 0, 360e9, 0, 1.5};            // send/recv: one step, no buffer term
  return m;
}

// A clustersim-nccl-bench/1 document: every op on `ranks`, 1 KiB to 4 GiB, times from `model`.
json synthetic_bench(const NcclLinkFit& model, std::initializer_list<int> ranks) {
  json runs = json::array();
  for (int n : ranks) {
    json results = json::array();
    for (Collective op : kKinds)
      for (int e = 10; e <= 32; ++e) {
        const double bytes = std::ldexp(1.0, e);
        results.push_back({{"op", std::string(kNcclOpNames[static_cast<std::size_t>(op)])},
                           {"gpus", n},
                           {"bytes", bytes},
                           {"time_s", fitted_time(model, op, n, bytes)}});
      }
    runs.push_back({{"gpus", n}, {"check_passed", true}, {"results", results}});
  }
  return {{"format", "clustersim-nccl-bench/1"}, {"provenance", {{"note", "synthetic"}}}, {"runs", runs}};
}

std::string write_temp(const json& doc, const std::string& name) {
  const auto path = (clustersim::test::temp_dir() / name).string();
  std::ofstream(path) << doc.dump();
  return path;
}

CollectiveFit fit_files(const std::vector<std::string>& files, int holdout) {
  std::vector<CollectiveBenchmarks> data;
  for (const auto& f : files) data.push_back(read_collective_benchmarks(f));
  return fit_collectives(data, {holdout});
}

ClusterModel node_of(const GpuProfile& p, std::int64_t gpus, Fabric fabric = Fabric::nvswitch) {
  ClusterModel c;
  c.gpu = p;
  c.gpus_per_node = gpus;
  c.fabric = fabric;
  c.intra_bandwidth = p.nvlink_bandwidth;
  c.intra_latency = p.nvlink_latency;
  return c;
}

}  // namespace

TEST_CASE("synthetic NCCL data: the fitter recovers the model that made it", "[collective_fit]") {
  const NcclLinkFit truth = known_model();
  // Two files, as the committed 2- and 4-GPU runs, plus an 8-GPU one.
  const auto a = write_temp(synthetic_bench(truth, {2}), "csim_cf_2.json");
  const auto b = write_temp(synthetic_bench(truth, {4, 8}), "csim_cf_48.json");
  const CollectiveFit fit = fit_files({a, b}, 5);
  REQUIRE(fit.links.size() == 1);
  const LinkFit& nv = fit.links[0];
  CHECK(nv.link == LinkClass::nvlink);
  CHECK(nv.model.max_ranks == 8);
  CHECK(nv.held_back == 3u * 6u * 23u / 5u);
  INFO(fmt::format("held back: median {} max {}", nv.error().median, nv.error().max));
  CHECK(nv.error().max < 0.01);
  // Latencies and bandwidths come back; the curve and the exponents only up to a common
  // power (e^k_op = (e^g)^(k_op/g) predicts the same times, and the curve is the median
  // over operations, so all-reduce's k = 1 pins it only approximately).
  for (Collective op : kKinds) {
    const auto& t = truth.ops[static_cast<std::size_t>(op)];
    const auto& f = nv.model.ops[static_cast<std::size_t>(op)];
    INFO(fmt::format("{}: latency {} vs {}, per step {} vs {}, bus bw {} vs {}, buffer bw {} vs {}, exponent {} vs {}",
                     to_string(op), f.latency, t.latency, f.latency_per_step, t.latency_per_step, f.bus_bandwidth,
                     t.bus_bandwidth, f.buffer_bandwidth, t.buffer_bandwidth, f.curve_exponent, t.curve_exponent));
    CHECK(f.latency == Approx(t.latency).epsilon(0.02));
    CHECK(f.latency_per_step == Approx(t.latency_per_step).margin(0.02e-6));
    CHECK(f.bus_bandwidth == Approx(t.bus_bandwidth).epsilon(0.02));
    CHECK(f.buffer_bandwidth == Approx(t.buffer_bandwidth).epsilon(0.02));
    CHECK(f.curve_exponent / nv.model.ops[0].curve_exponent > 0.9 * t.curve_exponent);
  }
  REQUIRE(nv.model.curve.size() == truth.curve.size());
  double top = 0;
  for (const auto& pt : nv.model.curve) top = std::max(top, pt.efficiency);
  CHECK(top == 1);
}

TEST_CASE("a fit lacking an operation is refused, naming it", "[collective_fit]") {
  json doc = synthetic_bench(known_model(), {2, 4});
  for (auto& run : doc["runs"]) {
    json kept = json::array();
    for (const auto& r : run["results"])
      if (r["op"] != "all_to_all" && r["op"] != "broadcast") kept.push_back(r);
    run["results"] = kept;
  }
  CHECK_THROWS_WITH(fit_files({write_temp(doc, "csim_cf_missing.json")}, 0),
                    Catch::Contains("all_to_all, broadcast") && Catch::Contains("all six"));
}

TEST_CASE("the fitted profile gives collective_time the fitted times inside a node, only there", "[collective_fit]") {
  const NcclLinkFit truth = known_model();
  const CollectiveFit fit = fit_files({write_temp(synthetic_bench(truth, {2, 4, 8}), "csim_cf_apply.json")}, 0);
  const auto base = find_gpu_profile("h100-sxm5-80gb-datasheet");
  REQUIRE(base);
  REQUIRE_FALSE(base->nccl.present());
  std::vector<std::string> notes;
  const GpuProfile p = apply_collective_fit(*base, fit, &notes);
  REQUIRE(p.nccl.present());
  // collective_nvlink: the best asymptotic efficiency of any op (broadcast's 390 GB/s here).
  CHECK(p.efficiency.collective_nvlink == Approx(390e9 / p.nvlink_bandwidth).epsilon(0.02));
  CHECK(p.nvlink_latency == base->nvlink_latency);
  const ClusterModel c = node_of(p, 8);
  for (Collective k : kKinds)
    for (std::int64_t n : {2, 4, 8})
      for (double bytes : {4096.0, 3e6, 64e6, 2e9}) {
        const double model = collective_time(c, k, bytes, Group{n, n}, 1);
        const double expected = fitted_time(p.nccl.nvlink, k, n, bytes);
        INFO(fmt::format("{} n={} {} B: collective_time {} s, fitted {} s", to_string(k), n, bytes, model, expected));
        CHECK(model == Approx(expected).epsilon(1e-12));
      }
  // The one efficiency function both consumers ask.
  CHECK(collective_efficiency(p, LinkClass::nvlink, Collective::all_gather, 4, 1e6) ==
        Approx(fitted_efficiency(p.nccl.nvlink, p.nvlink_bandwidth, Collective::all_gather, 4, 1e6)));
  CHECK(collective_efficiency(p, LinkClass::network, Collective::all_gather, 4, 1e6) == p.efficiency.collective_network);
  CHECK(collective_efficiency(*base, LinkClass::nvlink, Collective::all_gather, 4, 1e6) == base->efficiency.collective_nvlink);
  // Beyond the largest group measured the buffer term is held at its value there.
  CHECK(fitted_efficiency(p.nccl.nvlink, 1, Collective::all_reduce, 64, 1e9) ==
        fitted_efficiency(p.nccl.nvlink, 1, Collective::all_reduce, 8, 1e9));
  // Elsewhere the section changes nothing: a PCIe node, groups across nodes, and a
  // profile without it.
  const ClusterModel pcie = node_of(p, 8, Fabric::pcie);
  const ClusterModel unfitted = node_of(*base, 8);
  ClusterModel two_nodes = node_of(p, 4);
  two_nodes.nodes = 2;
  two_nodes.nics_per_node = 4;
  two_nodes.nic_bandwidth = 50e9;
  two_nodes.inter_latency = 5e-6;
  ClusterModel two_nodes_without = two_nodes;
  two_nodes_without.gpu.nccl = {};
  for (Collective k : kKinds) {
    CHECK(collective_time(two_nodes, k, 64e6, Group{8, 4}, 1) ==
          Approx(collective_time(two_nodes_without, k, 64e6, Group{8, 4}, 1)).epsilon(1e-12));
    ClusterModel same_pcie = pcie;
    same_pcie.gpu.nccl = {};
    CHECK(collective_time(pcie, k, 64e6, Group{4, 4}, 1) ==
          Approx(collective_time(same_pcie, k, 64e6, Group{4, 4}, 1)).epsilon(1e-12));
    CHECK_FALSE(nvlink_nccl_terms(unfitted, k, 4, 64e6));
  }
  const double ag = collective_time(unfitted, Collective::all_gather, 64e6, Group{8, 8}, 1);
  CHECK(ag == Approx(7.0 / 8 * 64e6 / (base->nvlink_bandwidth * base->efficiency.collective_nvlink) +
                     7 * base->nvlink_latency)
                  .epsilon(1e-12));
}

TEST_CASE("the one-GPU NCCL smoke file is read but has no link samples to fit", "[collective_fit]") {
  const std::string file = std::string(CLUSTERSIM_SOURCE_DIR) +
                           "/calibration/data/h100-sxm5-80gb/smoke-1gpu/nccl-bench-1gpu-smoke-2026-11-26.json";
  const CollectiveBenchmarks data = read_collective_benchmarks(file);
  CHECK(data.checks_passed);
  CHECK(data.samples.size() == 6u * 23u);
  CHECK(data.provenance.value("nccl_version", "") == "2.28.9");
  // Header and library of one NCCL install (an earlier build mixed 2.28.9 and 2.28.3).
  CHECK(data.provenance.value("nccl_version_code", 0) == data.provenance.value("nccl_header_version_code", -1));
  for (const auto& s : data.samples) CHECK(s.ranks == 1);
  CHECK_THROWS_WITH(fit_collectives({data}, {}), Catch::Contains("two or more GPUs"));
}

TEST_CASE("bad NCCL benchmark files are refused with a JSON path", "[collective_fit]") {
  json doc = synthetic_bench(known_model(), {2, 4, 8});
  doc["runs"][1]["results"][3]["op"] = "all_reduse";
  doc["runs"][2]["results"][0]["time_s"] = -1;
  const auto file = write_temp(doc, "csim_cf_bad.json");
  try {
    read_collective_benchmarks(file);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK_THAT(what, Catch::Contains("/runs/1/results/3/op") && Catch::Contains("all_reduse"));
    CHECK_THAT(what, Catch::Contains("/runs/2/results/0/time_s"));
  }
  json other = {{"format", "clustersim-microbench/1"}};
  CHECK_THROWS_WITH(read_collective_benchmarks(write_temp(other, "csim_cf_fmt.json")),
                    Catch::Contains("clustersim-nccl-bench/1"));
}

TEST_CASE("a profile's nccl section survives its JSON round trip and is checked with paths", "[collective_fit]") {
  const CollectiveFit fit = fit_files({write_temp(synthetic_bench(known_model(), {2, 4}), "csim_cf_rt.json")}, 0);
  const GpuProfile p = apply_collective_fit(*find_gpu_profile("h100-sxm5-80gb-datasheet"), fit, nullptr);
  const json doc = to_json(p);
  Diagnostics diag("<round trip>");
  const GpuProfile back = parse_gpu_profile(doc, diag);
  std::string problems;
  for (const auto& pr : diag.problems()) problems += pr.to_string() + "\n";
  INFO(problems);
  REQUIRE(diag.ok());
  REQUIRE(back.nccl.present());
  CHECK(to_json(back).dump() == doc.dump());
  CHECK(back.nccl.sources == fit.sources);
  // The fit document carries the model and its errors.
  const auto fdoc = to_json(fit);
  CHECK(fdoc.at("links").at(0).at("link") == "nvlink");
  CHECK(fdoc.at("links").at(0).at("model").at("efficiency_by_size").size() == 23);
  CHECK(fdoc.at("links").at(0).at("error").at("per_operation").size() == 6);

  json bad = doc;
  bad["nccl"]["nvlink"]["ops"]["all_gather"]["bus_bandwidth"] = 3e11;
  bad["nccl"]["nvlink"]["ops"]["broadcast"]["curve_exponnt"] = 1;
  bad["nccl"]["nvlink"]["efficiency_by_size"][3] = {4096, 1.5};
  bad["nccl"]["nvlink"]["ops"].erase("send_recv");
  Diagnostics d2("prof.json");
  const GpuProfile rejected = parse_gpu_profile(bad, d2);
  std::string all;
  for (const auto& pr : d2.problems()) all += pr.to_string() + "\n";
  INFO(all);
  CHECK_THAT(all, Catch::Contains("prof.json: /nccl/nvlink/ops/all_gather/bus_bandwidth"));
  CHECK_THAT(all, Catch::Contains("/nccl/nvlink/ops/broadcast") && Catch::Contains("curve_exponnt"));
  CHECK_THAT(all, Catch::Contains("/nccl/nvlink/efficiency_by_size/3"));
  CHECK_THAT(all, Catch::Contains("/nccl/nvlink/ops") && Catch::Contains("send_recv"));
  CHECK_FALSE(rejected.nccl.present());
}

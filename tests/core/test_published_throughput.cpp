// Accuracy against published end-to-end training throughput (data/published/
// training-throughput.json, each row with its source): V100 and A100 (transferred
// profiles), H100 (calibrated), B200 and GB200 (transferred). Prints predicted beside
// published per row and the mean absolute error per GPU generation, over every published
// validation row of the generation (Megatron SC'21 Table 1, data/published/megatron-sc21-
// table1.json, included), with each source's own figure beside it.
//
// Rows of NeMo's and Megatron-Bridge's tables (H100, B200, GB200) are FP8 runs, predicted
// with mixed-fp8 and, as their recipes set, bf16 main gradients (training.framework
// reduce_dtype). The goal is 10% per generation; it is not met everywhere (see the printed
// table). Volta: the 2019 paper's rows run training.framework megatron-2019 (the paper's
// code on PyTorch 1.1: unfused score scale/mask, bias adds, fp32 logits, FP16_Optimizer,
// its DDP's gradient passes, unvectorized elementwise kernels) and the paper's FLOP
// counting, 8 N T (metric flops_counting, from the v1.0 post's 62.4 TFLOP/s at 1288 ms);
// they are 0-20% optimistic (the 2.5B on 128 GPUs +19.5%, the tensor-parallel rows
// +10-15%), and the v1.0 row (the post's own 1288 ms) is 7% pessimistic.
// Ampere: BLOOM and MT-NLG run megatron-deepspeed (fp32 gradient accumulation per
// micro-batch; BF16_Optimizer's fp32 all-reduce after the flush; PipelineEngine's four
// blocking transfers and re-gather per micro-batch; BLOOM's ALiBi bias and its script's
// CUDA_LAUNCH_BLOCKING=1, training.framework launch_blocking; the 0.1 dropout their code
// ran) and remain 15-30% optimistic (Megatron-LM ran MT-NLG's model on the same 2,240
// A100s 1.39x faster: README, Ampere's published rows); OPT-175B (metaseq FSDP, with the
// 0.1 dropout its paper states) 9%. Blackwell: the GB200 405B row runs its recipe's
// activation offload (95 layers) on one NIC per GPU (+12%). DeepSeek-V3 on
// 2,048 H800s is about 5% optimistic with DualPipe (33% pessimistic under 1F1B, which left
// the expert all-to-all exposed). The bounds below stop
// regressions while the goal is open.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <algorithm>
#include <map>
#include <vector>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "strategies/validation.hpp"

using namespace clustersim;

// Llama 3 405B (Table 4): the bound of the printed error, set from the measured error
// (see the test's output), to stop regressions.
constexpr double kLlama3Tolerance = 0.30;

TEST_CASE("published training throughput against the transferred and calibrated profiles", "[accuracy][published]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const auto table = read_json_file(root + "/data/published/training-throughput.json");
  std::map<std::string, std::string> generation;
  for (const auto& row : table.at("rows")) generation[row.at("id")] = row.at("generation");
  // Megatron-LM SC'21 Table 1 (its own test: test_megatron_table1.cpp) is a published
  // validation set of its generation too: its rows count here, predicted by the same
  // estimator call and compared by the same residual (validation_cases, dataset megatron-sc21).
  const std::string sc21_generation =
      read_json_file(root + "/data/published/megatron-sc21-table1.json").at("generation").get<std::string>();
  // |error| per row by generation, and signed error by generation and source (the row id
  // up to its first '-': opt, bloom, mtnlg, nemo2407, ...; "sc21" for Table 1), so that no
  // source hides in a generation's average.
  std::map<std::string, std::vector<double>> by_generation;
  std::map<std::string, std::map<std::string, std::vector<double>>> by_source;
  int not_fitting = 0;
  std::printf("\n%-36s %-15s %12s %12s %8s %13s %s\n", "row", "gpu", "real s", "predicted s", "error", "GiB/GPU (cap)",
              "fits");
  for (const ValidationCase& c : validation_cases(root)) {
    const bool sc21 = c.dataset == "megatron-sc21";
    if (c.dataset != "published" && !sc21) continue;
    const Prediction p = make_estimator(c.scenario).estimate(c.scenario.plan);
    REQUIRE(std::isfinite(p.iteration_time));
    // + means the real run is slower: the prediction is optimistic.
    const double error = relative_residual(c, p);
    const std::string id = sc21 ? "sc21-" + std::filesystem::path(c.id).stem().string() : c.id;
    std::printf("%-36s %-15s %12.3f %12.3f %+7.1f%% %6.1f (%5.1f) %s\n", id.c_str(), c.scenario.cluster.gpu.c_str(),
                real_step_time(c, p), p.iteration_time, 100 * error, p.memory_per_gpu / double(1ull << 30),
                p.memory_capacity / double(1ull << 30), p.fits ? "yes" : "NO (the real run fit)");
    const std::string gen = sc21 ? sc21_generation : generation.at(c.id);
    by_generation[gen].push_back(std::fabs(error));
    by_source[gen][sc21 ? "sc21" : c.id.substr(0, c.id.find('-'))].push_back(error);
    not_fitting += !p.fits;
  }
  std::map<std::string, double> mae;
  for (auto& [gen, e] : by_generation) {
    double sum = 0;
    for (double x : e) sum += x;
    mae[gen] = sum / double(e.size());
    std::sort(e.begin(), e.end());
    std::printf("%-10s mean absolute error %5.1f%%, median %5.1f%% over %zu rows (goal 10%%; + is optimistic)\n",
                gen.c_str(), 100 * mae[gen], 100 * e[e.size() / 2], e.size());
    for (const auto& [src, errors] : by_source[gen]) {
      double abs_sum = 0, signed_sum = 0;
      for (double x : errors) abs_sum += std::fabs(x), signed_sum += x;
      std::printf("  %-14s %3zu rows  mean absolute error %5.1f%%  mean signed %+6.1f%%\n", src.c_str(), errors.size(),
                  100 * abs_sum / double(errors.size()), 100 * signed_sum / double(errors.size()));
    }
  }
  CHECK(not_fitting <= 4);
  std::printf("%d rows do not fit in the predicted memory though the real run did (assumed recompute or memory model)\n",
              not_fitting);
  REQUIRE(mae.count("volta"));
  REQUIRE(mae.count("ampere"));
  REQUIRE(mae.count("hopper"));
  REQUIRE(mae.count("blackwell"));
  // The ten SC'21 rows are in their generation's figure.
  CHECK(by_source[sc21_generation]["sc21"].size() == 10);
  // Volta 9.7% (16.7% before megatron-2019's unvectorized elementwise kernels and DDP passes);
  // 10.6% since those kernels' fixed time is timed from CUDA graphs (calibration/README.md,
  // "Eager kernels from CUDA graphs"): the megatron-2019 rows are 11% optimistic.
  CHECK(mae["volta"] <= 0.11);
  // Ampere was 22.9% on the transfer branch; with the duty-cycle H100 GEMM curve (GEMMs
  // timed near boost clock, as in training steps) the A100's transferred GEMMs got faster
  // and the Megatron-DeepSpeed rows moved back up 4-5 points (26.4%; 25.2% with DeepSpeed's
  // gradient all-reduce after the flush; 24.1% with its pipeline engine's blocking
  // transfers and re-gather; 23.9% with BLOOM's ALiBi bias; 22.3% with the dropout BLOOM's
  // and MT-NLG's code ran; 22.1% with the A100 GEMM ceiling) over OPT, BLOOM and MT-NLG
  // alone. With the ten SC'21 Table 1 rows, which the generation's figure left out although
  // they are published A100 runs, 11.5% over 15 rows; MT-NLG's rows stay at +25 to +30%
  // (see the per-source lines). With llm-foundry's seven MPT rows on A100-40GB (FSDP, 8 to
  // 128 GPUs, +6.0 to -1.7%), 9.0% over 22 rows; with Megatron-LM's GPT-3 175B example
  // (+9.6%) and the PyTorch FSDP blog's Llama 2 7B and 70B (+4.5, -12.4%), 9.0% over 25. The
  // mean meets the goal; MT-NLG (+25 to +30%), BLOOM (+17%) and OPT (+11.5%) do not: open,
  // issue 13.
  CHECK(mae["ampere"] <= 0.10);
  // Hopper 8.1 -> 6.8% with Transformer Engine's userbuffers overlap on the rows whose
  // recipes set it (training.framework.tp_comm_overlap: Megatron-Bridge Llama 3 70B -15 / -16
  // -> -7 / -8%, NeMo GPT-3 175B on 512 GPUs -6.1 / -10.6 -> +3.0 / -1.9%, but on 128 GPUs
  // +1.2 -> +8.9%; docs/tp-comm-overlap.md).
  CHECK(mae["hopper"] <= 0.12);
  // Blackwell 8.6% (12.8% before the GB200 405B row ran its recipe's offload and network);
  // 9.2 -> 10.4% with the userbuffers overlap of the two GPT-3 175B rows whose NeMo recipes
  // set it (B200 -1.2 -> +7.0%, GB200 +0.8 -> +10.2%): their TP 4 collectives were priced
  // exposed, which stood in for something the transferred Blackwell profiles miss, or the
  // overlap hides less there than on the H100s where its rule was measured. Over the seven
  // rows the overlap touches the mean absolute error is 7.3 -> 6.6%.
  CHECK(mae["blackwell"] <= 0.11);
}

TEST_CASE("Llama 3 405B on 8,192 and 16,384 H100s (Llama 3 paper, Table 4): predicted beside published", "[accuracy][published]") {
  // Dubey et al. 2024 (arXiv:2407.21783), Table 4, the 8K-sequence rows (CP 1): TP 8, PP 16
  // with one layer fewer on the first and last stage (plan.layers_per_stage lighten-ends),
  // DP 64 / 128, 16M tokens per batch, no activation checkpointing. The published figure
  // is model FLOPs (BF16 MFU); recompute is off, so it is also what the GPUs execute.
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  struct Row {
    const char* id;
    double tflops, mfu;
  };
  std::printf("\n%-28s %10s %10s %8s %8s %8s %s\n", "Llama 3 405B row", "published", "predicted", "error", "pub MFU",
              "pred MFU", "fits");
  for (const Row& r : {Row{"llama3-405b-h100-8192gpu", 430, 0.43}, Row{"llama3-405b-h100-16384gpu", 400, 0.41}}) {
    const Scenario s = load_scenario(root + "/data/scenarios/published/" + r.id + ".json");
    const Prediction p = make_estimator(s).estimate(s.plan);
    REQUIRE(std::isfinite(p.iteration_time));
    // + means the real run is slower: the prediction is optimistic.
    const double error = p.model_tflops_per_gpu / r.tflops - 1;
    std::printf("%-28s %10.0f %10.1f %+7.1f%% %7.0f%% %7.1f%% %s\n", r.id, r.tflops, p.model_tflops_per_gpu, 100 * error,
                100 * r.mfu, 100 * p.mfu, p.fits ? "yes" : "NO");
    std::printf("  stages: first %d layers, middle %d, last %d; bubble %.1f%% of %.2f s; dp exposed %.3f s\n",
                p.stages.front().layers, p.stages[1].layers, p.stages.back().layers,
                100 * p.breakdown.bubble / p.iteration_time, p.iteration_time, p.breakdown.dp_comm_exposed);
    CHECK(p.stages.front().layers == 7);
    CHECK(p.stages.back().layers == 7);
    CHECK(std::fabs(error) <= kLlama3Tolerance);
  }
}

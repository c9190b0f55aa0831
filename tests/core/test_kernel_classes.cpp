// The model's GPU time per kernel class (GEMM, attention, memory-bound, optimizer) for
// one training step on one rank, beside the torch.profiler sums of the profiled runs:
// the multi-GPU runs of calibration/data/h100-sxm5-80gb/profiled-parallel-*.json (rank 0)
// and the one-GPU steps of kernel-profile-*.json. Step totals can agree while their parts
// are off in opposite directions; this table keeps the parts honest. The model's side is
// op_timing's time_op over the graph the estimator builds (the stage of rank 0, every
// micro-batch) and the estimator's optimizer step, without interference or host time.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <string>

#include "scenarios/json_reader.hpp"
#include "strategies/estimator.hpp"
#include "strategies/op_timing.hpp"
#include "strategies/rules.hpp"
#include "strategies/validation.hpp"
#include "tests/measured_parallel.hpp"

using namespace clustersim;
using nlohmann::json;

namespace {

struct Classes {
  double gemm = 0, attention = 0, memory = 0, optimizer = 0;
};

// The model's per-class GPU time of one step on the first pipeline stage's first rank.
Classes model_classes(const Scenario& s) {
  const Estimator est = make_estimator(s);
  const KernelModel km(est.cluster().gpu);
  const PrecisionRules& r = est.precision();
  const std::int64_t mb = s.training.micro_batch;
  const ModelGraph g = build_model_graph(s.model, mb, graph_style(s.training));
  const ShardingContext ctx{s.plan.tp, s.plan.ep, s.plan.sequence_parallel && s.plan.tp > 1, r.compute, r.weight_gemm, 1.0};
  const double m = double(s.training.global_batch / (s.plan.dp * mb));
  std::vector<int> blocks(g.pre);
  const std::int64_t layers = layers_of_stage(static_cast<std::int64_t>(g.layers.size()), s.plan.pp, 1, 0);
  for (std::int64_t l = 0; l < layers; ++l) blocks.push_back(g.layers[static_cast<std::size_t>(l)]);
  if (s.plan.pp == 1) blocks.insert(blocks.end(), g.post.begin(), g.post.end());
  Classes c;
  for (int b : blocks)
    for (const Op& op : g.blocks[static_cast<std::size_t>(b)].ops) {
      const OpTiming t = time_op(op, ctx, km);
      const double both = (t.forward + t.backward) * m;
      if (op.kind == OpKind::matmul) c.gemm += both;
      else if (op.kind == OpKind::attention) c.attention += both;
      else c.memory += both;
    }
  const Prediction p = est.estimate(s.plan);
  // The estimator charges the accumulation to the weight update; the profile counts its
  // adds among the memory-bound kernels.
  c.optimizer = p.stages.front().optimizer - p.stages.front().grad_accumulation;
  c.memory += p.stages.front().grad_accumulation;
  return c;
}

// torch.profiler's record_function ranges were summed with the kernels of the first
// profiling version (the file's provenance note): names without a kernel's signature.
bool is_range(const std::string& name) {
  return name.find('(') == std::string::npos && name.rfind("nvjet", 0) != 0 && name.find("kernel") == std::string::npos &&
         name.find("Memset") == std::string::npos && name.find("Memcpy") == std::string::npos;
}

double rel(double model, double measured) { return measured > 0 ? (model - measured) / measured : 0.0; }

}  // namespace

TEST_CASE("kernel classes: the model's GEMM, attention and memory-bound time against the profiles",
          "[accuracy][measured][parallel]") {
  const std::string root = CLUSTERSIM_SOURCE_DIR;
  const std::string dir = root + "/calibration/data/h100-sxm5-80gb/";
  std::vector<double> gemm_err, mem_err, one_gpu_attention_err, one_gpu_flash2_err;
  std::printf("\n%-34s %17s %17s %17s %17s\n", "run (GPU ms per step, rank 0)", "GEMM meas/model", "attention",
              "memory-bound", "optimizer");
  const auto row = [&](const std::string& name, const Classes& meas, const Classes& model) {
    std::printf("%-34s %7.1f/%6.1f %+4.0f%% %6.1f/%5.1f %+4.0f%% %6.1f/%5.1f %+4.0f%% %6.1f/%5.1f %+4.0f%%\n", name.c_str(),
                meas.gemm * 1e3, model.gemm * 1e3, 100 * rel(model.gemm, meas.gemm), meas.attention * 1e3,
                model.attention * 1e3, 100 * rel(model.attention, meas.attention), meas.memory * 1e3, model.memory * 1e3,
                100 * rel(model.memory, meas.memory), meas.optimizer * 1e3, model.optimizer * 1e3,
                100 * rel(model.optimizer, meas.optimizer));
    gemm_err.push_back(std::fabs(rel(model.gemm, meas.gemm)));
    mem_err.push_back(std::fabs(rel(model.memory, meas.memory)));
  };

  // Several GPUs: rank 0 of each profiled run, whose scenario is the measured run's of
  // the same name (to_scenarios.py's form).
  const json par = read_json_file(dir + "profiled-parallel-2026-11-26.json");
  const json measured = read_json_file(dir + "measured-parallel-2026-11-26.json");
  for (const auto& run : par.at("runs")) {
    const json* same = nullptr;
    for (const auto& m : measured.at("runs"))
      if (m.at("name") == run.at("name")) same = &m;
    REQUIRE(same);
    const json& p = run.at("measured").at("profile_per_rank").at(0);
    const json& k = p.at("kernel_time_per_step_s");
    // DTensor's functional collectives clone their input with cudaMemcpyAsync (the profile's
    // "Memcpy DtoD"): the model's funcol copies are memory-bound ops, so the profile's copies
    // and memsets count with its memory-bound kernels (0.1-0.6 ms a step outside the DTensor runs).
    Classes meas{k.at("gemm"), k.at("attention"), k.at("memory_bound").get<double>() + k.at("memcpy").get<double>(),
                 k.at("optimizer")};
    for (const auto& t : p.at("top_kernels")) {
      if (!is_range(t.at("name"))) continue;
      const std::string cls = t.at("class");
      const double v = t.at("time_per_step_s");
      if (cls == "memory_bound") meas.memory -= v;
      if (cls == "optimizer") meas.optimizer -= v;
    }
    row(run.at("name"), meas, model_classes(measured_run_scenario(*same)));
  }

  // One GPU: every kernel of two profiled steps, classified by name.
  const json one = read_json_file(dir + "kernel-profile-2026-11-26.json");
  for (const auto& cfg : one.at("configs")) {
    const std::string name = cfg.at("name");
    Classes meas;
    bool cudnn_attention = false;
    for (const auto& kern : cfg.at("kernels")) {
      const std::string n = kern.at("name");
      const double v = kern.at("time_per_step_s");
      if (n.rfind("nvjet", 0) == 0 || n.find("gemm") != std::string::npos) meas.gemm += v;
      else if (n.find("sdpa") != std::string::npos || n.find("flash") != std::string::npos ||
               n.find("cudnn::fusion") != std::string::npos) {
        meas.attention += v;
        cudnn_attention = cudnn_attention || n.find("cudnn") != std::string::npos;
      } else if (n.find("FusedOptimizer") != std::string::npos) meas.optimizer += v;
      else if (n.find("Memset") == std::string::npos) meas.memory += v;
    }
    // profile_step.py left SDPA its default: on torch 2.11 and an H100, cuDNN's kernels
    // (cudnn_generated_fort_native_sdpa_sm90_*), where the measured run of the same model
    // forced flash. The model times the kernels the profile ran.
    Scenario sc = load_scenario(root + "/data/scenarios/measured-h100/" + name + ".json");
    sc.training.attention_kernel = cudnn_attention ? AttentionKernelChoice::cudnn : AttentionKernelChoice::flash2;
    const Classes model = model_classes(sc);
    row(name + " (1 GPU)", meas, model);
    one_gpu_attention_err.push_back(std::fabs(model.attention - meas.attention) / meas.attention);
    // Beside it, what FlashAttention-2's curve alone would give for these kernels.
    sc.training.attention_kernel = AttentionKernelChoice::flash2;
    one_gpu_flash2_err.push_back(model_classes(sc).attention / meas.attention - 1);
  }
  std::printf("one GPU, attention (the kernels profiled): |error| %.1f%% and %.1f%% (FlashAttention-2's curve: %+.0f%% "
              "and %+.0f%%)\n",
              100 * one_gpu_attention_err.front(), 100 * one_gpu_attention_err.back(), 100 * one_gpu_flash2_err.front(),
              100 * one_gpu_flash2_err.back());
  REQUIRE(one_gpu_attention_err.size() == 2);
  CHECK(*std::max_element(one_gpu_attention_err.begin(), one_gpu_attention_err.end()) <= 0.06);
  const double g = test::median(gemm_err), mm = test::median(mem_err);
  std::printf("median |error|: GEMM %.1f%%, memory-bound %.1f%% over %zu profiled runs\n", 100 * g, 100 * mm,
              gemm_err.size());
  CHECK(gemm_err.size() >= 10);
  // Today: GEMM 6.4%, memory-bound 6.5%. The model's side is the estimator's own graph
  // (graph_style of the whole training spec: DTensor's separate projections and functional-
  // collective copies for pytorch-tp) and the profile's memory-bound kernels include its
  // device copies; until 2026-11-28 the check built every run's graph from the precision
  // alone, which put DTensor's runs at -18 and -24 % (memory-bound) and their GEMMs at +6 and
  // -3 %, and the median at 13.8 % (GEMM 4.7 %). The GEMMs of DTensor's separate q, k and v
  // projections (n = 640 on each of 4 GPUs) are priced 30 % over the profile, where the fused
  // projection of the same model is within 9 %: dtp4's GEMMs +15 %. What is left in
  // memory-bound time: DDP's and FSDP's runs (-14 to -27 %) run their kernels beside NCCL's for
  // 21-175 ms a step (the interference, priced at the step level, not in these sums);
  // dp2tp2's GEMM, attention and memory-bound kernels are 17-19 % slower than modelled for the
  // same reason (87 ms of overlap). History: calibration/README.md, "Eager kernels from CUDA graphs" and
  // "Autograd's gradient accumulation over micro-batches".
  CHECK(g <= 0.07);
  CHECK(mm <= 0.08);
}

// The plan-level rules (strategies/rules.hpp), each against its closed form. The
// estimator, the replay and the search all call these functions, so these are the tests
// of the rules themselves; each prints the expectation beside the computed value.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>

#include "costmodel/hardware.hpp"
#include "model_specs.hpp"
#include "strategies/op_timing.hpp"
#include "strategies/rules.hpp"

using namespace clustersim;

namespace {
void show(const char* what, double expected, double computed) {
  std::printf("%-64s expected %.9g, computed %.9g\n", what, expected, computed);
}
// Megatron mixed bf16: bf16 weights 2, fp32 grads 4, fp32 master 4 + Adam 8.
const PrecisionRules kMixed = precision_rules(Precision::mixed_bf16, OptimizerKind::adam);
// PyTorch autocast: fp32 weights 4, grads 4, Adam 8, a bf16 copy 2; no master.
const PrecisionRules kAmp = precision_rules(Precision::amp_bf16, OptimizerKind::adam);
}  // namespace

TEST_CASE("weight memory: ZeRO-1 shards master and states, ZeRO-2 gradients, ZeRO-3 weights", "[rules]") {
  const double P = 1e9;
  const std::int64_t d = 8;
  const double expected[4] = {P * (2 + 4 + 12), P * (2 + 4 + 12.0 / d), P * (2 + 4.0 / d + 12.0 / d),
                              P * (2.0 / d + 4.0 / d + 12.0 / d)};
  for (int z = 0; z <= 3; ++z) {
    const WeightMemory m = weight_memory(P, 0, kMixed, z, d);
    show(("mixed-bf16, 1e9 parameters, dp 8, ZeRO-" + std::to_string(z)).c_str(), expected[z], m.total());
    CHECK(m.total() == Approx(expected[z]).epsilon(1e-12));
  }
  // dp 1 shards nothing; autocast adds its 2-byte copy at every level.
  CHECK(weight_memory(P, 0, kMixed, 3, 1).total() == Approx(P * 18).epsilon(1e-12));
  const WeightMemory amp = weight_memory(P, 0, kAmp, 0, 1);
  show("amp-bf16, 1e9 parameters: 4 + 4 + 8 + 2 bytes", P * 18, amp.total());
  CHECK(amp.autocast_copy == Approx(2 * P));
  CHECK(amp.total() == Approx(18 * P));
}

TEST_CASE("gradient sync: all-reduce, reduce-scatter + all-gather, or per-pass gathers", "[rules]") {
  const double P = 1e8;
  const GradientSync z0 = gradient_sync(P, 0, kMixed, 0, 4);
  CHECK(z0.reduce == Collective::all_reduce);
  show("ZeRO-0 all-reduce bytes: 4 P (fp32 grads)", 4 * P, z0.reduce_bytes);
  CHECK(z0.reduce_bytes == Approx(4 * P));
  CHECK(z0.gather_bytes == 0);
  const GradientSync z2 = gradient_sync(P, 0, kMixed, 2, 4);
  CHECK(z2.reduce == Collective::reduce_scatter);
  show("ZeRO-2 parameter all-gather after the step: 2 P (bf16)", 2 * P, z2.gather_bytes);
  CHECK(z2.gather_bytes == Approx(2 * P));
  CHECK(z2.gather_per_pass == 0);
  const GradientSync z3 = gradient_sync(P, 0, kMixed, 3, 4);
  CHECK(z3.gather_bytes == 0);
  CHECK(z3.gather_per_pass == Approx(2 * P));
  CHECK_FALSE(gradient_sync(P, 0, kMixed, 3, 1).active());  // one replica: nothing to sync
  // megatron-deepspeed under mixed-bf16 (DeepSpeed's BF16_Optimizer, ZeRO-1): the fp32
  // gradient buffer is all-reduced in full, then the bf16 weights all-gathered.
  TrainingSpec ds;
  ds.precision = Precision::mixed_bf16;
  ds.framework.name = Framework::megatron_deepspeed;
  ds.framework.given = true;
  const GradientSync bf16_optimizer = gradient_sync(P, 0, precision_rules(ds), 1, 4);
  CHECK(bf16_optimizer.reduce == Collective::all_reduce);
  show("BF16_Optimizer ZeRO-1: all-reduce of 4 P (fp32), then all-gather of 2 P (bf16)", 6 * P,
       bf16_optimizer.reduce_bytes + bf16_optimizer.gather_bytes);
  CHECK(bf16_optimizer.reduce_bytes + bf16_optimizer.gather_bytes == Approx(6 * P));
  ds.precision = Precision::mixed_fp16;  // DeepSpeed's ZeRO stage-1 optimizer: unchanged
  CHECK(gradient_sync(P, 0, precision_rules(ds), 1, 4).reduce == Collective::reduce_scatter);
  CHECK(updated_params(P, 2, 4) == Approx(P / 4));
  CHECK(updated_params(P, 0, 4) == Approx(P));
}

TEST_CASE("overlap interference: compute and a collective slow each other only while both run", "[rules]") {
  const OverlapInterference f{1.4, 1.5, "test factors"};
  CHECK(overlap_slowdown(false, false, f).compute == 1.0);
  CHECK(overlap_slowdown(false, false, f).comm == 1.0);
  CHECK(overlap_slowdown(true, false, f).compute == 1.4);  // compute beside a collective in flight
  CHECK(overlap_slowdown(true, false, f).comm == 1.0);     // a collective with no compute beside it
  CHECK(overlap_slowdown(false, true, f).comm == 1.5);
  CHECK(overlap_slowdown(true, true, f).compute == 1.4);
  // Collective 1 s beside 3 s of compute: it ends at 1.5 s, when the compute has done
  // 1.5 / 1.4 s of its work; the rest runs alone: 3.4286 s, 0.4286 s beyond the compute.
  show("1 s collective beside 3 s compute, 1.4 / 1.5: 1.5 (1 - 1/1.4) s", 1.5 * (1 - 1 / 1.4), overlap_exposed(3, 1, f));
  CHECK(overlap_exposed(3, 1, f) == Approx(1.5 * (1 - 1 / 1.4)));
  // Beside 0.5 s of compute: the compute ends at 0.7 s, the collective has done 0.7 / 1.5
  // of its 1 s and finishes alone at 0.7 + 1 - 0.7 / 1.5.
  show("1 s collective beside 0.5 s compute: 0.7 + 1 - 0.7/1.5 - 0.5 s", 0.7 + 1 - 0.7 / 1.5 - 0.5, overlap_exposed(0.5, 1, f));
  CHECK(overlap_exposed(0.5, 1, f) == Approx(0.7 + 1 - 0.7 / 1.5 - 0.5));
  // Factors of 1: free overlap.
  CHECK(overlap_exposed(3, 1, OverlapInterference{}) == 0.0);
  CHECK(overlap_exposed(0.5, 1, OverlapInterference{}) == Approx(0.5));
}

TEST_CASE("ZeRO-3 prefetch exposes only what exceeds the neighbouring compute", "[rules]") {
  show("gather 3 ms, forward 2 ms, backward 4 ms: 1 ms", 1e-3, zero3_gather_exposed(3e-3, 2e-3, 4e-3));
  CHECK(zero3_gather_exposed(3e-3, 2e-3, 4e-3) == Approx(1e-3));
  CHECK(zero3_gather_exposed(5e-3, 2e-3, 4e-3) == Approx(4e-3));
}

TEST_CASE("bucketed gradient reduction hides behind backward except the last bucket", "[rules]") {
  FrameworkSpec megatron;
  const double bucket = gradient_bucket_elements(megatron, kMixed);
  CHECK(bucket == 40e6);
  // 400 M parameters in 40 M-element buckets: the last is 1/10 of the reduction.
  const double exposed = overlapped_sync_exposed(1.0, 0.0, 5.0, 2.0, 400e6, bucket);
  show("reduce 1 s behind 5 s of backward, 10 buckets: 0.1 s", 0.1, exposed);
  CHECK(exposed == Approx(0.1));
  // A reduction longer than backward shows the difference.
  CHECK(overlapped_sync_exposed(7.0, 0.0, 5.0, 2.0, 400e6, bucket) == Approx(2.0));
  // Fewer parameters than one bucket: nothing hides.
  CHECK(overlapped_sync_exposed(1.0, 0.5, 5.0, 2.0, 1e6, bucket) == Approx(1.5));
  // DDP: 25 MiB of fp32 gradients = 6.55 M elements a bucket.
  FrameworkSpec ddp;
  ddp.name = Framework::pytorch_ddp;
  show("DDP bucket of 25 MiB fp32 gradients, elements", 25.0 * (1 << 20) / 4, gradient_bucket_elements(ddp, kAmp));
  CHECK(gradient_bucket_elements(ddp, kAmp) == Approx(25.0 * (1 << 20) / 4));
}

TEST_CASE("DDP buckets keep gradients across steps, and copy them without gradient_as_bucket_view", "[rules]") {
  FrameworkSpec ddp;
  ddp.name = Framework::pytorch_ddp;
  CHECK_FALSE(ddp_buckets(ddp, 1).persistent);  // one GPU: no DDP
  CHECK(ddp_buckets(ddp, 2).persistent);
  CHECK(ddp_buckets(ddp, 2).copy);
  ddp.gradient_as_bucket_view = true;
  CHECK_FALSE(ddp_buckets(ddp, 2).copy);
  // amp-bf16, one micro-batch: with DDP the gradients stay beside the activations.
  StageMemoryInputs in;
  in.params = 1e9;
  in.kept_per_micro_batch = 10e9;
  in.ddp = ddp_buckets(ddp, 2);
  const double expected = 1e9 * (4 + 4 + 8 + 2) + 10e9;
  show("amp-bf16, DDP buckets as views: weights, grads, states, copy and activations", expected,
       stage_memory(in, kAmp).total());
  CHECK(stage_memory(in, kAmp).total() == Approx(expected));
}

TEST_CASE("FSDP's mixed precision gathers in param_dtype and reduces in reduce_dtype", "[rules]") {
  TrainingSpec t;
  t.precision = Precision::amp_bf16;
  t.framework.name = Framework::pytorch_fsdp;
  t.framework.param_dtype = ElementType::bf16;
  t.framework.reduce_dtype = ElementType::fp32;
  const PrecisionRules r = precision_rules(t);
  CHECK(r.gather_bytes == 2);
  CHECK(r.autocast_copy_bytes == 0);  // parameters arrive in bf16: autocast casts nothing
  CHECK(r.grad_comm_bytes == 4);
  const GradientSync s = gradient_sync(1e8, 0, r, 3, 4);
  show("FSDP bf16 gather bytes per pass for 1e8 parameters", 2e8, s.gather_per_pass);
  CHECK(s.gather_per_pass == Approx(2e8));
}

TEST_CASE("host dispatch: kernels per op, per-kernel cost by framework, hooks per layer", "[rules]") {
  Op mm;
  mm.kind = OpKind::matmul;
  CHECK(op_kernels(mm).forward == 1);
  CHECK(op_kernels(mm).backward == 2);
  Op norm;
  norm.kind = OpKind::memory;
  norm.kernels = 2;
  norm.fwd_bytes = norm.bwd_bytes = 1;
  CHECK(op_kernels(norm).forward == 2);
  CHECK(op_kernels(norm).backward == 4);
  HostDispatch h;
  h.eager_per_kernel = 24e-6;
  h.dtensor_module_forward = 400e-6;
  h.dtensor_module_backward = 700e-6;
  h.ddp_per_layer = 40e-6;
  h.fsdp_per_unit = 1.7e-3;
  h.fsdp_mixed_per_unit = 3.1e-3;
  h.fsdp2_per_unit = 3.0e-3;
  FrameworkSpec f;
  CHECK(host_per_kernel(f, h) == 24e-6);
  f.name = Framework::pytorch_tp;
  CHECK(host_per_kernel(f, h) == 24e-6);  // DTensor's cost follows its modules, not its kernels
  Op colwise;
  colwise.kind = OpKind::tp_enter;
  colwise.parallel_style = true;
  CHECK(op_host_overhead(colwise, f, h, 2).forward == 400e-6);
  CHECK(op_host_overhead(colwise, f, h, 2).backward == 700e-6);
  CHECK(op_host_overhead(colwise, f, h, 1).forward == 0);  // one rank: no DTensor module
  // A biased module adds the measured bias cost, split between the passes as the module's
  // own (400 : 700).
  h.dtensor_bias = 220e-6;
  Op biased = colwise;
  biased.biased = true;
  const double fwd_share = 400e-6 / (400e-6 + 700e-6);
  INFO("biased module: forward expected " << 400e-6 + 220e-6 * fwd_share << " s, computed "
                                          << op_host_overhead(biased, f, h, 2).forward << " s; backward expected "
                                          << 700e-6 + 220e-6 * (1 - fwd_share) << " s, computed "
                                          << op_host_overhead(biased, f, h, 2).backward << " s");
  CHECK(op_host_overhead(biased, f, h, 2).forward == Approx(400e-6 + 220e-6 * fwd_share).epsilon(1e-12));
  CHECK(op_host_overhead(biased, f, h, 2).backward == Approx(700e-6 + 220e-6 * (1 - fwd_share)).epsilon(1e-12));
  CHECK(op_host_overhead(biased, f, h, 2).forward + op_host_overhead(biased, f, h, 2).backward ==
        Approx(400e-6 + 700e-6 + 220e-6).epsilon(1e-12));
  CHECK(op_host_overhead(colwise, f, h, 2).forward == 400e-6);  // no bias, no bias cost
  // The module's weight and bias, DTensor parameters, cost the fused AdamW step their
  // measured dispatch once per iteration; the bias's share leaves its per-micro-batch cost
  // (measured on whole one-micro-batch steps), so one micro-batch and its step cost the same.
  h.dtensor_optimizer_param = 19e-6;
  CHECK(op_host_overhead(colwise, f, h, 2).optimizer == 19e-6);
  CHECK(op_host_overhead(colwise, f, h, 2).forward == 400e-6);
  const OpHost with_step = op_host_overhead(biased, f, h, 2);
  INFO("biased module with its step: forward expected " << 400e-6 + (220e-6 - 19e-6) * fwd_share << " s, computed "
                                                        << with_step.forward << " s; optimizer expected " << 2 * 19e-6
                                                        << " s, computed " << with_step.optimizer << " s");
  CHECK(with_step.optimizer == Approx(2 * 19e-6).epsilon(1e-12));
  CHECK(with_step.forward == Approx(400e-6 + (220e-6 - 19e-6) * fwd_share).epsilon(1e-12));
  CHECK(with_step.forward + with_step.backward + with_step.optimizer ==
        Approx(400e-6 + 700e-6 + 220e-6 + 19e-6).epsilon(1e-12));
  CHECK(op_host_overhead(colwise, f, h, 1).optimizer == 0);
  // The cross entropy under loss_parallel: its measured handlers, forward and backward.
  h.dtensor_loss_forward = 1.7e-3;
  h.dtensor_loss_backward = 1.0e-3;
  Op loss;
  loss.kind = OpKind::memory;
  loss.loss_parallel = true;
  CHECK(op_host_overhead(loss, f, h, 2).forward == 1.7e-3);
  CHECK(op_host_overhead(loss, f, h, 2).backward == 1.0e-3);
  CHECK(op_host_overhead(loss, f, h, 2).optimizer == 0);
  CHECK(op_host_overhead(loss, f, h, 1).forward == 0);
  Op megatron = colwise;
  megatron.parallel_style = false;
  CHECK(op_host_overhead(megatron, f, h, 2).backward == 0);
  CHECK(op_host_overhead(megatron, f, h, 2).optimizer == 0);
  FrameworkSpec hand;
  hand.name = Framework::pytorch;
  CHECK(op_host_overhead(colwise, hand, h, 2).forward == 0);
  f.name = Framework::pytorch_ddp;
  CHECK(host_hooks_per_layer(f, h, 1) == 0);
  CHECK(host_hooks_per_layer(f, h, 2) == 40e-6);
  f.name = Framework::pytorch_fsdp;
  CHECK(host_hooks_per_layer(f, h, 2) == 1.7e-3);
  f.param_dtype = ElementType::bf16;
  CHECK(host_hooks_per_layer(f, h, 2) == 3.1e-3);
  f.fsdp_version = 2;
  CHECK(host_hooks_per_layer(f, h, 2) == 3.0e-3);
}

TEST_CASE("autograd gradient accumulation: (m - 1) adds of 3 gradient elements per parameter, one kernel a weight", "[rules]") {
  const GpuProfile gpu = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(gpu);
  const double P = 50e6;  // one weight of a 6.7B model's MLP under tp 2
  TrainingSpec t;
  t.precision = Precision::amp_bf16;
  for (Framework f : {Framework::pytorch, Framework::pytorch_ddp, Framework::pytorch_tp}) {
    t.framework.name = f;
    const PrecisionRules r = precision_rules(t);
    // fp32 .grad += fp32 gradient: read 4 + 4, write 4, in one elementwise kernel per micro-batch after the first.
    CHECK(r.autograd_accumulation_bytes == 12);
    const double expected = 7 * km.memory(P * 12, 1, MemoryKind::elementwise);
    show("50e6 fp32 parameters, 8 micro-batches: 7 adds of 12 bytes each", expected, autograd_grad_accumulation(km, P, 8, r));
    CHECK(autograd_grad_accumulation(km, P, 8, r) == Approx(expected).epsilon(1e-12));
    // The 7 adds move 4.2 GB: no faster than HBM's peak.
    CHECK(autograd_grad_accumulation(km, P, 8, r) > 7 * P * 12 / gpu.memory_bandwidth);
    CHECK(autograd_grad_accumulation(km, P, 1, r) == 0);  // one micro-batch: autograd hands the gradient over
  }
  // Megatron sums into its main_grad buffers (in the graph), FSDP into its shards: none here.
  for (Framework f : {Framework::megatron, Framework::pytorch_fsdp}) {
    t.framework.name = f;
    CHECK(autograd_grad_accumulation(km, P, 8, precision_rules(t)) == 0);
  }
  // Under fp32 the gradient is fp32 too.
  t.framework.name = Framework::pytorch;
  t.precision = Precision::fp32;
  CHECK(precision_rules(t).autograd_accumulation_bytes == 12);
}

TEST_CASE("optimizer step: (step + gradient) bytes per parameter in 8 kernels, affine in parameters", "[rules]") {
  const GpuProfile gpu = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(gpu);
  const double P = 1e9;
  // mixed-bf16 Adam reads grad 4, master 4, states 8; writes master 4, states 8, bf16 copy 2 = 30; norm pass 4 more.
  const double bytes = P * (30 + 4);
  const double expected = km.memory(bytes, 8, MemoryKind::optimizer);
  show("1e9 parameters, 34 bytes each, 8 kernels", expected, optimizer_step(km, P, kMixed));
  CHECK(optimizer_step(km, P, kMixed) == Approx(expected).epsilon(1e-12));
  // The parts a per-op consumer sums: marginal per parameter group, fixed once.
  const double parts = optimizer_step_marginal(km, 0.25 * P, kMixed) + optimizer_step_marginal(km, 0.75 * P, kMixed) +
                       optimizer_step_fixed(km);
  show("marginal(P/4) + marginal(3P/4) + fixed", expected, parts);
  CHECK(parts == Approx(expected).epsilon(1e-9));
}

TEST_CASE("fp8 weights: Transformer Engine's copies and cast of the weights it casts only", "[rules][fp8]") {
  const GpuProfile gpu = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(gpu);
  const PrecisionRules fp8 = precision_rules(Precision::mixed_fp8, OptimizerKind::adam);
  // Llama 3 8B at tp 1, as the graph builds it: TE casts the weights of the layers' linears
  // (QKV, attention output, gate/up, down); the embedding, the norms and Megatron's output
  // layer stay bf16.
  const ModelGraph g = build_model_graph(test::llama3_8b(), 1, graph_style(Precision::mixed_fp8));
  double all = 0, cast = 0;
  for (const auto* part : {&g.pre, &g.layers, &g.post})  // the 32 layers share one block
    for (int b : *part)
      for (const Op& op : g.blocks[std::size_t(b)].ops) {
        all += op.params;
        cast += fp8_cast_params(op, fp8.compute, fp8.weight_gemm);
      }
  const double h = 4096, kv = 1024, f = 14336;
  const double linears = 32 * (h * (h + 2 * kv) + h * h + 2 * h * f + f * h);
  show("Llama 3 8B, tp 1: parameters TE casts (32 x (QKV + proj + fc1 + fc2))", linears, cast);
  CHECK(cast == Approx(linears).epsilon(1e-12));
  CHECK(all - cast > 2 * 128256 * h);  // the embedding and the output layer at least
  // Their fp8 weight and transpose, 1 + 1 bytes, beside the bf16 weight: the copy
  // weight_memory holds under ZeRO 0-2 (13.0 GiB; the old rule's 2 B of every parameter
  // counted 2.1 GB more, the embedding's and the output layer's).
  const Fp8WeightBytes b = fp8_weights(fp8);
  show("Llama 3 8B, tp 1, ZeRO-1: fp8 copy bytes = cast params x 2", linears * 2,
       weight_memory(all, cast, fp8, 1, 8).autocast_copy);
  CHECK(weight_memory(all, cast, fp8, 1, 8).autocast_copy == Approx(linears * 2).epsilon(1e-12));
  CHECK(weight_memory(all, cast, fp8, 1, 8).weights == Approx(all * 2).epsilon(1e-12));
  CHECK(weight_memory(all, cast, fp8, 3, 8).autocast_copy == 0);  // ZeRO-3: follows the gather
  // The cast reads the bf16 weight (2) and writes both copies (1 + 1), once a step.
  const double expected = km.memory_stream(4 * linears, MemoryKind::elementwise);
  show("Llama 3 8B, tp 1: cast of the held cast weights, 4 bytes each, streamed", expected,
       fp8_weight_cast(km, cast, fp8));
  CHECK(b.stored == 2);
  CHECK(b.copy == 2);
  CHECK(fp8_weight_cast(km, cast, fp8) == Approx(expected).epsilon(1e-12));
  CHECK(fp8_weight_cast(km, 0.25 * cast, fp8) + fp8_weight_cast(km, 0.75 * cast, fp8) == Approx(expected).epsilon(1e-12));
  CHECK(fp8_weight_cast(km, cast, kMixed) == 0);
  CHECK(weight_memory(all, cast, kMixed, 1, 8).autocast_copy == 0);  // bf16 GEMMs: no copy
  CHECK(fp8.weight_gemm == DType::fp8);
  CHECK(fp8.master_bytes == 4);  // fp32 master weights behind bf16 ones, as mixed-bf16

  // fp8_param_gather: the cast weights are fp8 parameters (1 byte), with no bf16 copy; TE
  // adds their transpose (1); the step's cast reads 1 and writes 1.
  PrecisionRules gathered = fp8;
  gathered.fp8_param_gather = true;
  const WeightMemory w = weight_memory(all, cast, gathered, 1, 8);
  show("Llama 3 8B, fp8_param_gather, ZeRO-1: weights + copy = other x 2 + cast x (1 + 1)",
       (all - cast) * 2 + cast * 2, w.weights + w.autocast_copy);
  CHECK(w.weights == Approx((all - cast) * 2 + cast * 1).epsilon(1e-12));
  CHECK(w.autocast_copy == Approx(cast * 1).epsilon(1e-12));
  CHECK(fp8_weight_cast(km, cast, gathered) == Approx(km.memory_stream(2 * cast, MemoryKind::elementwise)).epsilon(1e-12));
  // The distributed optimizer all-gathers them as fp8 (1 byte), the rest in bf16 (2); the
  // gradients are reduced as before.
  show("Llama 3 8B, fp8_param_gather, ZeRO-1 dp 8: all-gather bytes = other x 2 + cast x 1",
       (all - cast) * 2 + cast, gradient_sync(all, cast, gathered, 1, 8).gather_bytes);
  CHECK(gradient_sync(all, cast, gathered, 1, 8).gather_bytes == Approx((all - cast) * 2 + cast).epsilon(1e-12));
  CHECK(gradient_sync(all, cast, gathered, 3, 8).gather_per_pass == Approx((all - cast) * 2 + cast).epsilon(1e-12));
  CHECK(gradient_sync(all, cast, gathered, 1, 8).reduce_bytes == gradient_sync(all, cast, fp8, 1, 8).reduce_bytes);
  CHECK(gradient_sync(all, cast, fp8, 1, 8).gather_bytes == Approx(all * 2).epsilon(1e-12));  // without: bf16
  CHECK(gathered_block_bytes(cast, cast, gathered, 3) == Approx(cast * (1 + 1)).epsilon(1e-12));
}

TEST_CASE("kept activations per recompute mode (Korthikanti et al. 2022)", "[rules]") {
  const double all = 34, core = 5, boundary = 2, transient = 3;
  const KeptActivations none = kept_activations(Recompute::none, all, core, boundary, transient);
  const KeptActivations sel = kept_activations(Recompute::selective, all, core, boundary, transient);
  const KeptActivations full = kept_activations(Recompute::full, all, core, boundary, transient);
  show("none: keeps everything", all, none.kept);
  show("selective: keeps all but the core attention", all - core, sel.kept);
  show("full: keeps the block input", boundary, full.kept);
  CHECK(none.kept == all);
  CHECK(none.working == 2 * boundary + transient);
  CHECK(sel.kept == all - core);
  CHECK(sel.working == core + 2 * boundary + transient);
  CHECK(full.kept == boundary);
  CHECK(full.working == all + 2 * boundary + transient);
  CHECK(block_recompute(Recompute::full, false) == Recompute::none);  // embedding, head: never
  Op attention;
  attention.core_attention = true;
  Op mlp;
  CHECK(op_recomputed(attention, Recompute::selective, true));
  CHECK_FALSE(op_recomputed(mlp, Recompute::selective, true));
  CHECK(op_recomputed(mlp, Recompute::full, true));
  CHECK_FALSE(op_recomputed(mlp, Recompute::full, false));
}

TEST_CASE("stage memory: weights, in-flight activations, working set, ZeRO-3 buffers", "[rules]") {
  StageMemoryInputs in;
  in.params = 1e9;
  in.largest_block_params = 1e8;
  in.kept_per_micro_batch = 3e9;
  in.working = 1e9;
  in.in_flight = 4;
  in.zero = 3;
  in.dp = 8;
  in.micro_batches = 16;
  const MemoryBreakdown m = stage_memory(in, kMixed);
  const double expected = 1e9 * 18 / 8 + 4 * 3e9 + 1e9 + 2 * 1e8 * 2;
  show("1e9 params ZeRO-3 dp 8, 4 x 3 GB kept, 1 GB working, 2 gathered blocks", expected, m.total());
  CHECK(m.total() == Approx(expected).epsilon(1e-12));
  // Activation offload's copy buffer is resident only while the micro-batch's kept layers
  // are not: it adds max(0, buffer - kept per micro-batch).
  in.offload_buffer = 2e9;
  show("offload buffer 2 GB beside 3 GB kept per micro-batch: nothing more", expected, stage_memory(in, kMixed).total());
  CHECK(stage_memory(in, kMixed).total() == Approx(expected).epsilon(1e-12));
  in.offload_buffer = 5e9;
  show("offload buffer 5 GB beside 3 GB kept per micro-batch: 2 GB more", expected + 2e9, stage_memory(in, kMixed).total());
  CHECK(stage_memory(in, kMixed).total() == Approx(expected + 2e9).epsilon(1e-12));
  in.offload_buffer = 0;
  // Eager PyTorch with one micro-batch: the larger of the activation peak and the step.
  in.zero = 0;
  in.micro_batches = 1;
  const MemoryBreakdown e = stage_memory(in, kAmp);
  const double activation_peak = 1e9 * (4 + 8 + 2) + 4 * 3e9 + 1e9;  // no gradients yet
  const double step_peak = 1e9 * (4 + 4 + 8 + 2);                    // no activations
  show("amp-bf16, one micro-batch: max(activation peak, step peak)", std::max(activation_peak, step_peak), e.total());
  CHECK(e.total() == Approx(std::max(activation_peak, step_peak)));
}

TEST_CASE("stage memory: under ZeRO-3 the fp8 weight copy lives with the gathered blocks only", "[rules]") {
  // mixed-fp8 (Transformer Engine): 2 bytes of fp8 weight and transpose per parameter.
  // Without ZeRO-3 they are cached for every resident parameter; under ZeRO-3 / FSDP they
  // are cast from the gathered block and freed with it: two blocks' worth.
  const PrecisionRules fp8 = precision_rules(Precision::mixed_fp8, OptimizerKind::adam);
  StageMemoryInputs in;
  in.params = 1e9;
  in.largest_block_params = 1e8;
  in.largest_block_fp8_params = 1e8;
  in.fp8_params = 0.9e9;  // all but the embedding and output layer, say
  in.zero = 1;
  in.dp = 8;
  in.micro_batches = 16;
  const double zero1 = 1e9 * (2 + 4 + 12.0 / 8) + 0.9e9 * 2;
  show("mixed-fp8, ZeRO-1 dp 8: weights, grads, states / 8, fp8 copy of the cast parameters", zero1, stage_memory(in, fp8).total());
  CHECK(stage_memory(in, fp8).total() == Approx(zero1).epsilon(1e-12));
  in.zero = 3;
  const double zero3 = 1e9 * 18 / 8 + 2 * 1e8 * (2 + 2);
  show("mixed-fp8, ZeRO-3 dp 8: all sharded, two gathered blocks with their fp8 copies", zero3, stage_memory(in, fp8).total());
  CHECK(stage_memory(in, fp8).total() == Approx(zero3).epsilon(1e-12));
  CHECK(fp8_copy_follows_gather(fp8, 3));
  CHECK_FALSE(fp8_copy_follows_gather(fp8, 2));
  CHECK_FALSE(fp8_copy_follows_gather(kAmp, 3));  // autocast's copy: unchanged
}

TEST_CASE("gathered blocks: only the weights Transformer Engine runs in fp8 bring an fp8 copy", "[rules][fp8]") {
  // Megatron's output layer and the embedding run in bf16 (graph.hpp
  // compute_precision_gemm): a gathered output layer is its bf16 weights alone.
  const PrecisionRules fp8 = precision_rules(Precision::mixed_fp8, OptimizerKind::adam);
  const double head = 128256.0 * 8192, layer = 0.856e9;  // Llama 3 70B, TP 1
  show("Llama 3 70B output layer gathered: 2 B per parameter", head * 2, gathered_block_bytes(head, 0, fp8, 3));
  show("Llama 3 70B layer gathered: 2 B + its fp8 copy 2 B", layer * 4, gathered_block_bytes(layer, layer, fp8, 3));
  CHECK(gathered_block_bytes(head, 0, fp8, 3) == Approx(head * 2).epsilon(1e-12));
  CHECK(gathered_block_bytes(layer, layer, fp8, 3) == Approx(layer * 4).epsilon(1e-12));
  CHECK(gathered_block_bytes(layer, layer, fp8, 2) == 0);                         // nothing gathered below ZeRO-3
  CHECK(gathered_block_bytes(layer, layer, kMixed, 3) == Approx(layer * 2).epsilon(1e-12));  // bf16: no copy
  // stage_memory counts two of the largest (here the layer: 3.42 GB against 2.10 GB).
  StageMemoryInputs in;
  in.params = 1e9;
  in.zero = 3;
  in.dp = 64;
  in.micro_batches = 2;
  in.largest_block_params = layer;
  in.largest_block_fp8_params = layer;
  const double expected = 1e9 * 18 / 64 + 2 * layer * 4;
  show("ZeRO-3 dp 64, two gathered Llama 3 70B layers with fp8 copies", expected, stage_memory(in, fp8).total());
  CHECK(stage_memory(in, fp8).total() == Approx(expected).epsilon(1e-12));
}

TEST_CASE("stage memory: ZeRO shards expert weights over their dp / ep replicas only", "[rules]") {
  // 1e9 parameters on the GPU, 6e8 of them experts; dp 8 with ep 8: the experts have one
  // replica each, so ZeRO-2 shards only the 4e8 dense parameters' gradients and states.
  StageMemoryInputs in;
  in.params = 1e9;
  in.expert_params = 6e8;
  in.expert_dp = 1;
  in.zero = 2;
  in.dp = 8;
  in.micro_batches = 16;
  const MemoryBreakdown m = stage_memory(in, kMixed);
  // mixed-bf16 + Adam: 2 bytes of weight, 4 of gradient, 12 of master and states.
  const double expected = 4e8 * (2 + 16.0 / 8) + 6e8 * (2 + 16);
  show("ZeRO-2 dp 8, 6e8 of 1e9 parameters experts with ep 8", expected, m.weights + m.gradients + m.optimizer_states);
  CHECK(m.weights + m.gradients + m.optimizer_states == Approx(expected).epsilon(1e-12));
  // ep 2 of dp 8: 4 replicas of each expert, sharded 4 ways.
  in.expert_dp = 4;
  const double shared = 4e8 * (2 + 16.0 / 8) + 6e8 * (2 + 16.0 / 4);
  show("the same with ep 2 (4 expert replicas)", shared, stage_memory(in, kMixed).total() - stage_memory(in, kMixed).activations -
                                                             stage_memory(in, kMixed).temporary);
  CHECK(stage_memory(in, kMixed).weights + stage_memory(in, kMixed).gradients + stage_memory(in, kMixed).optimizer_states ==
        Approx(shared).epsilon(1e-12));
}

TEST_CASE("layers per stage: remainder to the first stages, interleaved chunks even", "[rules]") {
  const auto split = layers_per_virtual_stage(10, 4, 1);
  CHECK(split == std::vector<std::int64_t>{3, 3, 2, 2});
  CHECK(layers_of_stage(24, 4, 2, 1) == 6);
  CHECK(layers_per_virtual_stage(24, 4, 2) == std::vector<std::int64_t>(8, 3));
  CHECK_THROWS(layers_per_virtual_stage(10, 4, 2));
}

TEST_CASE("uneven stages: lighten-ends counts the embedding and the output layer as one layer each", "[rules]") {
  // Llama 3 405B (Dubey et al. 2024, section 3.3.2): 126 layers on 16 stages, one layer
  // fewer on the first and the last: (126 + 2) / 16 = 8 layer-equivalents per stage.
  const PipelineSplit ends{StageSplit::lighten_ends, {}};
  const auto llama = layers_per_virtual_stage(126, 16, 1, ends);
  std::vector<std::int64_t> expected(16, 8);
  expected.front() = expected.back() = 7;
  show("Llama 3 405B, 126 layers, pp 16: first stage 8 - 1", 7, double(llama.front()));
  show("Llama 3 405B, 126 layers, pp 16: middle stage (126 + 2) / 16", 8, double(llama[5]));
  CHECK(llama == expected);
  CHECK(layers_of_stage(126, 16, 1, 0, ends) == 7);
  CHECK(layers_of_stage(126, 16, 1, 15, ends) == 7);
  CHECK(layers_of_stage(126, 16, 1, 1, ends) == 8);
  // Interleaved, p 4, v 2, 30 layers: 32 / 8 = 4 per virtual stage; virtual stage 0 is
  // chunk 0 of stage 0 and virtual stage 7 chunk 1 of stage 3.
  CHECK(layers_per_virtual_stage(30, 4, 2, ends) == std::vector<std::int64_t>{3, 4, 4, 4, 4, 4, 4, 3});
  CHECK(layers_of_stage(30, 4, 2, 0, ends) == 7);
  CHECK(layers_of_stage(30, 4, 2, 3, ends) == 7);
  CHECK(layers_of_stage(30, 4, 2, 1, ends) == 8);
  // One stage holds everything; layers + 2 must split evenly otherwise.
  CHECK(layers_per_virtual_stage(24, 1, 1, ends) == std::vector<std::int64_t>{24});
  CHECK_THROWS(layers_per_virtual_stage(24, 4, 1, ends));
}

TEST_CASE("uneven stages: a listed split is taken as given, and must cover the layers", "[rules]") {
  const PipelineSplit listed{StageSplit::listed, {5, 7, 7, 5}};
  CHECK(layers_per_virtual_stage(24, 4, 1, listed) == listed.layers);
  CHECK(layers_of_stage(24, 4, 1, 2, listed) == 7);
  CHECK(layers_of_stage(24, 2, 2, 0, listed) == 5 + 7);  // chunks 0 and 1 of stage 0: virtual stages 0 and 2
  CHECK_THROWS(layers_per_virtual_stage(25, 4, 1, listed));
  CHECK_THROWS(layers_per_virtual_stage(24, 8, 1, listed));
}

TEST_CASE("micro-batches in flight: GPipe m, 1F1B min(m, p - s), interleaved warm-up / v", "[rules]") {
  CHECK(micro_batches_in_flight(Schedule::gpipe, 4, 1, 16, 0) == 16);
  CHECK(micro_batches_in_flight(Schedule::gpipe, 1, 1, 16, 0) == 16);
  CHECK(micro_batches_in_flight(Schedule::one_f_one_b, 4, 1, 16, 0) == 4);
  CHECK(micro_batches_in_flight(Schedule::one_f_one_b, 4, 1, 16, 3) == 1);
  CHECK(micro_batches_in_flight(Schedule::one_f_one_b, 4, 1, 2, 0) == 2);
  CHECK(micro_batches_in_flight(Schedule::one_f_one_b, 1, 1, 16, 0) == 1);
  // p 4, v 2, stage 0: 2 * 3 + 1 * 4 + 1 = 11 chunk forwards = 5.5 micro-batches.
  show("interleaved p 4 v 2 stage 0: (2(p-1) + (v-1)p + 1) / v", 5.5,
       micro_batches_in_flight(Schedule::interleaved, 4, 2, 16, 0));
  CHECK(micro_batches_in_flight(Schedule::interleaved, 4, 2, 16, 0) == Approx(5.5));
}

TEST_CASE("interleaved micro-batch groups: warm-up 2(p-s-1) + (v-1)N chunk forwards", "[rules]") {
  // p 4, v 2, m 6 in one group of N = 6 (Megatron-LM's microbatch_group_size_per_vp_stage):
  // stage 0 warms up with 2 x 3 + 1 x 6 = 12 = m v chunk forwards, all of them: 6 micro-batches.
  show("interleaved p 4 v 2 m 6 N 6, stage 0: min(m v, 2(p-1) + (v-1)N + 1) / v", 6.0,
       micro_batches_in_flight(Schedule::interleaved, 4, 2, 6, 0, 6));
  CHECK(micro_batches_in_flight(Schedule::interleaved, 4, 2, 6, 0, 6) == Approx(6.0));
  // Stage 3: (0 + 6 + 1) / 2 = 3.5.
  CHECK(micro_batches_in_flight(Schedule::interleaved, 4, 2, 6, 3, 6) == Approx(3.5));
  // N = 0 means p: the default warm-up.
  CHECK(micro_batches_in_flight(Schedule::interleaved, 4, 2, 16, 0, 0) == micro_batches_in_flight(Schedule::interleaved, 4, 2, 16, 0, 4));
  CHECK(microbatch_group(4, 0) == 4);
  CHECK(microbatch_group(4, 6) == 6);
  // ZB-H1 keeps 1F1B's activations in flight.
  CHECK(micro_batches_in_flight(Schedule::zb_h1, 4, 1, 16, 1) == 3);
}

TEST_CASE("zero-bubble ZB-H1: each stage fills max(F, t - 2W), 1F1B the whole t", "[rules]") {
  // F 1, B 2 (of which W 1): 1F1B's bubble (p-1)(F + B) = 9 for p 4; ZB-H1's (p-1)(F + B - 2W) = 3.
  const double F = 1, B = 2, W = 1, t = F + B;
  show("1F1B fill of a stage: t = F + B", 3, pipeline_fill(Schedule::one_f_one_b, t, F, W));
  show("ZB-H1 fill of a stage: F + B - 2W", 1, pipeline_fill(Schedule::zb_h1, t, F, W));
  CHECK(pipeline_fill(Schedule::one_f_one_b, t, F, W) == Approx(3));
  CHECK(pipeline_fill(Schedule::zb_h1, t, F, W) == Approx(1));
  // A weight gradient longer than F + B_input leaves the forward fill: F.
  CHECK(pipeline_fill(Schedule::zb_h1, 3.0, 1.0, 1.5) == Approx(1.0));
  // The iteration: 4 equal stages, m 8: 8 x 3 + 3 x 1 = 27 (1F1B: 8 x 3 + 3 x 3 = 33).
  Prediction e;
  for (int s = 0; s < 4; ++s) {
    StagePrediction st;
    st.forward = F;
    st.backward = B;
    st.weight_grad = W;
    e.stages.push_back(st);
  }
  compose_iteration(e, 8, 1, Schedule::zb_h1);
  show("ZB-H1 p 4 m 8: m t + (p-1)(F + B - 2W)", 27, e.iteration_time);
  CHECK(e.iteration_time == Approx(27));
  CHECK(e.breakdown.bubble == Approx(3));
  compose_iteration(e, 8, 1, Schedule::one_f_one_b);
  CHECK(e.iteration_time == Approx(33));
}

TEST_CASE("DualPipe order: each rank runs m/2 forwards and backwards per direction, pairs F of one with B of the other", "[rules][dualpipe]") {
  using K = DualPipeStep::Kind;
  for (std::int64_t p : {2, 4, 8, 16})
    for (std::int64_t m : {2 * p, 2 * p + 2, 4 * p, 6 * p + 4})
      for (std::int64_t r = 0; r < p; ++r) {
        INFO("p " << p << " m " << m << " rank " << r);
        const auto order = dualpipe_order(p, m, r);
        std::int64_t f[2] = {0, 0}, b[2] = {0, 0}, deferred = 0, weights = 0, alive = 0, peak = 0;
        for (std::size_t i = 0; i < order.size(); ++i) {
          const DualPipeStep& s = order[i];
          if (s.kind == K::forward) {
            CHECK(s.micro_batch == f[s.direction]++);
            peak = std::max(peak, ++alive);
          }
          if (s.kind == K::backward) {
            CHECK(s.micro_batch == b[s.direction]++);
            CHECK(s.micro_batch < f[s.direction]);  // after its forward
            deferred += s.defer_weight;
            --alive;
          }
          weights += s.kind == K::weight;
          if (s.overlap_next) {
            REQUIRE(i + 1 < order.size());
            CHECK(s.kind == K::forward);
            CHECK(order[i + 1].kind == K::backward);
            CHECK(order[i + 1].direction != s.direction);
          }
        }
        for (int d = 0; d < 2; ++d) {
          CHECK(f[d] == m / 2);
          CHECK(b[d] == m / 2);
        }
        CHECK(weights == deferred);
        // DeepSeek-V3's Table 2: PP + 1 chunks' activations per device.
        CHECK(peak == p + 1);
      }
  CHECK(dualpipe_stage(8, 2, 0) == 2);
  CHECK(dualpipe_stage(8, 2, 1) == 5);
  CHECK(model_copies(Schedule::dualpipe) == 2);
  CHECK(model_copies(Schedule::zb_h1) == 1);
  // p + 1 chunks, each half of a rank's two stages.
  CHECK(micro_batches_in_flight(Schedule::dualpipe, 8, 1, 32, 3) == Approx(4.5));
}

TEST_CASE("DualPipe makespan: DeepSeek-V3's bubble (p/2-1)(F&B + B - 3W) where F = B - W", "[rules][dualpipe]") {
  // The report's Table 2 counts the bubble beyond (m-p-1) F&B + (p+1)(F + B); its formula
  // holds exactly where F = B - W (forward as long as the input gradient). F, B: a chunk's
  // time alone, communication included; F&B: a pair overlapped.
  struct Ratio {
    double forward, forward_comm, backward, backward_comm, weight;
  };
  for (const Ratio& x : {Ratio{1, 0, 2, 0, 1}, Ratio{1, 0.4, 2, 0.4, 1}, Ratio{2, 0, 3, 0, 1}, Ratio{1.5, 0.5, 2.5, 0.5, 1}})
    for (std::int64_t p : {4, 8, 16})
      for (std::int64_t m : {2 * p, 2 * p + 6, 4 * p}) {
        const DualPipeChunk c{x.forward, x.forward_comm, x.backward, x.backward_comm, x.weight};
        const double F = c.forward + c.forward_comm, B = c.backward + c.backward_comm, W = c.weight_grad;
        const double FB = dualpipe_pair_time(c);
        REQUIRE(F == Approx(B - W));
        const double bubble = (double(p) / 2 - 1) * (FB + B - 3 * W);
        const double expected = double(m - p - 1) * FB + double(p + 1) * (F + B) + bubble;
        const double T = dualpipe_makespan(std::vector<DualPipeChunk>(static_cast<std::size_t>(p), c), m);
        char what[160];
        std::snprintf(what, sizeof what, "DualPipe p %lld m %lld F %.1f B %.1f W %.1f F&B %.1f", static_cast<long long>(p),
                      static_cast<long long>(m), F, B, W, FB);
        show(what, expected, T);
        CHECK(T == Approx(expected).epsilon(1e-12));
      }
  // The pair hides each chunk's communication behind the other's compute: F&B = F + B
  // without communication, max(compute, communication) with it.
  CHECK(dualpipe_pair_time({1, 0, 2, 0, 1}) == Approx(3));
  CHECK(dualpipe_pair_time({1, 0.5, 2, 0.5, 1}) == Approx(3));
  CHECK(dualpipe_pair_time({1, 2, 1, 2, 0.5}) == Approx(4));
  // Against 1F1B on p stages of t = F + B: m t + (p-1) t.
  const DualPipeChunk c{1, 0, 2, 0, 1};
  const double one_f_one_b = double(32 + 8 - 1) * 3;
  const double dual = dualpipe_makespan(std::vector<DualPipeChunk>(8, c), 32);
  show("DualPipe p 8 m 32 F 1 B 2 W 1 (1F1B 117)", 32 * 3 + 3 * (3 + 2 - 3), dual);
  CHECK(dual < one_f_one_b);
}

TEST_CASE("DualPipe iteration: compose_dualpipe's breakdown adds up to the makespan", "[rules][dualpipe]") {
  // 4 ranks of two chunks each: per micro-batch through both, forward 2, backward 4 (W 2),
  // expert all-to-all 1.2 in all: per chunk F 1 + 0.3, B 2 + 0.3.
  Prediction e;
  for (int s = 0; s < 4; ++s) {
    StagePrediction st;
    st.forward = 2;
    st.backward = 4;
    st.weight_grad = 2;
    st.ep_comm = 1.2;
    st.optimizer = 0.5;
    e.stages.push_back(st);
  }
  compose_iteration(e, 16, 1, Schedule::dualpipe);
  const DualPipeChunk c{1, 0.3, 2, 0.3, 1};
  const double T = dualpipe_makespan(std::vector<DualPipeChunk>(4, c), 16);
  show("DualPipe p 4 m 16 iteration: makespan + optimizer", T + 0.5, e.iteration_time);
  CHECK(e.iteration_time == Approx(T + 0.5));
  CHECK(e.breakdown.total() == Approx(e.iteration_time).epsilon(1e-12));
  CHECK(e.breakdown.compute_forward == Approx(8 * 2));
  // The pairs hide their all-to-all; only the unpaired chunks of warm-up and drain expose theirs.
  std::printf("DualPipe exposed all-to-all %.4g of 8 x 1.2 = 9.6 (1F1B exposes all)\n", e.breakdown.ep_comm_exposed);
  CHECK(e.breakdown.ep_comm_exposed < 0.5 * 8 * 1.2);
  CHECK(e.breakdown.bubble >= 0);
}

TEST_CASE("pipeline makespan: m x slowest + the other stages once (/v interleaved)", "[rules]") {
  const std::vector<double> t{1.0, 2.0, 1.5};
  // Alpa's Eq. 2: sum + (m - 1) max = 4.5 + 7 * 2 = 18.5.
  show("stages 1, 2, 1.5 s, 8 micro-batches: 4.5 + 7 x 2", 18.5, pipeline_makespan(t, 8, 1));
  CHECK(pipeline_makespan(t, 8, 1) == Approx(18.5));
  CHECK(pipeline_makespan(t, 8, 2) == Approx(8 * 2 + 2.5 / 2));
}

TEST_CASE("pipeline sends: 1/tp per rank, gathered on arrival unless sequence-parallel", "[rules]") {
  const PipelineSend s = pipeline_send(8e6, 4, false);
  CHECK(s.per_rank == Approx(2e6));
  CHECK(s.gather_after == Approx(8e6));
  CHECK(pipeline_send(8e6, 4, true).gather_after == 0);
  CHECK(pipeline_send(8e6, 1, false).gather_after == 0);
  CHECK(s.transfers() == 2);
  CHECK(s.regather_output == 0);
  CHECK(tied_embedding_sync_bytes(1e8, 2, 4, kMixed) == Approx(1e8 / 2 * 4));
  CHECK(tied_embedding_sync_bytes(1e8, 2, 1, kMixed) == 0);
}

TEST_CASE("pipeline communication per micro-batch: Megatron's paired exchanges, DeepSpeed's four blocking transfers and re-gather", "[rules]") {
  // Megatron: per chunk, the activation forward and its gradient backward, each a transfer
  // of 1/tp and an all-gather on arrival: v (2 transfer + 2 gather).
  const double transfer = 3e-3, gather = 1e-3;
  const PipelineSend megatron = pipeline_send(8e6, 4, false);
  show("Megatron, v = 3: 3 x (2 x 3 ms + 2 x 1 ms)", 3 * (2 * transfer + 2 * gather),
       pipeline_comm_per_micro_batch(megatron, transfer, gather, 3));
  CHECK(pipeline_comm_per_micro_batch(megatron, transfer, gather, 3) == Approx(3 * (2 * transfer + 2 * gather)));
  // DeepSpeed's PipelineEngine: SendGrad, RecvActivation, RecvGrad, SendActivation as four
  // blocking transfers of the 1/tp slice, the two gathers on arrival and the re-gather of
  // the stage's own sent output before its backward: 4 transfer + 3 gather.
  const PipelineSend ds = pipeline_send(8e6, 4, false, Framework::megatron_deepspeed);
  CHECK(ds.per_rank == Approx(2e6));
  CHECK(ds.gather_after == Approx(8e6));
  CHECK(ds.regather_output == Approx(8e6));
  CHECK(ds.transfers() == 4);
  CHECK(ds.blocking);
  show("DeepSpeed: 4 x 3 ms + 3 x 1 ms", 4 * transfer + 3 * gather, pipeline_comm_per_micro_batch(ds, transfer, gather, 1));
  CHECK(pipeline_comm_per_micro_batch(ds, transfer, gather, 1) == Approx(4 * transfer + 3 * gather));
  // Without tensor parallelism nothing is partitioned: the whole activation, four transfers.
  const PipelineSend ds1 = pipeline_send(8e6, 1, false, Framework::megatron_deepspeed);
  CHECK(ds1.per_rank == Approx(8e6));
  CHECK(ds1.regather_output == 0);
  CHECK(pipeline_comm_per_micro_batch(ds1, transfer, 0.0, 1) == Approx(4 * transfer));
}

TEST_CASE("rank order and groups: tensor-parallel ranks adjacent, then data, then pipeline", "[rules]") {
  CHECK(plan_rank(4, 2, 1, 3, 1) == 1 * 8 + 3 * 2 + 1);
  ClusterModel c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  PlanSpec p;
  p.tp = 2;
  p.dp = 8;
  p.pp = 2;
  const PlanGroups g = plan_groups(c, p);
  CHECK(g.tp.per_node == 2);
  CHECK(g.dp.per_node == 4);  // 8 GPUs a node / tp 2
  CHECK(g.dp_share == Approx(0.5));
  CHECK(g.pp_cross_node);  // neighbours 16 ranks apart
  CHECK(g.ends_cross_node);
  p.dp = 2;
  CHECK_FALSE(plan_groups(c, p).ends_cross_node);  // 2 x 2 x 2 = 8 GPUs: one node
}

TEST_CASE("all-reduce algorithm: the tree wins when B/(n bw) < alpha (n - 1 - ceil(log2 n))", "[rules][collectives]") {
  const double bw = 100e9, a = 5e-6;
  const std::int64_t n = 64;
  const double threshold = n * bw * a * (n - 1 - 6);  // bytes where the two tie
  const double ring = all_reduce_time(AllReduceAlgorithm::ring, n, threshold, bw, a);
  const double tree = all_reduce_time(AllReduceAlgorithm::tree, n, threshold, bw, a);
  show("64 ranks, 100 GB/s, 5 us: ring and tree tie at the crossover (tree)", ring, tree);
  CHECK(tree == Approx(ring).epsilon(1e-12));
  CHECK(choose_all_reduce(n, 0.5 * threshold, bw, a) == AllReduceAlgorithm::tree);
  CHECK(choose_all_reduce(n, 2 * threshold, bw, a) == AllReduceAlgorithm::ring);
  CHECK(all_reduce_time(AllReduceAlgorithm::ring, 8, 8e9, 100e9, 0) == Approx(2 * 7.0 / 8 * 8e9 / 100e9));
}

TEST_CASE("mixed-fp8: weight GEMMs in fp8 with Transformer Engine's casts, the rest in bf16", "[rules][fp8]") {
  const PrecisionRules r = precision_rules(Precision::mixed_fp8, OptimizerKind::adam);
  CHECK(r.compute == DType::bf16);
  CHECK(r.weight_gemm == DType::fp8);
  CHECK(precision_rules(Precision::mixed_bf16, OptimizerKind::adam).weight_gemm == DType::bf16);
  // C[1, 4096, 8192] = A[1, 4096, 2048] W: forward casts A (3 B per element); backward casts
  // and transposes dC (3 + 2 B) and transposes the saved fp8 A (2 B).
  const Fp8CastTraffic c = fp8_casts(1, 4096, 8192, 2048);
  const double in = 4096.0 * 2048, out = 4096.0 * 8192;
  std::printf("fp8 casts: expected forward %.0f B, backward %.0f B; computed %.0f B, %.0f B\n", 3 * in,
              5 * out + 2 * in, c.forward, c.backward);
  CHECK(c.forward == Approx(3 * in));
  CHECK(c.backward == Approx(5 * out + 2 * in));
  // On an H100 the fp8 GEMM of a large weight runs faster than bf16, casts included.
  const auto h100 = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(h100);
  Op op;
  op.kind = OpKind::matmul;
  op.weight = true;
  op.m = 8192, op.n = 8192, op.k = 8192;
  const OpWork bf16 = op_work(op, OpShards{}, km, DType::bf16, DType::bf16);
  const OpWork fp8 = op_work(op, OpShards{}, km, DType::bf16, DType::fp8);
  std::printf("8192^3 weight GEMM on H100: bf16 fwd %.1f us, fp8 fwd with cast %.1f us\n", 1e6 * bf16.forward,
              1e6 * fp8.forward);
  CHECK(fp8.forward < bf16.forward);
  CHECK(fp8.forward > 0.5 * bf16.forward * (989.5 / 1979.0));
}

TEST_CASE("megatron-2019's FP16_Optimizer moves 64 bytes per parameter, and reduce_dtype sets Megatron's main gradients", "[rules]") {
  // FP16_Optimizer (a0368ddf): overflow check 10, master-gradient copy 6, unscale 8, norm 4,
  // FusedAdam on fp32 28, master-to-model copy 6, zero_grad 2 = 64 bytes per parameter,
  // where Megatron's fused step (mixed-fp16) moves 28 + the 2-byte gradient read.
  TrainingSpec t;
  t.precision = Precision::mixed_fp16;
  t.framework.name = Framework::megatron_2019;
  const PrecisionRules r = precision_rules(t);
  show("megatron-2019 optimizer bytes per parameter", 64, r.optimizer_step_bytes() + r.grad_bytes + r.optimizer_extra_bytes);
  CHECK(r.optimizer_step_bytes() + r.grad_bytes + r.optimizer_extra_bytes == Approx(64));
  const GpuProfile gpu = *find_gpu_profile("v100-sxm2-32gb");
  const KernelModel km(gpu);
  CHECK(optimizer_step(km, 1e9, r) == Approx(km.memory(64e9, 8, MemoryKind::optimizer)).epsilon(1e-12));
  // Its DistributedDataParallel (model/distributed.py, around every run): flatten, scale and
  // copy back the fp16 gradients, 3 x (2 + 2) = 12 bytes per parameter at dp 1 as at 64, on
  // PyTorch 1.1's unvectorized elementwise path.
  for (const std::int64_t dp : {1, 64}) {
    show("megatron-2019 DDP gradient passes, bytes per parameter", 12, ddp_gradient_scaling_bytes(t.framework, 1, dp, r));
    CHECK(ddp_gradient_scaling_bytes(t.framework, 1e9, dp, r) == Approx(12e9));
  }
  const double ddp = ddp_gradient_scaling(km, t.framework, 1e9, 1, r);
  const double rate = gpu.memory_bandwidth * gpu.efficiency.memory_by_kind[static_cast<std::size_t>(MemoryKind::mixed_add)];
  show("megatron-2019 DDP gradient passes of 1e9 parameters on the V100, s", 12e9 / rate, ddp);
  CHECK(ddp == Approx(12e9 / rate).epsilon(1e-12));
  // Megatron-Core's grad_reduce_in_fp32 false (NeMo 1.x: optim.grad_sync_dtype bf16): the
  // main-gradient buffer and its reduction in bf16.
  TrainingSpec n;
  n.precision = Precision::mixed_fp8;
  n.framework.reduce_dtype = ElementType::bf16;
  const PrecisionRules bf16_grads = precision_rules(n);
  CHECK(bf16_grads.grad_bytes == 2);
  CHECK(bf16_grads.grad_comm_bytes == 2);
  CHECK(precision_rules(TrainingSpec{}).grad_bytes == 4);  // mixed-bf16 default: fp32 main gradients
  const double P = 1e9;
  show("ZeRO-1 over 8 with bf16 main gradients: gradient bytes per GPU", 2 * P, weight_memory(P, 0, bf16_grads, 1, 8).gradients);
  CHECK(weight_memory(P, 0, bf16_grads, 1, 8).gradients == Approx(2 * P));
}

TEST_CASE("DDP scales every gradient by 1/dp: one read + write pass, two without the bucket view", "[rules]") {
  const GpuProfile gpu = *find_gpu_profile("h100-sxm5-80gb");
  const KernelModel km(gpu);
  FrameworkSpec ddp;
  ddp.name = Framework::pytorch_ddp;
  ddp.gradient_as_bucket_view = true;
  const double P = 1.1e9;  // Llama-1.1B: the profiled pass took 2.98 ms on an H100
  // fp32 gradients under autocast: read 4 + write 4 bytes a parameter.
  show("bytes, Llama-1.1B, bucket view", P * 8, ddp_gradient_scaling_bytes(ddp, P, 2, kAmp));
  CHECK(ddp_gradient_scaling_bytes(ddp, P, 2, kAmp) == Approx(P * 8));
  const double expected = P * 8 / (gpu.memory_bandwidth * gpu.efficiency.memory);
  show("time at the elementwise rate (profiled: 2.98 ms)", expected, ddp_gradient_scaling(km, ddp, P, 2, kAmp));
  CHECK(ddp_gradient_scaling(km, ddp, P, 2, kAmp) == Approx(expected).epsilon(1e-12));
  CHECK(ddp_gradient_scaling(km, ddp, P, 2, kAmp) == Approx(2.98e-3).epsilon(0.1));
  ddp.gradient_as_bucket_view = false;  // scaled into the bucket, copied back after the all-reduce
  CHECK(ddp_gradient_scaling_bytes(ddp, P, 2, kAmp) == Approx(P * 16));
  CHECK(ddp_gradient_scaling_bytes(ddp, P, 1, kAmp) == 0);  // no DDP on one GPU
  FrameworkSpec megatron;
  CHECK(ddp_gradient_scaling_bytes(megatron, P, 8, kMixed) == 0);
}

TEST_CASE("gradient ranks: dp x cp, and DualPipe's two copies of a stage reduce together", "[rules][dualpipe]") {
  show("dp 4, cp 2, 1F1B: dp x cp", 8, double(gradient_ranks(4, 2)));
  show("dp 4, cp 2, DualPipe: dp x cp x 2 copies", 16, double(gradient_ranks(4, 2, Schedule::dualpipe)));
  CHECK(gradient_ranks(4, 2) == 8);
  CHECK(gradient_ranks(4, 2, Schedule::dualpipe) == 4 * 2 * model_copies(Schedule::dualpipe));
  PlanSpec p;
  p.dp = 3;
  p.pp = 4;
  p.schedule = Schedule::dualpipe;
  CHECK(gradient_ranks(p) == 6);
  p.schedule = Schedule::interleaved;
  CHECK(gradient_ranks(p) == 3);
}

TEST_CASE("the GPU waits for the host to prepare the optimizer step only beyond the host's lead and the sync",
          "[rules][host]") {
  // Closed form: the step's kernels start at max(GPU end + sync, host end + host_optimizer),
  // the host ending host_lead before the GPU: wait = max(0, host_optimizer - lead - sync).
  struct Case {
    double lead, sync, host, expected;
  };
  for (const Case c : {Case{0.0, 0.0, 3e-3, 3e-3}, Case{1e-3, 0.0, 3e-3, 2e-3}, Case{1e-3, 0.5e-3, 3e-3, 1.5e-3},
                       Case{5e-3, 0.0, 3e-3, 0.0}, Case{0.0, 4e-3, 3e-3, 0.0}, Case{-2e-3, 0.0, 3e-3, 3e-3}}) {
    const double w = optimizer_host_wait(c.lead, c.sync, c.host);
    std::printf("lead %.1f ms, sync %.1f ms, host %.1f ms: expected wait %.2f ms, computed %.2f ms\n", c.lead * 1e3,
                c.sync * 1e3, c.host * 1e3, c.expected * 1e3, w * 1e3);
    CHECK(w == Approx(c.expected).margin(1e-15));
  }
}

TEST_CASE("launch_blocking: the host's dispatch and a synchronous launch between two kernels", "[rules]") {
  // CUDA_LAUNCH_BLOCKING=1: gap = eager host time per kernel - asynchronous submit (inside
  // it) + launch-and-synchronize of an empty kernel; it replaces the asynchronous gap.
  Efficiency e;
  e.kernel_overhead = 2.878e-6;
  e.launch_submit = 2.878e-6;
  e.sync_launch_latency = 7.92e-6;
  HostDispatch h;
  h.eager_per_kernel = 23.71e-6;
  const double expected = 23.71e-6 - 2.878e-6 + 7.92e-6;
  show("launch_blocking_gap (s)", expected, launch_blocking_gap(e, h));
  CHECK(launch_blocking_gap(e, h) == Approx(expected).epsilon(1e-12));
  // Without a measured synchronous launch: dispatch, then the asynchronous gap.
  Efficiency unmeasured = e;
  unmeasured.sync_launch_latency = 0;
  show("launch_blocking_gap, no synchronous launch measured (s)", 23.71e-6 + 2.878e-6, launch_blocking_gap(unmeasured, h));
  CHECK(launch_blocking_gap(unmeasured, h) == Approx(23.71e-6 + 2.878e-6).epsilon(1e-12));
  // Never below the asynchronous gap (a host faster than the GPU's own launch).
  HostDispatch none;
  Efficiency fast = e;
  fast.sync_launch_latency = 1e-6;
  CHECK(launch_blocking_gap(fast, none) == e.kernel_overhead);
  // The host no longer runs ahead: its dispatch is in the gap, not in a host bound.
  FrameworkSpec f;
  f.name = Framework::megatron_deepspeed;
  CHECK(host_per_kernel(f, h) == 23.71e-6);
  f.launch_blocking = true;
  CHECK(host_per_kernel(f, h) == 0);
}

TEST_CASE("launch_blocking: the shipped profiles carry the H100's measured launches", "[rules]") {
  // calibration/data/h100-sxm5-80gb/microbench-duty-2026-11-27.json: launch
  // sync_launch_latency and async_host_submit_per_launch (medians); the A100 takes the
  // H100's host and launch figures (costmodel/transfer.cpp).
  for (const char* name : {"h100-sxm5-80gb", "a100-sxm4-80gb"}) {
    const auto p = find_gpu_profile(name);
    REQUIRE(p);
    const double expected = p->host.eager_per_kernel - 2.8781273e-06 + 7.9215e-06;
    show(name, expected, launch_blocking_gap(p->efficiency, p->host));
    CHECK(p->efficiency.sync_launch_latency == Approx(7.9215e-06).epsilon(1e-9));
    CHECK(p->efficiency.launch_submit == Approx(2.8781273e-06).epsilon(1e-9));
    CHECK(launch_blocking_gap(p->efficiency, p->host) == Approx(expected).epsilon(1e-9));
  }
}

// Bytes per parameter and per activation for each training precision.
//  fp32        weights 4, grads 4, Adam states 8                  compute fp32
//  amp-*       PyTorch autocast: fp32 weights 4, grads 4, states 8, plus a transient
//              low-precision copy of each weight made during forward (2)   compute 16-bit
//  mixed-bf16  Megatron: bf16 weights 2, fp32 main grads 4 (Megatron forces fp32 grad
//              accumulation for bf16), fp32 master 4 + states 8      compute bf16
//  mixed-fp16  Megatron default: fp16 weights 2, fp16 grads 2, master 4 + states 8
//  mixed-fp8   Megatron with Transformer Engine FP8 (delayed scaling): mixed-bf16's
//              storage, the weight GEMMs (forward, dgrad, wgrad) in fp8 with casts of
//              their inputs and transposes for the backward, plus the cached fp8 weight
//              and its transpose; attention and the memory-bound
//              kernels stay bf16 (strategies/rules.hpp fp8_weights prices the copies, for
//              the weights Transformer Engine casts only)
// SGD keeps one momentum buffer (4) instead of Adam's two.
#pragma once
#include "costmodel/hardware.hpp"
#include "scenarios/scenario.hpp"

namespace clustersim {

struct PrecisionRules {
  DType compute = DType::bf16;
  double activation_bytes = 2;
  double weight_bytes = 2;
  double grad_bytes = 4;
  double master_bytes = 4;
  double optimizer_state_bytes = 8;
  double autocast_copy_bytes = 0;
  double grad_comm_bytes = 4;  // element size of the gradient reduction
  // Megatron keeps contiguous gradient buffers for the whole run; eager PyTorch
  // allocates gradients in backward and frees them after the step (zero_grad with
  // set_to_none, its default), so with one micro-batch they do not coexist with the
  // activations.
  bool persistent_grads = true;
  // Bytes per parameter of weight all-gathers and of gathered weights (ZeRO-3 / FSDP):
  // the stored weight, or FSDP's param_dtype.
  double gather_bytes = 2;
  // The GEMMs against weights (forward, dgrad, wgrad): `compute`, or fp8 under mixed-fp8,
  // whose casts and transposes fp8_cast_traffic() prices.
  DType weight_gemm = DType::bf16;
  // Bytes per parameter the framework's optimizer moves besides the fused step
  // (optimizer_step_bytes and the gradient read): megatron-2019's FP16_Optimizer passes.
  double optimizer_extra_bytes = 0;
  // ZeRO-1/2 gradients all-reduced in full rather than reduce-scattered: DeepSpeed's
  // BF16_Optimizer (megatron-deepspeed under mixed-bf16) hands its whole fp32 gradient
  // buffer to buffered_allreduce_fallback (deepspeed/runtime/engine.py
  // _exec_reduce_grads -> _bf16_reduce_grads; bf16_optimizer.py get_grads_for_reduction
  // returns fp32_groups_gradients_flat), then all-gathers the updated bf16 weights
  // (all_gather_dp_groups). gradient_sync reads it.
  bool zero_reduce_all = false;
  // mixed-fp8 under Megatron's fp8_param_gather (training.fp8_param_gather): the weights
  // Transformer Engine casts are kept as fp8 tensors, with no bf16 copy (rules.hpp
  // fp8_weights).
  bool fp8_param_gather = false;
  // Bytes per parameter that autograd's AccumulateGrad moves when a micro-batch after the
  // first adds its weight gradient into .grad (read both, write the sum, in the gradient's
  // type): the frameworks that leave the sum over micro-batches to autograd (plain PyTorch,
  // DDP, DTensor TP). 0 for the Megatron family, whose sums the graph prices
  // (GraphStyle::grad_accumulation_bytes: main_grad.add_ every micro-batch, or, under fp16
  // without fp32 accumulation, autograd's adds into 16-bit gradients, charged every micro-batch
  // there as that rule was calibrated), and for FSDP, which shards the gradients first (not
  // modelled: its measured runs have one micro-batch).
  double autograd_accumulation_bytes = 0;
  // Bytes read plus written per parameter by the optimizer step.
  double optimizer_step_bytes() const;
};

PrecisionRules precision_rules(Precision p, OptimizerKind opt);
// With the framework's overrides: FSDP's MixedPrecision policy gathers parameters in
// param_dtype (and autocast then finds them in 16 bits: no copy of its own) and reduces
// gradients in reduce_dtype.
PrecisionRules precision_rules(const TrainingSpec& t);

}  // namespace clustersim

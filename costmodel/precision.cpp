#include "costmodel/precision.hpp"

#include <algorithm>

namespace clustersim {

PrecisionRules precision_rules(Precision p, OptimizerKind opt) {
  PrecisionRules r;
  const double states = opt == OptimizerKind::adam ? 8.0 : 4.0;
  r.optimizer_state_bytes = states;
  switch (p) {
    case Precision::fp32:
      r = {DType::fp32, 4, 4, 4, 0, states, 0, 4, false};
      break;
    case Precision::amp_bf16:
      r = {DType::bf16, 2, 4, 4, 0, states, 2, 4, false};
      break;
    case Precision::amp_fp16:
      r = {DType::fp16, 2, 4, 4, 0, states, 2, 4, false};
      break;
    case Precision::mixed_bf16:
      r = {DType::bf16, 2, 2, 4, 4, states, 0, 4, true};
      break;
    case Precision::mixed_fp16:
      r = {DType::fp16, 2, 2, 2, 4, states, 0, 2, true};
      break;
    case Precision::mixed_fp8:
      // Transformer Engine's fp8 weight copies are not autocast's: strategies/rules.hpp
      // fp8_weights prices them, for the weights it casts only.
      r = {DType::bf16, 2, 2, 4, 4, states, 0, 4, true};
      r.weight_gemm = DType::fp8;
      break;
  }
  if (p != Precision::mixed_fp8) r.weight_gemm = r.compute;
  r.gather_bytes = r.weight_bytes;
  return r;
}

namespace {
double element_bytes(ElementType e) { return e == ElementType::fp32 ? 4.0 : 2.0; }
}  // namespace

PrecisionRules precision_rules(const TrainingSpec& t) {
  PrecisionRules r = precision_rules(t.precision, t.optimizer);
  const FrameworkSpec& f = t.framework;
  r.fp8_param_gather = t.fp8_param_gather;
  if (f.name == Framework::pytorch_fsdp) {
    if (f.param_dtype) {
      r.gather_bytes = element_bytes(*f.param_dtype);
      if (*f.param_dtype != ElementType::fp32) r.autocast_copy_bytes = 0;
    }
    if (f.reduce_dtype) r.grad_comm_bytes = element_bytes(*f.reduce_dtype);
  }
  // Megatron's main gradients in reduce_dtype: the buffer and its reduction.
  if (megatron_family(f.name) && f.reduce_dtype) r.grad_bytes = r.grad_comm_bytes = element_bytes(*f.reduce_dtype);
  if (f.name == Framework::megatron_deepspeed && t.precision == Precision::mixed_bf16) r.zero_reduce_all = true;
  if (f.name == Framework::pytorch || f.name == Framework::pytorch_ddp || f.name == Framework::pytorch_tp)
    r.autograd_accumulation_bytes = 3 * r.grad_bytes;
  if (f.name == Framework::megatron_2019) {
    // FP16_Optimizer of Megatron-LM 2019 (fp16/fp16.py, fp16util.py, loss_scaler.py and
    // mpu/grads.py at a0368ddf) goes tensor by tensor; per parameter it moves: the overflow
    // check float(x.float().sum()) reads the fp16 gradient, writes and reads an fp32 copy
    // (10); the copy into the fp32 master gradient (6); unscaling it in place (8); the
    // clipping norm (4); apex FusedAdam on the fp32 master: gradient, master and states
    // read, master and states written (4 + 2 x 4 + 2 x states); the master copied into the
    // fp16 weight (6); zero_grad on the fp16 gradients (2). The fused step's bytes are
    // already counted.
    const double fp16_optimizer = 10 + 6 + 8 + 4 + (4 + 2 * 4 + 2 * r.optimizer_state_bytes) + 6 + 2;
    r.optimizer_extra_bytes = std::max(0.0, fp16_optimizer - (r.optimizer_step_bytes() + r.grad_bytes));
  }
  return r;
}

double PrecisionRules::optimizer_step_bytes() const {
  // Read grad, master (or weight), states; write master (or weight), states, and the
  // low-precision weight copy when the master is separate.
  const double master = master_bytes > 0 ? master_bytes : weight_bytes;
  const double copy = master_bytes > 0 ? weight_bytes : 0.0;
  return grad_bytes + 2 * master + 2 * optimizer_state_bytes + copy;
}

}  // namespace clustersim

#include "costmodel/precision.hpp"

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

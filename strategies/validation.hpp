// The validation sets: every measured or published run the project checks itself
// against, as a scenario plus the real figure, and the one rule per set that turns that
// figure into seconds per iteration. Accuracy tests and the uncertainty table
// (strategies/uncertainty) read them from here.
//
//   measured-h100        calibration/data/h100-sxm5-80gb/measured-runs-*.json: one GPU,
//                        step time measured (scenarios in data/scenarios/measured-h100/)
//   measured-h200        the same on an H200 (calibration/data/h200-sxm-141gb/,
//                        data/scenarios/measured-h200/)
//   measured-parallel    calibration/data/*/measured-parallel-*.json: 1 to 4 GPUs of one
//                        host, step time measured (each run's own scenario block)
//   *-transferred        the measured runs above of a GPU whose datasheet profile
//                        ("<name>-datasheet") is transferred, predicted with that profile
//   megatron-sc21        data/published/megatron-sc21-table1.json: TFLOP/s per GPU with
//                        the paper's FLOP count 96 B s l h^2 (1 + s/6h + V/16lh)
//   published            data/published/training-throughput.json rows with a shipped
//                        scenario: a step time, tokens/s per GPU (a step of global
//                        batch x sequence tokens), GPU hours per trillion tokens (the
//                        same step), TFLOP/s per GPU counting recompute
//                        (hardware FLOPs), or weak-scaling efficiency x the 1-GPU rate
#pragma once
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "scenarios/scenario.hpp"
#include "strategies/prediction.hpp"

namespace clustersim {

struct ValidationCase {
  std::string dataset, id;
  Scenario scenario;
  // Exactly one of these is the real figure.
  Seconds step_time = 0;              // measured or published seconds per iteration
  double paper_tflops_per_gpu = 0;    // megatron-sc21: with the paper's FLOP count
  double hardware_tflops_per_gpu = 0; // published: FLOPs the GPUs execute, recompute counted
};

// The attention kernel a measured run's environment recorded (measure_train.py and
// measure_parallel.py write "attention_backend": the SDPA backend forced, or "auto"), as
// training.attention_kernel's value: "flash2" or "cudnn"; nothing for auto or none recorded.
std::optional<std::string> recorded_attention_kernel(const nlohmann::json& environment);
// The scenario a measured multi-GPU run describes: its own model, training (with the
// framework), cluster and plan; fused attention with the kernels the run recorded, no
// dropout. Throws InputError.
Scenario measured_run_scenario(const nlohmann::json& run);

// All cases, in a fixed order (datasets as listed above, files sorted, rows as stored).
std::vector<ValidationCase> validation_cases(const std::string& root);

// Megatron-LM's FLOPs per iteration (Narayanan et al., SC'21): 96 B s l h^2 (1 + s/6h + V/16lh).
double megatron_paper_flops(const Scenario& s);

// The real seconds per iteration that a case's figure means, for a prediction of its
// scenario (the TFLOP/s figures divide the FLOPs the prediction counts, which for these
// models equal the papers' own counts).
Seconds real_step_time(const ValidationCase& c, const Prediction& p);

// Signed relative error of a prediction: real / predicted - 1 (+: the real run is slower,
// the prediction was optimistic).
double relative_residual(const ValidationCase& c, const Prediction& p);

}  // namespace clustersim

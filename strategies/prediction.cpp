#include "strategies/prediction.hpp"

#include <algorithm>

namespace clustersim {

Seconds TimeBreakdown::total() const {
  return compute_forward + compute_backward + compute_recompute + tp_comm_exposed + ep_comm_exposed + cp_comm_exposed +
         pp_comm_exposed + offload_exposed + bubble + dp_comm_exposed + optimizer + host_bound;
}

void Prediction::finish(const Workload& w) {
  workload = w;
  const double gpus = double(std::max<std::int64_t>(1, w.gpus));
  const double t = iteration_time;
  samples_per_s = t > 0 ? double(w.global_batch) / t : 0.0;
  tokens_per_s = samples_per_s * double(w.tokens_per_sample);
  tflops_per_gpu = t > 0 ? hardware_flops / t / gpus / 1e12 : 0.0;
  model_tflops_per_gpu = t > 0 ? model_flops / t / gpus / 1e12 : 0.0;
  mfu = w.peak_flops > 0 ? model_tflops_per_gpu * 1e12 / w.peak_flops : 0.0;
  memory = MemoryBreakdown{};
  for (const auto& st : stages)
    if (st.memory.total() > memory.total()) memory = st.memory;
  memory_per_gpu = memory.total();
  fits = memory_per_gpu <= memory_capacity;
  overflow = fits ? 0.0 : memory_per_gpu - memory_capacity;
  interval = prediction_interval(iteration_time, regime_of(w.gpu_status, w.gpus, w.gpus_per_node, method),
                                 builtin_uncertainty());
}

namespace {
// Objects are filled with emplace rather than written as initializer lists: nlohmann
// builds each {"key", value} of a list as a two-element array and then copies key and
// value into the object (nested objects deep-copied), about three allocations per key
// where one does. A sweep serialises one prediction per point (results/README.md,
// benchmark). The tree, and so its dump, is the same: objects keep their keys sorted.
nlohmann::json memory_json(const MemoryBreakdown& m) {
  nlohmann::json j = nlohmann::json::object();
  j.emplace("weights_bytes", m.weights);
  j.emplace("gradients_bytes", m.gradients);
  j.emplace("optimizer_states_bytes", m.optimizer_states);
  j.emplace("activations_bytes", m.activations);
  j.emplace("temporary_bytes", m.temporary);
  return j;
}
MemoryBreakdown memory_from(const nlohmann::json& j) {
  MemoryBreakdown m;
  m.weights = j.at("weights_bytes").get<double>();
  m.gradients = j.at("gradients_bytes").get<double>();
  m.optimizer_states = j.at("optimizer_states_bytes").get<double>();
  m.activations = j.at("activations_bytes").get<double>();
  m.temporary = j.at("temporary_bytes").get<double>();
  return m;
}
}  // namespace

nlohmann::json to_json(const Prediction& e) {
  using nlohmann::json;
  const auto& b = e.breakdown;
  json stages = json::array();
  for (const auto& s : e.stages) {
    json& st = stages.emplace_back(json::object());
    st.emplace("first_layer", s.first_layer);
    st.emplace("layers", s.layers);
    st.emplace("forward_s", s.forward);
    st.emplace("backward_s", s.backward);
    st.emplace("recompute_s", s.recompute);
    st.emplace("tp_comm_s", s.tp_comm);
    st.emplace("ep_comm_s", s.ep_comm);
    st.emplace("cp_comm_s", s.cp_comm);
    st.emplace("p2p_s", s.p2p);
    st.emplace("zero3_gather_s", s.zero3_gather);
    st.emplace("offload_forward_s", s.offload_forward);
    st.emplace("offload_backward_s", s.offload_backward);
    st.emplace("per_micro_batch_s", s.per_micro_batch());
    st.emplace("dp_exposed_s", s.dp_exposed);
    st.emplace("optimizer_s", s.optimizer);
    st.emplace("host_per_micro_batch_s", s.host);
    st.emplace("host_forward_per_micro_batch_s", s.host_forward);
    st.emplace("params_per_gpu", s.params_per_gpu);
    st.emplace("memory_bytes", s.memory.total());
    st.emplace("memory", memory_json(s.memory));
  }
  json breakdown = json::object();
  breakdown.emplace("compute_forward_s", b.compute_forward);
  breakdown.emplace("compute_backward_s", b.compute_backward);
  breakdown.emplace("compute_recompute_s", b.compute_recompute);
  breakdown.emplace("tp_comm_exposed_s", b.tp_comm_exposed);
  breakdown.emplace("ep_comm_exposed_s", b.ep_comm_exposed);
  breakdown.emplace("cp_comm_exposed_s", b.cp_comm_exposed);
  breakdown.emplace("pp_comm_exposed_s", b.pp_comm_exposed);
  breakdown.emplace("offload_exposed_s", b.offload_exposed);
  breakdown.emplace("bubble_s", b.bubble);
  breakdown.emplace("dp_comm_exposed_s", b.dp_comm_exposed);
  breakdown.emplace("optimizer_s", b.optimizer);
  breakdown.emplace("host_bound_s", b.host_bound);
  json out = json::object();
  out.emplace("method", e.method);
  out.emplace("iteration_time_s", e.iteration_time);
  out.emplace("tokens_per_s", e.tokens_per_s);
  out.emplace("samples_per_s", e.samples_per_s);
  out.emplace("tflops_per_gpu", e.tflops_per_gpu);
  out.emplace("model_tflops_per_gpu", e.model_tflops_per_gpu);
  out.emplace("mfu", e.mfu);
  out.emplace("memory_per_gpu_bytes", e.memory_per_gpu);
  out.emplace("memory_capacity_bytes", e.memory_capacity);
  out.emplace("fits", e.fits);
  out.emplace("overflow_bytes", e.overflow);
  out.emplace("micro_batches", e.micro_batches);
  out.emplace("parameters", e.parameters);
  out.emplace("hardware_flops_per_iteration", e.hardware_flops);
  out.emplace("model_flops_per_iteration", e.model_flops);
  out.emplace("breakdown", std::move(breakdown));
  out.emplace("memory", memory_json(e.memory));
  out.emplace("stages", std::move(stages));
  out.emplace("interval", to_json(e.interval));
  return out;
}

Prediction prediction_from_json(const nlohmann::json& j) {
  Prediction e;
  e.method = j.at("method").get<std::string>();
  e.iteration_time = j.at("iteration_time_s").get<double>();
  e.tokens_per_s = j.at("tokens_per_s").get<double>();
  e.samples_per_s = j.at("samples_per_s").get<double>();
  e.tflops_per_gpu = j.at("tflops_per_gpu").get<double>();
  e.model_tflops_per_gpu = j.at("model_tflops_per_gpu").get<double>();
  e.mfu = j.at("mfu").get<double>();
  e.memory_per_gpu = j.at("memory_per_gpu_bytes").get<double>();
  e.memory_capacity = j.at("memory_capacity_bytes").get<double>();
  e.fits = j.at("fits").get<bool>();
  e.overflow = j.at("overflow_bytes").get<double>();
  e.micro_batches = j.at("micro_batches").get<std::int64_t>();
  e.parameters = j.at("parameters").get<double>();
  e.hardware_flops = j.at("hardware_flops_per_iteration").get<double>();
  e.model_flops = j.at("model_flops_per_iteration").get<double>();
  const auto& b = j.at("breakdown");
  auto& bd = e.breakdown;
  bd.compute_forward = b.at("compute_forward_s").get<double>();
  bd.compute_backward = b.at("compute_backward_s").get<double>();
  bd.compute_recompute = b.at("compute_recompute_s").get<double>();
  bd.tp_comm_exposed = b.at("tp_comm_exposed_s").get<double>();
  bd.ep_comm_exposed = b.at("ep_comm_exposed_s").get<double>();
  bd.cp_comm_exposed = b.value("cp_comm_exposed_s", 0.0);  // absent before context parallelism
  bd.pp_comm_exposed = b.at("pp_comm_exposed_s").get<double>();
  bd.offload_exposed = b.value("offload_exposed_s", 0.0);  // absent before activation offload
  bd.bubble = b.at("bubble_s").get<double>();
  bd.dp_comm_exposed = b.at("dp_comm_exposed_s").get<double>();
  bd.optimizer = b.at("optimizer_s").get<double>();
  bd.host_bound = b.at("host_bound_s").get<double>();
  e.memory = memory_from(j.at("memory"));
  if (j.contains("interval")) {
    const auto& i = j.at("interval");
    e.interval.low = i.at("low_s").get<double>();
    e.interval.high = i.at("high_s").get<double>();
    e.interval.confidence = i.at("confidence").get<double>();
    e.interval.samples = i.at("samples").get<int>();
    e.interval.regime = i.at("regime").get<std::string>();
    e.interval.basis = i.at("basis").get<std::string>();
  }
  for (const auto& s : j.at("stages")) {
    StagePrediction st;
    st.first_layer = s.at("first_layer").get<int>();
    st.layers = s.at("layers").get<int>();
    st.forward = s.at("forward_s").get<double>();
    st.backward = s.at("backward_s").get<double>();
    st.recompute = s.at("recompute_s").get<double>();
    st.tp_comm = s.at("tp_comm_s").get<double>();
    st.ep_comm = s.at("ep_comm_s").get<double>();
    st.cp_comm = s.value("cp_comm_s", 0.0);
    st.p2p = s.at("p2p_s").get<double>();
    st.zero3_gather = s.at("zero3_gather_s").get<double>();
    st.offload_forward = s.value("offload_forward_s", 0.0);
    st.offload_backward = s.value("offload_backward_s", 0.0);
    st.dp_exposed = s.at("dp_exposed_s").get<double>();
    st.optimizer = s.at("optimizer_s").get<double>();
    st.host = s.at("host_per_micro_batch_s").get<double>();
    st.host_forward = s.at("host_forward_per_micro_batch_s").get<double>();
    st.params_per_gpu = s.at("params_per_gpu").get<double>();
    st.memory = memory_from(s.at("memory"));
    e.stages.push_back(st);
  }
  return e;
}

}  // namespace clustersim

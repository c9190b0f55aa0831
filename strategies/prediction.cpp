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
void write_memory(JsonWriter& w, const MemoryBreakdown& m) {
  w.begin_object();
  w.member("activations_bytes", m.activations);
  w.member("gradients_bytes", m.gradients);
  w.member("optimizer_states_bytes", m.optimizer_states);
  w.member("temporary_bytes", m.temporary);
  w.member("weights_bytes", m.weights);
  w.end_object();
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

void write_members(JsonWriter& w, const Prediction& e) {
  // In key order, which the writer then need not restore.
  const auto& b = e.breakdown;
  w.key("breakdown");
  w.begin_object();
  w.member("bubble_s", b.bubble);
  w.member("compute_backward_s", b.compute_backward);
  w.member("compute_forward_s", b.compute_forward);
  w.member("compute_recompute_s", b.compute_recompute);
  w.member("cp_comm_exposed_s", b.cp_comm_exposed);
  w.member("dp_comm_exposed_s", b.dp_comm_exposed);
  w.member("ep_comm_exposed_s", b.ep_comm_exposed);
  w.member("host_bound_s", b.host_bound);
  w.member("offload_exposed_s", b.offload_exposed);
  w.member("optimizer_s", b.optimizer);
  w.member("pp_comm_exposed_s", b.pp_comm_exposed);
  w.member("tp_comm_exposed_s", b.tp_comm_exposed);
  w.end_object();
  w.member("fits", e.fits);
  w.member("hardware_flops_per_iteration", e.hardware_flops);
  w.key("interval");
  write_json(w, e.interval);
  w.member("iteration_time_s", e.iteration_time);
  w.key("memory");
  write_memory(w, e.memory);
  w.member("memory_capacity_bytes", e.memory_capacity);
  w.member("memory_per_gpu_bytes", e.memory_per_gpu);
  w.member("method", e.method);
  w.member("mfu", e.mfu);
  w.member("micro_batches", e.micro_batches);
  w.member("model_flops_per_iteration", e.model_flops);
  w.member("model_tflops_per_gpu", e.model_tflops_per_gpu);
  w.member("overflow_bytes", e.overflow);
  w.member("parameters", e.parameters);
  w.member("samples_per_s", e.samples_per_s);
  w.key("stages");
  w.begin_array();
  for (const auto& s : e.stages) {
    w.begin_object();
    w.member("backward_s", s.backward);
    w.member("cp_comm_s", s.cp_comm);
    w.member("dp_exposed_s", s.dp_exposed);
    w.member("ep_comm_s", s.ep_comm);
    w.member("first_layer", s.first_layer);
    w.member("forward_s", s.forward);
    w.member("host_forward_per_micro_batch_s", s.host_forward);
    if (s.host_optimizer > 0) w.member("host_optimizer_s", s.host_optimizer);  // DTensor parameters only
    w.member("host_per_micro_batch_s", s.host);
    w.member("layers", s.layers);
    w.key("memory");
    write_memory(w, s.memory);
    w.member("memory_bytes", s.memory.total());
    w.member("offload_backward_s", s.offload_backward);
    w.member("offload_forward_s", s.offload_forward);
    w.member("optimizer_s", s.optimizer);
    w.member("p2p_s", s.p2p);
    w.member("params_per_gpu", s.params_per_gpu);
    w.member("per_micro_batch_s", s.per_micro_batch());
    w.member("recompute_s", s.recompute);
    w.member("tp_comm_s", s.tp_comm);
    w.member("zero3_gather_s", s.zero3_gather);
    w.end_object();
  }
  w.end_array();
  w.member("tflops_per_gpu", e.tflops_per_gpu);
  w.member("tokens_per_s", e.tokens_per_s);
}

std::string to_json_text(const Prediction& p) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  write_members(w, p);
  w.end_object();
  return out;
}

nlohmann::json to_json(const Prediction& p) { return nlohmann::json::parse(to_json_text(p)); }

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
    st.host_optimizer = s.value("host_optimizer_s", 0.0);
    st.params_per_gpu = s.at("params_per_gpu").get<double>();
    st.memory = memory_from(s.at("memory"));
    e.stages.push_back(st);
  }
  return e;
}

}  // namespace clustersim

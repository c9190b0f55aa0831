// The SimGrid network model used for GPU fabrics, set explicitly instead of SimGrid's
// TCP-over-Ethernet defaults, and described in every result. NVLink and InfiniBand
// are not TCP: no latency/bandwidth corrections (LV08 would multiply latency by 13.01
// and bandwidth by 0.97), no reverse-direction cross-traffic, no TCP window cap
// (TCP-gamma), no RTT-unfair sharing (weight-S). NCCL's achievable fraction of a
// link's bandwidth is applied on the links themselves (see platform.hpp).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace clustersim::sim {

struct NetworkModelConfig {
  std::string model = "CM02";
  double latency_factor = 1.0;
  double bandwidth_factor = 1.0;
  double tcp_gamma = 1e30;  // bytes; a bound gamma / (2 latency) that never binds
  bool crosstraffic = false;
  double weight_s = 0.0;
};

// The --cfg/--log arguments that configure a fresh SimGrid engine (logging at
// critical only, so the CLI's output stays clean).
std::vector<std::string> engine_arguments(const NetworkModelConfig& c);
nlohmann::json to_json(const NetworkModelConfig& c);

}  // namespace clustersim::sim

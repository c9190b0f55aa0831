#include "sim/network_model.hpp"

#include <fmt/format.h>

namespace clustersim::sim {

std::vector<std::string> engine_arguments(const NetworkModelConfig& c) {
  return {
      "clustersim",
      "--log=root.thres:critical",
      "--log=no_loc",
      fmt::format("--cfg=network/model:{}", c.model),
      fmt::format("--cfg=network/latency-factor:{}", c.latency_factor),
      fmt::format("--cfg=network/bandwidth-factor:{}", c.bandwidth_factor),
      fmt::format("--cfg=network/TCP-gamma:{}", c.tcp_gamma),
      fmt::format("--cfg=network/crosstraffic:{}", c.crosstraffic ? 1 : 0),
      fmt::format("--cfg=network/weight-S:{}", c.weight_s),
  };
}

nlohmann::json to_json(const NetworkModelConfig& c) {
  return {{"model", c.model},
          {"latency_factor", c.latency_factor},
          {"bandwidth_factor", c.bandwidth_factor},
          {"tcp_gamma_bytes", c.tcp_gamma},
          {"crosstraffic", c.crosstraffic},
          {"weight_s", c.weight_s}};
}

}  // namespace clustersim::sim

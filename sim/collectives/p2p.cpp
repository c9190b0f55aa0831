// Point-to-point (pipeline sends): one flow from the first to the second rank of each
// group, all groups at once.
#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

void point_to_point(Network& net, const CollectiveCall& call) {
  std::vector<Flow> flows;
  for (const auto& g : call.groups)
    if (g.size() >= 2) flows.push_back({g[0], g[1], call.bytes});
  net.run(flows, call.label);
}

}  // namespace clustersim::sim

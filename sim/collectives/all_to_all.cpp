// All-to-all (expert dispatch and combine): every rank sends bytes/n to every other
// rank, all flows at once, so the NICs and NVLink ports share them as they would.
#include "sim/collective_algorithms.hpp"

namespace clustersim::sim {

void all_to_all_direct(Network& net, const CollectiveCall& call) {
  std::vector<Flow> flows;
  for (const auto& g : call.groups) {
    const Bytes piece = call.bytes / double(g.size());
    for (auto src : g)
      for (auto dst : g)
        if (src != dst) flows.push_back({src, dst, piece});
  }
  net.run(flows, call.label);
}

}  // namespace clustersim::sim

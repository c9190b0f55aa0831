// What the simulator layer records as provenance: the SimGrid library actually loaded.
#pragma once
#include <string>

namespace clustersim::sim {
// "3.32.0": the SimGrid library actually loaded (not the headers compiled against).
std::string simgrid_version();
}  // namespace clustersim::sim

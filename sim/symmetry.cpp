#include "sim/symmetry.hpp"

#include <fmt/format.h>

namespace clustersim::sim {

ReplicaSymmetry replica_symmetry(std::int64_t dp, std::int64_t tp, std::int64_t pp, std::int64_t ep,
                                 const ClusterModel& c, bool built) {
  ReplicaSymmetry s;
  s.dp = dp;
  s.tp = tp;
  s.pp = pp;
  s.gpus_per_node = c.gpus_per_node;
  const std::int64_t classes = std::max<std::int64_t>(1, ep);
  if (!built) s.reason = "platform file";
  else if (dp < 2 || dp % classes != 0 || dp / classes < 2) s.reason = fmt::format("dp {} has no copies of ep {}", dp, ep);
  else if (c.nodes < 2 || c.nics_per_node < 1) s.reason = "no network";
  else if (c.topology != Topology::fat_tree && c.topology != Topology::rail_optimized)
    s.reason = fmt::format("{} topology", to_string(c.topology));
  else if (tp % c.gpus_per_node != 0)
    s.reason = fmt::format("tp {} does not fill whole nodes of {} GPUs", tp, c.gpus_per_node);
  else if (dp * tp * pp != c.total_gpus())
    s.reason = fmt::format("the plan uses {} of {} GPUs", dp * tp * pp, c.total_gpus());
  if (s.reason.empty()) s.classes = classes;
  return s;
}

}  // namespace clustersim::sim

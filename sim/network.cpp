#include "sim/network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <simgrid/s4u.hpp>

namespace sg4 = simgrid::s4u;

namespace clustersim::sim {

namespace {
bool skipped(const Flow& f) { return std::llround(f.bytes) <= 0 || f.src == f.dst; }
}  // namespace

std::pair<std::int64_t, std::int64_t> Network::place(std::int64_t src, std::int64_t dst) const {
  const ReplicaSymmetry& s = platform_.symmetry;
  if (!s.active()) return {src, dst};
  const std::int64_t k = s.offset(src);
  const std::int64_t from = s.shifted(src, -k), to = s.shifted(dst, -k);
  if (s.representative(to)) return {s.simulated_index(from), s.simulated_index(to)};
  // A GPU of a copy: its representative, reached the way the copy is (sim/symmetry.hpp).
  const std::int64_t rep = s.shifted(to, -s.offset(to));
  const bool same_node = rep / s.gpus_per_node == from / s.gpus_per_node;
  const auto gpus = static_cast<std::int64_t>(platform_.gpus.size());
  return {s.simulated_index(from), (same_node ? gpus : 0) + s.simulated_index(rep)};
}

const Network::Route& Network::placed_route(std::int64_t src, std::int64_t endpoint) {
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint64_t>(endpoint);
  auto it = routes_.find(key);
  if (it != routes_.end()) return it->second;
  const auto gpus = static_cast<std::int64_t>(platform_.gpus.size());
  sg4::Host* to = endpoint < gpus ? platform_.gpus[static_cast<std::size_t>(endpoint)]
                                  : platform_.mirrors[static_cast<std::size_t>(endpoint - gpus)];
  std::vector<sg4::Link*> links;
  double lat = 0;
  platform_.gpus[static_cast<std::size_t>(src)]->route_to(to, links, &lat);
  Route r;
  r.latency = lat;
  for (auto* l : links) {
    auto [li, fresh] = link_index_.emplace(l, static_cast<int>(loads_.size()));
    if (fresh) {
      loads_.push_back({l->get_name(), l->get_bandwidth(), 0});
      const auto node = platform_.link_node.find(l);
      load_node_.push_back(node == platform_.link_node.end() ? -1 : node->second);
    }
    r.links.push_back(li->second);
    const double bw = loads_[static_cast<std::size_t>(li->second)].bandwidth;
    r.bandwidth = r.bandwidth == 0 ? bw : std::min(r.bandwidth, bw);
  }
  return routes_.emplace(key, std::move(r)).first->second;
}

const Network::Route& Network::route(std::int64_t src, std::int64_t dst) {
  const auto [from, to] = place(src, dst);
  return placed_route(from, to);
}

Seconds Network::latency(std::int64_t src, std::int64_t dst) { return route(src, dst).latency; }
double Network::edge_bandwidth(std::int64_t src, std::int64_t dst) { return route(src, dst).bandwidth; }

std::vector<const Flow*> Network::fold(const std::vector<Flow>& flows, Bytes* represented) const {
  std::vector<const Flow*> kept;
  kept.reserve(flows.size());
  const ReplicaSymmetry& s = platform_.symmetry;
  const double copies = double(s.copies());
  *represented = 0;
  // Flows from the representatives alone (what their actors issue): every copy issues
  // the same.
  if (std::all_of(flows.begin(), flows.end(), [&](const Flow& f) { return skipped(f) || !s.active() || s.representative(f.src); })) {
    for (const Flow& f : flows)
      if (!skipped(f)) {
        kept.push_back(&f);
        *represented += double(std::llround(f.bytes)) * copies;
      }
    return kept;
  }
  // A call over the copies too (a data-parallel collective): per class, the member that
  // sends the most bytes, the lowest rank among equals. Ordered maps: deterministic.
  std::map<std::int64_t, double> sent;  // rank -> bytes it sends
  for (const Flow& f : flows)
    if (!skipped(f)) sent[f.src] += double(std::llround(f.bytes));
  struct Choice {
    std::int64_t member = -1;
    double bytes = 0, present = 0, members = 0;
  };
  std::map<std::int64_t, Choice> chosen;  // class (simulated index) -> its member
  for (const auto& [rank, bytes] : sent) {
    Choice& c = chosen[s.simulated_index(rank)];
    if (c.member < 0 || bytes > c.bytes) {
      c.member = rank;
      c.bytes = bytes;
    }
    c.present += bytes;
    c.members += 1;
  }
  for (const auto& [cls, c] : chosen) *represented += c.present + (copies - c.members) * c.bytes;
  for (const Flow& f : flows)
    if (!skipped(f) && chosen.at(s.simulated_index(f.src)).member == f.src) kept.push_back(&f);
  return kept;
}

std::map<int, double> Network::link_bytes(const std::vector<Flow>& flows) {
  std::map<int, double> out;
  Bytes represented = 0;
  for (const Flow* f : fold(flows, &represented))
    for (int li : route(f->src, f->dst).links) out[li] += double(std::llround(f->bytes));
  return out;
}

void Network::run(const std::vector<Flow>& flows, const std::string& label) {
  std::vector<sg4::CommPtr> comms;
  Bytes represented = 0;
  const std::vector<const Flow*> started = fold(flows, &represented);
  if (started.empty()) return;
  comms.reserve(started.size());
  const double start = sg4::Engine::get_clock();
  const auto gpus = static_cast<std::int64_t>(platform_.gpus.size());
  for (const Flow* f : started) {
    const auto bytes = static_cast<std::uint64_t>(std::llround(f->bytes));
    const auto [src, endpoint] = place(f->src, f->dst);
    for (int li : placed_route(src, endpoint).links) loads_[static_cast<std::size_t>(li)].bytes += double(bytes);
    auto* from = platform_.gpus[static_cast<std::size_t>(src)];
    auto* to = endpoint < gpus ? platform_.gpus[static_cast<std::size_t>(endpoint)]
                               : platform_.mirrors[static_cast<std::size_t>(endpoint - gpus)];
    if (f->max_rate > 0) {
      // The rate must be set before both ends are: setting the second end starts the comm.
      sg4::CommPtr c = sg4::Comm::sendto_init();
      c->set_payload_size(bytes);
      c->set_rate(f->max_rate);
      c->set_source(from);
      c->set_destination(to);
      comms.push_back(c);
    } else
      comms.push_back(sg4::Comm::sendto_async(from, to, bytes));
    ++flows_;
  }
  bytes_ += represented;
  if (comms.size() == 1)
    comms.front()->wait();
  else
    sg4::Comm::wait_all(comms);
  if (trace_)
    for (std::size_t i = 0; i < comms.size(); ++i)
      trace_->slice(started[i]->src, Stream::network, fmt::format("{} -> gpu {}", label, started[i]->dst), start,
                    comms[i]->get_finish_time());
}

std::vector<LinkLoad> Network::link_loads() const {
  // Routes are also looked up for latencies and rates only; those links carried nothing.
  std::vector<LinkLoad> out;
  const ReplicaSymmetry& s = platform_.symmetry;
  for (std::size_t i = 0; i < loads_.size(); ++i) {
    const LinkLoad& l = loads_[i];
    if (l.bytes <= 0) continue;
    if (!s.active()) {
      out.push_back(l);
      continue;
    }
    const std::int64_t node = load_node_[i];
    if (node < 0) {  // shared by all nodes: it carries every copy's traffic at copies x its reduced bandwidth
      out.push_back({l.name, l.bandwidth * double(s.copies()), l.bytes * double(s.copies())});
      continue;
    }
    // A node's link ("n<node>-..."): the same on every copy of the node.
    const std::string suffix = l.name.substr(l.name.find('-'));
    for (std::int64_t j = 0; j < s.copies(); ++j)
      out.push_back({fmt::format("n{}{}", node + j * s.node_stride(), suffix), l.bandwidth, l.bytes});
  }
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) { return a.name < b.name; });
  return out;
}

}  // namespace clustersim::sim

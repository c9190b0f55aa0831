#include "sim/network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <simgrid/s4u.hpp>

namespace sg4 = simgrid::s4u;

namespace clustersim::sim {

const Network::Route& Network::route(std::int64_t src, std::int64_t dst) {
  const std::uint64_t key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint64_t>(dst);
  auto it = routes_.find(key);
  if (it != routes_.end()) return it->second;
  std::vector<sg4::Link*> links;
  double lat = 0;
  platform_.gpus[static_cast<std::size_t>(src)]->route_to(platform_.gpus[static_cast<std::size_t>(dst)], links, &lat);
  Route r;
  r.latency = lat;
  for (auto* l : links) {
    auto [li, fresh] = link_index_.emplace(l, static_cast<int>(loads_.size()));
    if (fresh) loads_.push_back({l->get_name(), l->get_bandwidth(), 0});
    r.links.push_back(li->second);
    const double bw = loads_[static_cast<std::size_t>(li->second)].bandwidth;
    r.bandwidth = r.bandwidth == 0 ? bw : std::min(r.bandwidth, bw);
  }
  return routes_.emplace(key, std::move(r)).first->second;
}

Seconds Network::latency(std::int64_t src, std::int64_t dst) { return route(src, dst).latency; }
double Network::edge_bandwidth(std::int64_t src, std::int64_t dst) { return route(src, dst).bandwidth; }

void Network::run(const std::vector<Flow>& flows, const std::string& label) {
  std::vector<sg4::CommPtr> comms;
  std::vector<const Flow*> started;
  comms.reserve(flows.size());
  const double start = sg4::Engine::get_clock();
  for (const Flow& f : flows) {
    const auto bytes = static_cast<std::uint64_t>(std::llround(f.bytes));
    if (bytes == 0 || f.src == f.dst) continue;
    for (int li : route(f.src, f.dst).links) loads_[static_cast<std::size_t>(li)].bytes += double(bytes);
    auto* from = platform_.gpus[static_cast<std::size_t>(f.src)];
    auto* to = platform_.gpus[static_cast<std::size_t>(f.dst)];
    if (f.max_rate > 0) {
      // The rate must be set before both ends are: setting the second end starts the comm.
      sg4::CommPtr c = sg4::Comm::sendto_init();
      c->set_payload_size(bytes);
      c->set_rate(f.max_rate);
      c->set_source(from);
      c->set_destination(to);
      comms.push_back(c);
    } else
      comms.push_back(sg4::Comm::sendto_async(from, to, bytes));
    started.push_back(&f);
    ++flows_;
    bytes_ += double(bytes);
  }
  if (comms.empty()) return;
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
  for (const auto& l : loads_)
    if (l.bytes > 0) out.push_back(l);
  std::sort(out.begin(), out.end(), [](const LinkLoad& a, const LinkLoad& b) { return a.name < b.name; });
  return out;
}

}  // namespace clustersim::sim

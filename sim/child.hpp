// SimGrid allows one engine per process: every simulation that creates one (a replay, a
// disaggregated serving run) runs in a forked child, so that a process can run many of
// them (sweeps, tests, `serve --capacity`'s threads) and a crash of one is an error, not
// the end of the process.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>

namespace clustersim::sim {

// Runs `body` in a forked child and returns the JSON it produced. The child's
// exceptions come back: an InputError as an InputError with its problems, anything else
// as std::runtime_error. With `progress`, the child reports its simulated clock through a
// second pipe and `progress` is called with each report.
nlohmann::json in_child(const std::function<nlohmann::json()>& body, const std::function<void(double)>& progress = {},
                        double progress_interval_s = 0.1);

}  // namespace clustersim::sim

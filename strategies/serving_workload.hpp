// The requests of a serving run: read from a trace (CSV or JSONL: arrival time in
// seconds, prompt tokens, output tokens) or drawn from the scenario's generator
// (Poisson, Gamma or fixed-rate arrivals; fixed, uniform or Zipf lengths) with its seed.
// The generator uses only std::mt19937_64 (its output is fixed by the standard) and
// its own transforms, so a seed gives the same requests on every platform.
#pragma once
#include <vector>

#include "scenarios/serving.hpp"
#include "strategies/serving_scheduler.hpp"

namespace clustersim {

// Requests in arrival order (ties: file or draw order), ids 0.. in that order.
// Throws InputError naming the file and line for a bad trace.
std::vector<ServeRequest> make_workload(const WorkloadSpec& w);
std::vector<ServeRequest> read_trace(const std::string& file);

}  // namespace clustersim

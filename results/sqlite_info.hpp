// The SQLite library version, for `clustersim version`. The store is results/store.hpp.
#pragma once
#include <string>

namespace clustersim::results {
std::string sqlite_version();
}  // namespace clustersim::results

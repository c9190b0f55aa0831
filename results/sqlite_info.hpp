// What the results layer records as provenance. The store itself lands with the
// results-database issue; this file is the only SQLite dependency until then.
#pragma once
#include <string>

namespace clustersim::results {
std::string sqlite_version();
}  // namespace clustersim::results

#include "results/sqlite_info.hpp"

#include <sqlite3.h>

namespace clustersim::results {
std::string sqlite_version() { return sqlite3_libversion(); }
}  // namespace clustersim::results

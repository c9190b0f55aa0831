// Storing computed runs moved to the runner layer (runner/store.hpp). This header keeps
// the commands that still include it by its old name (run, simulate, search) compiling;
// remove it once they include runner/store.hpp.
#pragma once
#include "runner/store.hpp"

namespace clustersim::cli {
using runner::default_db_file;
using runner::make_run_record;
using runner::store_run;
}  // namespace clustersim::cli

// The tool's provenance moved to the runner layer (runner/provenance.hpp). This header
// keeps the commands that still include it by its old name (run, simulate, search)
// compiling; remove it once they include runner/provenance.hpp.
#pragma once
#include "runner/provenance.hpp"

namespace clustersim::cli {
using runner::git_revision;
using runner::tool_json;
using runner::tool_version;
}  // namespace clustersim::cli

// The Alpa-style search (Zheng et al., OSDI'22): layer clustering (Eq. 6), then per
// micro-batch count the inter-op DP (inter_op.hpp) over stage candidates whose
// latencies are intra-op ILP optima in the full strategy space, solved lazily.
#pragma once
#include "strategies/search/search.hpp"
#include "strategies/search/search_context.hpp"

namespace clustersim::search {

SearchPlan alpa_search(SearchContext& ctx);

}  // namespace clustersim::search

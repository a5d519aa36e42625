#pragma once
// Which layers a sensitivity sweep runs: the quantized layers whose name contains one of the
// user's filters ("down_proj", "layers.3."), or all of them without a filter. Torch-free: the
// window counts the matches as the filter is typed.

#include <algorithm>
#include <string>
#include <vector>

namespace bitlens::analysis {

/// True when a sweep with `filters` (AnalysisOptions::sensitivityLayers) includes `layer`.
inline bool sweepsLayer(const std::vector<std::string>& filters, const std::string& layer)
{
    return filters.empty() ||
           std::any_of(filters.begin(), filters.end(), [&](const std::string& f) {
               return layer.find(f) != std::string::npos;
           });
}

} // namespace bitlens::analysis

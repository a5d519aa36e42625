#pragma once
// What a view needs to know about a figure of merit before it draws, sorts or colours it: its
// title, its unit and which way is better. Perplexity and KL divergence are lower-is-better;
// top-1, output agreement, embedding cosine and the same-top-token rate are higher-is-better.
// The Pareto front that weighs such a figure against a cost is here too. Torch-free: the GUI
// and the CLI both read it.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens::analysis {

/// How a figure's change from the float model is shown.
enum class ChangeUnit {
    /// percentage points, 100 x (q - f): shares of samples (top-1 0.9240 -> 0.9235: -0.05)
    Points,
    /// percent, 100 x (q / f - 1): perplexity changes by a ratio (81.18 -> 81.23: +0.07)
    Percent,
    /// the figure's own unit, q - f: a cosine, a KL divergence
    Same,
};

/// A figure of merit: a task metric ("top1", "perplexity", ... as report.json metric.name) or
/// one of a language model's divergence figures ("kld_mean", "kld_p99", "same_top").
struct MetricInfo {
    std::string name;        ///< "top1", "perplexity", "kld_mean", ...
    std::string title;       ///< "Top-1 accuracy", "Perplexity", "Mean KL divergence"
    std::string shortTitle;  ///< a narrow column's header: "Top-1", "Perplexity", "KLD"
    std::string unit;        ///< "nats" for KL divergences; "" for ratios and fractions
    bool lowerIsBetter = false;
    ChangeUnit change = ChangeUnit::Same;
    /// The float model's value by definition (0 for a KL divergence, 1 for same-top), nullopt
    /// when the float model's value is measured (the task metrics).
    std::optional<double> floatValue;

    /// True when `a` is strictly better than `b` in this figure's direction.
    bool better(double a, double b) const { return lowerIsBetter ? a < b : a > b; }
    /// "Mean KL divergence (nats)", "Perplexity (lower is better)": an axis title.
    std::string axisTitle() const;
};

/// The figure called `name`. "" is top-1 (reports older than metric.name); an unknown name is
/// higher-is-better with the name as its title and a change in its own unit.
MetricInfo metricInfo(std::string_view name);

/// The change of `quantized` from `reference` (the float model's value) in the figure's
/// change unit; nullopt for a percent change from 0.
std::optional<double> metricChange(const MetricInfo& info, double quantized, double reference);

/// The divergence figures of a language model's run, in column order: "kld_mean", "kld_p99",
/// "same_top" (report.json kl_divergence; exporting::reportFigure reads them).
const std::vector<std::string>& divergenceFigures();

/// True for a task metric whose runs also carry the divergence figures: perplexity (a language
/// model; evaluateLmDivergence runs with it).
bool metricHasDivergence(std::string_view metricName);

/// The figure a Pareto chart weighs by default: for a language model whose runs carry KL
/// divergence figures, mean KLD (its perplexity changes are within noise on a few windows);
/// otherwise the task metric `metricName` itself.
std::string defaultParetoFigure(std::string_view metricName, bool hasDivergence);

/// A run to weigh: its cost (size in bytes or MiB, latency; less is better) and its figure.
struct ParetoPoint {
    double cost = 0.0;
    double value = 0.0;
};

/// The Pareto front of `points`: the indices of the points that no other point beats on both
/// cost and value (no other is at most as costly and at least as good, and better in one),
/// cheapest first. Of points equal in both, the first is on the front. Points with a
/// non-finite cost or value are left out. Example, higher is better: (1, 0.90), (2, 0.95),
/// (3, 0.93) -> {0, 1}; lower is better, the same points -> {0}.
std::vector<std::size_t> paretoFront(const std::vector<ParetoPoint>& points, bool lowerIsBetter);

} // namespace bitlens::analysis

#include "analysis/metric_info.h"

#include <algorithm>
#include <cmath>

namespace bitlens::analysis {

std::string MetricInfo::axisTitle() const
{
    return unit.empty() ? title : title + " (" + unit + ")";
}

MetricInfo metricInfo(std::string_view name)
{
    MetricInfo info;
    info.name = std::string(name);
    if (name.empty() || name == "top1") {
        info = {"top1", "Top-1 accuracy", "Top-1", "", false, ChangeUnit::Points, std::nullopt};
    } else if (name == "top5") {
        info = {"top5", "Top-5 accuracy", "Top-5", "", false, ChangeUnit::Points, std::nullopt};
    } else if (name == "perplexity") {
        info = {"perplexity", "Perplexity", "Perplexity", "", true, ChangeUnit::Percent,
                std::nullopt};
    } else if (name == "embedding_cosine") {
        info = {"embedding_cosine", "Embedding cosine", "Cosine", "", false, ChangeUnit::Same,
                std::nullopt};
    } else if (name == "output_agreement") {
        info = {"output_agreement", "Output agreement", "Agreement", "", false,
                ChangeUnit::Points, std::nullopt};
    } else if (name == "kld_mean") {
        // KL divergence of the quantized next-token distributions from the float ones, natural
        // log (llama-perplexity --kl-divergence): 0 for the float model itself.
        info = {"kld_mean", "Mean KL divergence", "KLD", "nats", true, ChangeUnit::Same, 0.0};
    } else if (name == "kld_p99") {
        info = {"kld_p99", "KL divergence, 99th percentile", "KLD p99", "nats", true,
                ChangeUnit::Same, 0.0};
    } else if (name == "same_top") {
        // A share of scored tokens, as top-1 is of samples: its change reads in points.
        info = {"same_top", "Same top token", "Same top", "", false, ChangeUnit::Points, 1.0};
    } else {
        info.title = info.name;
        info.shortTitle = info.name;
    }
    return info;
}

std::optional<double> metricChange(const MetricInfo& info, double quantized, double reference)
{
    switch (info.change) {
    case ChangeUnit::Points: return 100.0 * (quantized - reference);
    case ChangeUnit::Percent:
        if (reference == 0.0)
            return std::nullopt;
        return 100.0 * (quantized / reference - 1.0);
    case ChangeUnit::Same: return quantized - reference;
    }
    return std::nullopt;
}

const std::vector<std::string>& divergenceFigures()
{
    static const std::vector<std::string> names{"kld_mean", "kld_p99", "same_top"};
    return names;
}

bool metricHasDivergence(std::string_view metricName)
{
    return metricName == "perplexity";
}

std::string defaultParetoFigure(std::string_view metricName, bool hasDivergence)
{
    if (hasDivergence && (metricName.empty() || metricHasDivergence(metricName)))
        return "kld_mean";
    return metricInfo(metricName).name;
}

std::vector<std::size_t> paretoFront(const std::vector<ParetoPoint>& points, bool lowerIsBetter)
{
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < points.size(); ++i)
        if (std::isfinite(points[i].cost) && std::isfinite(points[i].value))
            order.push_back(i);
    const auto better = [lowerIsBetter](double a, double b) {
        return lowerIsBetter ? a < b : a > b;
    };
    // Cheapest first; of equal cost the best first, then the earlier: walking that order, a
    // point is on the front when it is strictly better than every point before it (each of
    // those costs no more). Equal in both: the later one is not strictly better, so it is off.
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        if (points[a].cost != points[b].cost)
            return points[a].cost < points[b].cost;
        return better(points[a].value, points[b].value);
    });
    std::vector<std::size_t> front;
    for (const std::size_t i : order)
        if (front.empty() || better(points[i].value, points[front.back()].value))
            front.push_back(i);
    return front;
}

} // namespace bitlens::analysis

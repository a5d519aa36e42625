#include "jobs/step_clock.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace bitlens {

std::optional<double> stepsSecondsLeft(const std::vector<double>& finishedSeconds,
                                       std::size_t total, double currentSeconds)
{
    if (finishedSeconds.empty())
        return std::nullopt;
    const double mean = std::accumulate(finishedSeconds.begin(), finishedSeconds.end(), 0.0) /
                        static_cast<double>(finishedSeconds.size());
    const std::size_t left = total > finishedSeconds.size() ? total - finishedSeconds.size() : 0;
    return std::max(0.0, mean * static_cast<double>(left) - std::max(0.0, currentSeconds));
}

std::string clockText(double seconds)
{
    // Whole seconds gone by, as a clock on the wall counts them: 1.5 s is "0:01".
    const auto s = static_cast<long long>(std::floor(std::max(0.0, seconds)));
    char buf[48];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%lld:%02lld", s / 60, s % 60);
    return buf;
}

bool stageHasTimeLeft(std::string_view stage)
{
    return stage.find(" left") != std::string_view::npos;
}

void StepClock::finishStep()
{
    const Clock::time_point now = Clock::now();
    m_finished.push_back(std::chrono::duration<double>(now - m_stepStart).count());
    m_stepStart = now;
}

void StepClock::finishStep(double seconds)
{
    m_finished.push_back(std::max(0.0, seconds));
    m_stepStart = Clock::now();
}

std::optional<double> StepClock::secondsLeft() const
{
    return stepsSecondsLeft(
        m_finished, m_total, std::chrono::duration<double>(Clock::now() - m_stepStart).count());
}

std::string StepClock::stage(std::string_view noun, std::string_view name) const
{
    std::string text = std::string(noun) + " " + std::to_string(std::min(done() + 1, m_total)) +
                       " of " + std::to_string(m_total);
    if (!name.empty())
        text += " (" + std::string(name) + ")";
    if (const auto left = secondsLeft())
        return text + ", about " + clockText(*left) + " left";
    return text + ", time left after the first " + std::string(noun);
}

} // namespace bitlens

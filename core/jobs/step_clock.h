#pragma once
// The time left of a job made of steps of about equal cost (a sensitivity sweep's layers),
// from the measured durations of the steps already finished, and the stage text that carries it
// ("layer 3 of 211 (layer.0.attn.v_proj), about 1:47:49 left"). A job's overall fraction counts
// the work before its steps (loading, calibration, the float model's metric) as if it were one
// of them; the steps' own mean does not.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens {

/// Seconds left of a job of `total` steps of about equal cost (a sensitivity sweep's layers),
/// from the steps finished so far: their mean x the steps not finished, less `currentSeconds`
/// already spent on the running step, never below 0; nullopt before a step finished.
/// Example: 2 of 211 layers done in 30 s and 32 s, 10 s into the third: 31 x 209 - 10 = 6469 s.
std::optional<double> stepsSecondsLeft(const std::vector<double>& finishedSeconds,
                                       std::size_t total, double currentSeconds = 0.0);

/// Seconds as a clock, in whole seconds (1.5 s is "0:01"): "0:42", "12:05", "1:47:49".
std::string clockText(double seconds);

/// True when a stage text gives its own time left ("... about 1:47:49 left", "time left after
/// the first layer"): a progress view then shows no estimate of its own from the job's overall
/// fraction, which counts the work before the steps as if it were one of them.
bool stageHasTimeLeft(std::string_view stage);

/// Counts and times the steps of a job, for stage texts "layer 3 of 211 (name), about 1:47:49
/// left" (stepsSecondsLeft of the steps' measured durations). Not thread-safe: the job's own
/// thread uses it.
class StepClock {
public:
    using Clock = std::chrono::steady_clock;

    /// A job of `total` steps; the first step starts now.
    explicit StepClock(std::size_t total) : m_total(total), m_stepStart(Clock::now()) {}

    /// The running step ended: its duration is recorded and the next one starts now.
    void finishStep();
    /// The running step ended after `seconds` (timed by the caller; tests): recorded as such,
    /// and the next one starts now.
    void finishStep(double seconds);
    /// Steps finished so far.
    std::size_t done() const { return m_finished.size(); }
    std::size_t total() const { return m_total; }
    /// Durations in seconds of the finished steps, in order.
    const std::vector<double>& finishedSeconds() const { return m_finished; }
    /// stepsSecondsLeft of the finished steps and the running one as of now.
    std::optional<double> secondsLeft() const;
    /// "layer 3 of 211 (layer.0.attn.v_proj), about 1:47:49 left"; before a step finished,
    /// "layer 1 of 211 (...), time left after the first layer". `noun`: "layer".
    std::string stage(std::string_view noun, std::string_view name) const;

private:
    std::size_t m_total;
    std::vector<double> m_finished;
    Clock::time_point m_stepStart;
};

} // namespace bitlens

#pragma once
// Progress reporting and cancellation for long core jobs. A job takes `Progress&` and
// `const CancelToken&`, reports (fraction, stage) as it goes and checks the token once per
// layer or batch. Both are safe to use from the worker thread while another thread reads them.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace bitlens {

/// Shared cancellation flag; copies refer to the same flag.
class CancelToken {
public:
    CancelToken() : m_flag(std::make_shared<std::atomic<bool>>(false)) {}
    /// Ask the job to stop at its next check.
    void cancel() const { m_flag->store(true, std::memory_order_relaxed); }
    /// True once cancel() was called on any copy.
    bool cancelled() const { return m_flag->load(std::memory_order_relaxed); }

private:
    std::shared_ptr<std::atomic<bool>> m_flag;
};

/// Progress sink: fraction in [0, 1] and a short stage text ("training epoch 2/4").
class Progress {
public:
    using Callback = std::function<void(double fraction, const std::string& stage)>;

    Progress() = default;
    explicit Progress(Callback callback) : m_callback(std::move(callback)) {}

    /// Report progress; the fraction is clamped to [0, 1] and never goes backwards in a stage.
    void report(double fraction, const std::string& stage);
    /// Last reported fraction.
    double fraction() const { return m_fraction.load(); }
    /// Last reported stage text.
    std::string stage() const;

    /// A Progress that does nothing, for callers that do not watch.
    static Progress& none();

private:
    Callback m_callback;
    std::atomic<double> m_fraction{0.0};
    mutable std::mutex m_mutex;
    std::string m_stage;
};

} // namespace bitlens

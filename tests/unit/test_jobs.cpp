// Progress and CancelToken across threads: what a worker and the GUI thread do at once. Also
// built into the ThreadSanitizer configuration (tests/tsan), where a data race fails the test.

#include "jobs/progress.h"
#include "jobs/result.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace bitlens {
namespace {

TEST(Jobs, ProgressIsSafeToReadWhileWorkersReport)
{
    std::atomic<int> callbacks{0};
    Progress progress([&](double, const std::string& stage) {
        EXPECT_FALSE(stage.empty());
        callbacks.fetch_add(1, std::memory_order_relaxed);
    });
    std::atomic<bool> done{false};
    std::thread reader([&] {
        while (!done.load()) {
            const double f = progress.fraction();
            EXPECT_GE(f, 0.0);
            EXPECT_LE(f, 1.0);
            EXPECT_NE(progress.stage().size(), 1u);
        }
    });
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w)
        workers.emplace_back([&, w] {
            for (int i = 0; i <= 1000; ++i)
                progress.report(i / 1000.0, "worker " + std::to_string(w) + " batch");
        });
    for (auto& t : workers)
        t.join();
    done = true;
    reader.join();
    EXPECT_EQ(callbacks.load(), 4 * 1001);
    EXPECT_DOUBLE_EQ(progress.fraction(), 1.0);
}

TEST(Jobs, CancelFromAnotherThreadStopsEveryCopy)
{
    const CancelToken token;
    std::atomic<int> stopped{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w)
        workers.emplace_back([copy = token, &stopped] {
            while (!copy.cancelled())
                std::this_thread::yield();
            stopped.fetch_add(1);
        });
    std::thread canceller([&] { token.cancel(); });
    canceller.join();
    for (auto& t : workers)
        t.join();
    EXPECT_EQ(stopped.load(), 4);
    EXPECT_TRUE(CancelToken(token).cancelled());
    EXPECT_FALSE(CancelToken().cancelled());
}

TEST(Jobs, SilentProgressIsPerThread)
{
    // Progress::none() is thread-local: jobs on different threads never share its state.
    Progress* mine = &Progress::none();
    Progress* theirs = nullptr;
    std::thread other([&] {
        theirs = &Progress::none();
        for (int i = 0; i < 100; ++i)
            theirs->report(i / 100.0, "other");
    });
    for (int i = 0; i < 100; ++i)
        mine->report(i / 100.0, "mine");
    other.join();
    EXPECT_NE(mine, theirs);
    EXPECT_EQ(mine->stage(), "mine");
}

TEST(Jobs, ErrorsCarryTheirExitCodes)
{
    EXPECT_EQ(exitCode(ErrorCode::BadInput), 3);
    EXPECT_EQ(exitCode(ErrorCode::Unsupported), 4);
    EXPECT_EQ(Error::badInput("m.onnx", "truncated").userMessage(), "error: m.onnx: truncated");
}

} // namespace
} // namespace bitlens

// The one error boundary (jobs/guard.h, issue #40 item 4): every exception a guarded call can
// throw becomes the Error the rule says, with the boundary's path, code and words.

#include "jobs/guard.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <new>
#include <stdexcept>

using namespace bitlens;

namespace {

template <typename Throw>
Error caught(const Boundary& boundary, Throw&& thrower)
{
    Result<int> r = guarded<int>(boundary, [&]() -> int {
        thrower();
        return 1;
    });
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error{} : r.error();
}

} // namespace

TEST(Guard, ValuesAndResultsPassThrough)
{
    Result<int> value = guarded<int>(Boundary{}, [] { return 7; });
    ASSERT_TRUE(value.ok());
    EXPECT_EQ(*value, 7);
    Result<void> none = guarded<void>(Boundary{}, []() -> Result<void> { return {}; });
    EXPECT_TRUE(none.ok());
    Result<int> refused = guarded<int>(Boundary{}, []() -> Result<int> {
        return Error::unsupported("m.onnx", "op Foo");
    });
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error().code, ErrorCode::Unsupported);
}

TEST(Guard, EachExceptionByTheRule)
{
    const Boundary reading{.path = "m.onnx", .library = ErrorCode::BadInput};
    // An Error thrown deep in a call comes back as thrown.
    Error e = caught(reading, [] { throw ErrorException(Error::badInput("cfg", "key 'x'")); });
    EXPECT_EQ(e.code, ErrorCode::BadInput);
    EXPECT_EQ(e.path, "cfg");
    EXPECT_EQ(e.message, "key 'x'");
    // LibTorch: the boundary's code and prefix, without LibTorch's backtrace.
    e = caught(reading, [] { (void)at::zeros({2, 3}).view({7}); });
    EXPECT_EQ(e.code, ErrorCode::BadInput);
    EXPECT_EQ(e.path, "m.onnx");
    EXPECT_EQ(e.message.rfind("LibTorch failed: shape '[7]' is invalid", 0), 0u) << e.message;
    EXPECT_EQ(e.message.find("Exception raised from"), std::string::npos) << e.message;
    const Boundary running{.libraryPrefix = ""};
    e = caught(running, [] { (void)at::zeros({2, 3}).view({7}); });
    EXPECT_EQ(e.code, ErrorCode::Runtime);
    EXPECT_EQ(e.message.rfind("shape '[7]' is invalid", 0), 0u) << e.message;
    // Memory: runtime, saying what was being done.
    e = caught(Boundary{.path = "m", .oomWhile = "building the graph"},
               [] { throw std::bad_alloc(); });
    EXPECT_EQ(e.code, ErrorCode::Runtime);
    EXPECT_EQ(e.message, "out of memory while building the graph");
    EXPECT_EQ(caught(reading, [] { throw std::bad_alloc(); }).message, "out of memory");
    // A JSON value of the wrong type names the file where the boundary says which.
    const Boundary config{.path = "dir", .library = ErrorCode::BadInput, .jsonWhere = "config.json"};
    e = caught(config, [] { (void)nlohmann::json(3).get<std::string>(); });
    EXPECT_EQ(e.code, ErrorCode::BadInput);
    EXPECT_EQ(e.message.rfind("config.json: a value of the wrong type (", 0), 0u) << e.message;
    e = caught(running, [] { (void)nlohmann::json(3).get<std::string>(); });
    EXPECT_EQ(e.code, ErrorCode::Runtime);
    // Sizes read from a file, and op inputs that do not fit: bad input.
    e = caught(reading, [] { throw std::length_error("vector"); });
    EXPECT_EQ(e.code, ErrorCode::BadInput);
    EXPECT_EQ(e.message, "size out of range: vector");
    e = caught(running, [] { throw std::invalid_argument("Conv: input has 3 channels"); });
    EXPECT_EQ(e.code, ErrorCode::BadInput);
    EXPECT_EQ(e.message, "Conv: input has 3 channels");
    // Anything else: a runtime failure in its own words.
    e = caught(running, [] { throw std::runtime_error("disk"); });
    EXPECT_EQ(e.code, ErrorCode::Runtime);
    EXPECT_EQ(e.message, "disk");
    e = caught(running, [] { throw 42; });
    EXPECT_EQ(e.message, "an unknown exception");
}

#pragma once
// The one error boundary of core: a call that may throw (LibTorch, the allocator, nlohmann::json,
// the standard library) runs under guarded(), and whatever it throws becomes an Error by one rule
// (issue #40 item 4; five private helpers disagreed before):
//   ErrorException         its Error, as thrown (bad input found deep in a call tree)
//   std::bad_alloc         Runtime "out of memory[ while <oomWhile>]"
//   c10::Error             the boundary's `library` code: BadInput where the call reads the
//                          user's input (a file being parsed, a graph being built), Runtime
//                          elsewhere; "<libraryPrefix><what, without LibTorch's backtrace>"
//   nlohmann::json         with `jsonWhere`: the `library` code, "<jsonWhere>: a value of the
//                          wrong type (...)"; without, as any std::exception
//   std::length_error      BadInput "size out of range: ..." (a size read from a file)
//   std::invalid_argument  BadInput (an op's inputs do not fit it)
//   other std::exception   Runtime, its text
// Every Error carries the boundary's path. Torch-free: the translation lives in guard.cpp.

#include "jobs/result.h"

#include <exception>
#include <string>
#include <utility>

namespace bitlens {

/// Thrown with an Error already made (bad input found deep in a call); guarded() returns it.
struct ErrorException : std::exception {
    explicit ErrorException(Error e) : error(std::move(e)) {}
    const char* what() const noexcept override { return error.message.c_str(); }
    Error error;
};

/// Where a guarded call runs: the file it concerns and how a library error counts there.
struct Boundary {
    std::string path = {};                          ///< the file concerned ("" when none)
    ErrorCode library = ErrorCode::Runtime;         ///< code of a LibTorch / JSON type error
    std::string libraryPrefix = "LibTorch failed: "; ///< before a LibTorch error's text
    std::string oomWhile = {};                      ///< "building the graph", or ""
    std::string jsonWhere = {};                     ///< "config.json": names a JSON type error
};

/// The Error for the exception in flight (call from a catch block) at `boundary`.
Error errorFromException(std::exception_ptr thrown, const Boundary& boundary);

/// Runs `body` (returning a Result, or a value a Result is made from) and turns anything it
/// throws into an Error by the rule above.
template <typename R, typename Body>
Result<R> guarded(const Boundary& boundary, Body&& body)
{
    try {
        return body();
    } catch (...) {
        return errorFromException(std::current_exception(), boundary);
    }
}

} // namespace bitlens

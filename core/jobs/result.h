#pragma once
// Result<T>: a value or an Error. Expected failures (bad files, unsupported ops, cancellation)
// travel as values; exceptions from LibTorch are caught at the core boundary and converted.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace bitlens {

/// What kind of failure; the numeric value of the first four is the CLI exit code.
enum class ErrorCode {
    Usage = 2,        ///< the caller asked for something malformed (bad flag, bad scheme string)
    BadInput = 3,     ///< a file or data set is truncated, corrupt, or does not fit
    Unsupported = 4,  ///< a valid model that uses an op, type or feature BitLens does not support
    Runtime = 5,      ///< anything that failed while computing (out of memory, device error)
    Cancelled = 6,    ///< the user cancelled a job; never reaches the CLI's exit code
};

/// The CLI exit code for an error code (Cancelled reports as a runtime failure).
int exitCode(ErrorCode code);

/// A failure a user can read: what failed (path, optional byte offset) and why.
struct Error {
    ErrorCode code = ErrorCode::Runtime;
    std::string message;                 ///< the reason, in words, without the path
    std::string path;                    ///< the file concerned, empty when none
    std::optional<std::uint64_t> offset; ///< byte offset into `path` where the problem was seen

    /// "error: <path>: <reason>" (or "error: <reason>" without a path), as the CLI prints it.
    std::string userMessage() const;
    /// "<path>: <reason>" without the "error: " prefix, for dialogs and nested messages.
    std::string describe() const;

    static Error badInput(std::string path, std::string message,
                          std::optional<std::uint64_t> offset = std::nullopt);
    static Error unsupported(std::string path, std::string message);
    static Error usage(std::string message);
    static Error runtime(std::string message, std::string path = {});
    static Error cancelled();
};

/// Either a T or an Error; check with ok() / operator bool before value().
template <typename T>
class [[nodiscard]] Result {
public:
    using value_type = T;
    Result(T value) : m_data(std::in_place_index<0>, std::move(value)) {}
    Result(Error error) : m_data(std::in_place_index<1>, std::move(error)) {}

    bool ok() const { return m_data.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(m_data); }
    const T& value() const& { return std::get<0>(m_data); }
    T&& value() && { return std::get<0>(std::move(m_data)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

    const Error& error() const { return std::get<1>(m_data); }

private:
    std::variant<T, Error> m_data;
};

/// Result of an operation that yields nothing but may fail.
template <>
class [[nodiscard]] Result<void> {
public:
    using value_type = void;
    Result() = default;
    Result(Error error) : m_error(std::move(error)) {}
    bool ok() const { return !m_error.has_value(); }
    explicit operator bool() const { return ok(); }
    const Error& error() const { return *m_error; }

private:
    std::optional<Error> m_error;
};

} // namespace bitlens

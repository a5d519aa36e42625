#include "jobs/result.h"

namespace bitlens {

int exitCode(ErrorCode code)
{
    return code == ErrorCode::Cancelled ? static_cast<int>(ErrorCode::Runtime)
                                        : static_cast<int>(code);
}

std::string Error::describe() const
{
    std::string text = path.empty() ? message : path + ": " + message;
    if (offset)
        text += " (at byte " + std::to_string(*offset) + ")";
    return text;
}

std::string Error::userMessage() const { return "error: " + describe(); }

Error Error::badInput(std::string path, std::string message, std::optional<std::uint64_t> offset)
{
    return Error{ErrorCode::BadInput, std::move(message), std::move(path), offset};
}

Error Error::unsupported(std::string path, std::string message)
{
    return Error{ErrorCode::Unsupported, std::move(message), std::move(path), std::nullopt};
}

Error Error::usage(std::string message)
{
    return Error{ErrorCode::Usage, std::move(message), {}, std::nullopt};
}

Error Error::runtime(std::string message, std::string path)
{
    return Error{ErrorCode::Runtime, std::move(message), std::move(path), std::nullopt};
}

Error Error::cancelled() { return Error{ErrorCode::Cancelled, "cancelled", {}, std::nullopt}; }

} // namespace bitlens

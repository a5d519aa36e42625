#include "jobs/result.h"

namespace bitlens {

int exitCode(ErrorCode code)
{
    return code == ErrorCode::Cancelled ? static_cast<int>(ErrorCode::Runtime)
                                        : static_cast<int>(code);
}

namespace {

/// `text` with control bytes (a NUL in a GGUF key, an escape sequence in a file name) written as
/// \xNN, so a message is never cut at a NUL nor drives the terminal; UTF-8 stays as it is. In a
/// message newlines and tabs stay too; in a path (`inPath`) they are written \n and \t, so the
/// path reads as one and "error: <path>: <reason>" stays one line.
std::string printable(const std::string& text, bool inPath = false)
{
    static const char* kHex = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (const char ch : text) {
        const auto c = static_cast<unsigned char>(ch);
        if (inPath && (c == '\n' || c == '\t')) {
            out += c == '\n' ? "\\n" : "\\t";
        } else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        } else {
            out += ch;
        }
    }
    return out;
}

} // namespace

std::string Error::describe() const
{
    std::string text =
        path.empty() ? printable(message) : printable(path, true) + ": " + printable(message);
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

#pragma once
// Typed reads of keys in JSON files a user hands us (config.json, tokenizer.json): a value of
// the wrong type is bad input naming the file and the key ("key 'model.unk_token': expected a
// string, got number"), never nlohmann's type_error escaping as an internal failure. The
// readers throw JsonTypeError, which the loader that knows the file turns into its Error with
// readingJson(); null counts as absent (Hugging Face writes null for unset options).

#include "jobs/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace bitlens::io {

/// A key whose value has the wrong type: "key 'model.unk_token': expected a string, got number".
class JsonTypeError : public std::runtime_error {
public:
    explicit JsonTypeError(const std::string& message) : std::runtime_error(message) {}
};

/// "object", "array", "string", "number", "boolean", "null": the JSON name of `value`'s type.
std::string jsonTypeName(const nlohmann::json& value);

/// The dotted name of `key` under `where` ("model" + "unk_token" = "model.unk_token").
std::string jsonKeyName(const std::string& where, const std::string& key);

/// `obj[key]` as a string, `fallback` when `obj` has no such key (or it is null). Throws
/// JsonTypeError when the value is not a string; `where` names the object in the message.
std::string jsonString(const nlohmann::json& obj, const std::string& key,
                       const std::string& fallback, const std::string& where = {});
/// Same for true / false.
bool jsonBool(const nlohmann::json& obj, const std::string& key, bool fallback,
              const std::string& where = {});
/// Same for a whole number (a float with no fraction counts).
std::int64_t jsonInt(const nlohmann::json& obj, const std::string& key, std::int64_t fallback,
                     const std::string& where = {});

/// Runs `read` (returning a Result), turning a JsonTypeError, or a nlohmann type_error that no
/// typed reader caught, into Error::badInput(path, ...): the file is named, exit code 3.
template <typename F>
auto readingJson(const std::string& path, F&& read) -> decltype(read())
{
    try {
        return read();
    } catch (const JsonTypeError& e) {
        return Error::badInput(path, e.what());
    } catch (const nlohmann::json::type_error& e) {
        return Error::badInput(path, std::string("a value of the wrong type (") + e.what() +
                                         ")");
    }
}

} // namespace bitlens::io

#include "io/json_read.h"

#include <cmath>

namespace bitlens::io {

using nlohmann::json;

namespace {

/// obj[key] when obj is an object holding a non-null key, else nullptr.
const json* lookup(const json& obj, const std::string& key)
{
    if (!obj.is_object())
        return nullptr;
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
}

[[noreturn]] void wrongType(const std::string& where, const std::string& key,
                            const char* expected, const json& got)
{
    // A number of the wrong kind (1.5 for a whole number) is shown as it is written.
    throw JsonTypeError("key '" + jsonKeyName(where, key) + "': expected " + expected +
                        ", got " + (got.is_number() ? got.dump() : jsonTypeName(got)));
}

} // namespace

std::string jsonTypeName(const json& value)
{
    switch (value.type()) {
    case json::value_t::object: return "object";
    case json::value_t::array: return "array";
    case json::value_t::string: return "string";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "number";
    case json::value_t::null: return "null";
    default: return "a value of another kind";
    }
}

std::string jsonKeyName(const std::string& where, const std::string& key)
{
    return where.empty() ? key : where + "." + key;
}

std::string jsonString(const json& obj, const std::string& key, const std::string& fallback,
                       const std::string& where)
{
    const json* v = lookup(obj, key);
    if (v == nullptr)
        return fallback;
    if (!v->is_string())
        wrongType(where, key, "a string", *v);
    return v->get<std::string>();
}

bool jsonBool(const json& obj, const std::string& key, bool fallback, const std::string& where)
{
    const json* v = lookup(obj, key);
    if (v == nullptr)
        return fallback;
    if (!v->is_boolean())
        wrongType(where, key, "true or false", *v);
    return v->get<bool>();
}

std::int64_t jsonInt(const json& obj, const std::string& key, std::int64_t fallback,
                     const std::string& where)
{
    const json* v = lookup(obj, key);
    if (v == nullptr)
        return fallback;
    if (v->is_number_integer() && !(v->is_number_unsigned() &&
                                    v->get<std::uint64_t>() > std::uint64_t{INT64_MAX}))
        return v->get<std::int64_t>();
    if (v->is_number_float()) {
        const double d = v->get<double>();
        // 2^63 as a double is the first value outside int64.
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2233720368547758e18)
            return static_cast<std::int64_t>(d);
    }
    wrongType(where, key, "a whole number", *v);
}

} // namespace bitlens::io

#include "text/hf_json.h"

#include "io/json_read.h"

#include <nlohmann/json.hpp>

namespace bitlens::text::hf {

using nlohmann::json;

Result<std::vector<AddedToken>> parseAddedTokens(const json& root, const std::string& path)
{
    std::vector<AddedToken> out;
    const auto it = root.find("added_tokens");
    if (it == root.end() || it->is_null())
        return out;
    if (!it->is_array())
        return Error::badInput(path, "\"added_tokens\" is not an array");
    if (it->size() > kMaxVocabSize)
        return Error::badInput(path, "more than 4Mi added tokens");
    for (const auto& t : *it) {
        if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
            !t.contains("content") || !t["content"].is_string())
            return Error::badInput(path, "an added token without an integer \"id\" and a "
                                         "\"content\" string");
        const auto id = t["id"].get<std::int64_t>();
        if (id < 0 || id >= static_cast<std::int64_t>(kMaxVocabSize))
            return Error::badInput(path, "added token id " + std::to_string(id) +
                                             " is out of range");
        AddedToken a;
        a.id = static_cast<std::int32_t>(id);
        a.content = t["content"].get<std::string>();
        a.special = io::jsonBool(t, "special", false, "added_tokens");
        a.lstrip = io::jsonBool(t, "lstrip", false, "added_tokens");
        a.rstrip = io::jsonBool(t, "rstrip", false, "added_tokens");
        a.singleWord = io::jsonBool(t, "single_word", false, "added_tokens");
        if (a.content.empty())
            return Error::badInput(path, "an added token with empty content");
        out.push_back(std::move(a));
    }
    return out;
}

namespace {

Result<void> addProcessor(const json& p, const std::string& path,
                          const std::function<std::optional<std::int32_t>(const std::string&)>& lookup,
                          SpecialFrame& frame)
{
    if (p.is_null())
        return {};
    if (!p.is_object())
        return Error::badInput(path, "\"post_processor\" is not an object");
    const std::string type = io::jsonString(p, "type", "", "post_processor");
    // [token, id] pairs of BertProcessing / RobertaProcessing.
    auto pairId = [&](const char* key) -> Result<std::int32_t> {
        const auto it = p.find(key);
        if (it == p.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer())
            return Error::badInput(path, std::string("post_processor \"") + key +
                                             "\" is not a [token, id] pair");
        return (*it)[1].get<std::int32_t>();
    };
    if (type == "ByteLevel")
        return {};
    if (type == "BertProcessing" || type == "RobertaProcessing") {
        auto cls = pairId("cls");
        if (!cls)
            return cls.error();
        auto sep = pairId("sep");
        if (!sep)
            return sep.error();
        frame.prefix.push_back(*cls);
        frame.suffix.insert(frame.suffix.begin(), *sep);
        return {};
    }
    if (type == "Sequence") {
        const auto list = p.find("processors");
        if (list == p.end() || !list->is_array())
            return Error::badInput(path, "post_processor Sequence without \"processors\"");
        for (const auto& sub : *list)
            if (auto r = addProcessor(sub, path, lookup, frame); !r)
                return r;
        return {};
    }
    if (type == "TemplateProcessing") {
        const auto single = p.find("single");
        if (single == p.end() || !single->is_array())
            return Error::badInput(path, "TemplateProcessing without a \"single\" template");
        std::map<std::string, std::vector<std::int32_t>> specials;
        if (auto s = p.find("special_tokens"); s != p.end() && s->is_object())
            for (const auto& [name, entry] : s->items())
                if (entry.is_object() && entry.contains("ids") && entry["ids"].is_array())
                    for (const auto& id : entry["ids"])
                        if (id.is_number_integer())
                            specials[name].push_back(id.get<std::int32_t>());
        bool seenSequence = false;
        SpecialFrame local;
        for (const auto& piece : *single) {
            if (piece.contains("Sequence")) {
                if (seenSequence)
                    return Error::unsupported(path, "a single-sequence template with two "
                                                    "sequences");
                seenSequence = true;
                continue;
            }
            const auto tok = piece.find("SpecialToken");
            if (tok == piece.end() || !tok->is_object() || !tok->contains("id") ||
                !(*tok)["id"].is_string())
                return Error::badInput(path, "TemplateProcessing piece is neither a Sequence "
                                             "nor a SpecialToken");
            const std::string name = (*tok)["id"].get<std::string>();
            std::vector<std::int32_t> ids;
            if (auto s = specials.find(name); s != specials.end()) {
                ids = s->second;
            } else if (auto id = lookup(name)) {
                ids.push_back(*id);
            } else {
                return Error::badInput(path, "template token '" + name +
                                                 "' is not in the vocabulary");
            }
            auto& dst = seenSequence ? local.suffix : local.prefix;
            dst.insert(dst.end(), ids.begin(), ids.end());
        }
        frame.prefix.insert(frame.prefix.end(), local.prefix.begin(), local.prefix.end());
        frame.suffix.insert(frame.suffix.begin(), local.suffix.begin(), local.suffix.end());
        return {};
    }
    return Error::unsupported(path, "post_processor type '" + type + "'");
}

} // namespace

Result<SpecialFrame> parsePostProcessor(
    const json& root, const std::string& path,
    const std::function<std::optional<std::int32_t>(const std::string&)>& lookup)
{
    SpecialFrame frame;
    const auto it = root.find("post_processor");
    if (it == root.end())
        return frame;
    if (auto r = addProcessor(*it, path, lookup, frame); !r)
        return r.error();
    return frame;
}

} // namespace bitlens::text::hf

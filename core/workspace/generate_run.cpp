#include "workspace/generate_run.h"

#include "exec/executor.h"
#include "kernels/cpu_features.h"
#include "quant/engine.h"
#include "quant/real_kernels.h"
#include "text/tokenizer.h"
#include "workspace/workspace_state.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace bitlens::workspace {

namespace {

namespace fs = std::filesystem;

/// eos_token_id of one JSON file: absent (nullopt), a number or a list of numbers.
Result<std::optional<std::vector<std::int32_t>>> eosOf(const fs::path& file)
{
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
        return std::optional<std::vector<std::int32_t>>();
    std::ifstream in(file);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(file.string(), std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null())
        return std::optional<std::vector<std::int32_t>>();
    const nlohmann::json& v = j["eos_token_id"];
    auto bad = [&]() {
        return Error::badInput(file.string(), "key 'eos_token_id': expected a token id or a "
                                              "list of them, got " +
                                                  std::string(v.type_name()));
    };
    std::vector<std::int32_t> ids;
    if (v.is_number_integer()) {
        ids.push_back(v.get<std::int32_t>());
    } else if (v.is_array()) {
        for (const auto& e : v) {
            if (!e.is_number_integer())
                return bad();
            ids.push_back(e.get<std::int32_t>());
        }
    } else {
        return bad();
    }
    return std::optional(ids);
}

Continuation continuation(const std::string& label, const model::Generation& g,
                          const text::Tokenizer& tokenizer)
{
    Continuation c;
    c.label = label;
    c.ids = g.ids;
    for (const std::int32_t id : g.ids)
        c.tokens.push_back(tokenizer.decode(std::span(&id, 1), false));
    c.text = tokenizer.decode(g.ids, true);
    c.stopReason = g.stopReason;
    c.promptTokens = g.promptTokens;
    c.prefillSeconds = g.prefillSeconds;
    c.prefillTokensPerS = g.prefillTokensPerS();
    c.decodeSteps = g.decodeSteps;
    c.decodeSeconds = g.decodeSeconds;
    c.decodeTokensPerS = g.decodeTokensPerS();
    return c;
}

nlohmann::json continuationJson(const Continuation& c, bool withKernels)
{
    nlohmann::json j = {{"label", c.label},
                        {"ids", c.ids},
                        {"tokens", c.tokens},
                        {"text", c.text},
                        {"stop_reason", c.stopReason},
                        {"prompt_tokens", c.promptTokens},
                        {"prefill_seconds", c.prefillSeconds},
                        {"prefill_tokens_per_s", c.prefillTokensPerS},
                        {"decode_steps", c.decodeSteps},
                        {"decode_seconds", c.decodeSeconds},
                        {"decode_tokens_per_s", c.decodeTokensPerS}};
    if (withKernels)
        j["kernels"] = c.kernels;
    return j;
}

} // namespace

Result<std::vector<std::int32_t>> stopTokenIds(const Model& model)
{
    std::error_code ec;
    const fs::path path(model.path());
    const fs::path dir = fs::is_directory(path, ec) ? path : path.parent_path();
    if (model.format() != "gguf") {
        for (const char* name : {"generation_config.json", "config.json"}) {
            auto ids = eosOf(dir / name);
            if (!ids)
                return ids.error();
            if (*ids)
                return **ids;
        }
    }
    if (model.tokenizer() && model.tokenizer()->eosId())
        return std::vector<std::int32_t>{*model.tokenizer()->eosId()};
    return std::vector<std::int32_t>();
}

Result<GenerateComparison> generateCompare(
    Workspace& ws, const GenerateRequest& request, Progress& progress, const CancelToken& cancel,
    const std::function<void(bool quantized, std::int32_t id)>& onToken)
{
    const Model& m = *ws.model();
    if (auto ok = model::checkDecodable(m.graph(), m.path()); !ok)
        return ok.error();
    if (!m.tokenizer())
        return Error::unsupported(m.path(), "generation needs the model's tokenizer "
                                            "(tokenizer.json beside the weights, or a GGUF "
                                            "vocabulary)");
    const text::Tokenizer& tokenizer = *m.tokenizer();
    GenerateComparison out;
    out.modelPath = m.path();
    out.scheme = request.run.scheme;
    out.prompt = request.prompt;
    out.options = request.options;
    const text::Encoding enc = tokenizer.encode(request.prompt);
    out.promptIds = enc.ids;
    if (out.promptIds.empty())
        return Error::usage("the prompt is empty (no tokens)");
    auto stops = stopTokenIds(m);
    if (!stops)
        return stops.error();
    out.stopIds = *stops;
    out.options.stopIds = out.stopIds;
    out.options.keepLogits = true;

    progress.report(0.0, "preparing " + request.run.scheme);
    auto q = prepared(ws, request.run, progress, cancel);
    if (!q)
        return q.error();
    const std::shared_ptr<const quant::QuantizedModel> qm = std::move(q).value();

    return detail::guarded(ws, [&]() -> Result<GenerateComparison> {
        out.threads = at::get_num_threads();
        out.cpu = kernels::cpuModelName();
        out.isa = kernels::isaName(kernels::isaLevel());
        progress.report(0.3, "generating with float32");
        auto floatDecoder = model::Decoder::create(m.graph(), {}, m.path());
        if (!floatDecoder)
            return floatDecoder.error();
        auto fg = model::generate(**floatDecoder, out.promptIds, out.options,
                                  [&](std::int32_t id) {
                                      if (onToken)
                                          onToken(false, id);
                                  },
                                  cancel);
        if (!fg)
            return fg.error();
        out.floatRun = continuation("float32", *fg, tokenizer);

        progress.report(0.6, "generating with " + request.run.scheme);
        auto hook = quant::makeRealKernelHook(*qm, c10::Device(c10::kCPU));
        auto quantDecoder = model::Decoder::create(qm->graph, {hook}, m.path());
        if (!quantDecoder)
            return quantDecoder.error();
        model::GenerateOptions quantOptions = out.options;
        quantOptions.keepLogits = false;
        auto qg = model::generate(**quantDecoder, out.promptIds, quantOptions,
                                  [&](std::int32_t id) {
                                      if (onToken)
                                          onToken(true, id);
                                  },
                                  cancel);
        if (!qg)
            return qg.error();
        out.quantRun = continuation(request.run.scheme, *qg, tokenizer);
        out.quantRun.kernels = hook->kernelsRun();

        const auto& a = out.floatRun.ids;
        const auto& b = out.quantRun.ids;
        const auto common = std::min(a.size(), b.size());
        const auto diff = std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(common),
                                        b.begin());
        if (diff.first != a.begin() + static_cast<std::ptrdiff_t>(common) || a.size() != b.size())
            out.firstDivergence = diff.first - a.begin();

        // The quantized model on the float tokens, as it decodes (the prompt pass, then one
        // float token at a time): the distribution each float token was picked from. One
        // token at a time, not one window, so a dynamic per-tensor activation range sees the
        // rows it sees while generating.
        progress.report(0.9, "scoring " + request.run.scheme + " on the float tokens");
        (*quantDecoder)->reset();
        auto scored = (*quantDecoder)->append(out.promptIds);
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (!scored)
                return scored.error();
            if (cancel.cancelled())
                return Error::cancelled();
            out.kld.push_back(model::klDivergence(fg->logits[i], *scored));
            if (i + 1 < a.size())
                scored = (*quantDecoder)->append(std::span(&a[i], 1));
        }
        if (!out.kld.empty()) {
            double sum = 0.0;
            for (const double k : out.kld)
                sum += k;
            out.meanKld = sum / static_cast<double>(out.kld.size());
            out.maxKld = *std::max_element(out.kld.begin(), out.kld.end());
        }
        progress.report(1.0, "done");
        return out;
    });
}

nlohmann::json generateToJson(const GenerateComparison& c)
{
    nlohmann::json j = {{"model", c.modelPath},
                        {"scheme", c.scheme},
                        {"prompt", c.prompt},
                        {"prompt_ids", c.promptIds},
                        {"stop_ids", c.stopIds},
                        {"max_tokens", c.options.maxTokens},
                        {"sampling",
                         {{"temperature", c.options.sampling.temperature},
                          {"top_k", c.options.sampling.topK},
                          {"top_p", c.options.sampling.topP},
                          {"seed", c.options.sampling.seed}}},
                        {"threads", c.threads},
                        {"cpu", c.cpu},
                        {"isa", c.isa},
                        {"float", continuationJson(c.floatRun, false)},
                        {"quantized", continuationJson(c.quantRun, true)},
                        {"kld", c.kld},
                        {"mean_kld", c.meanKld},
                        {"max_kld", c.maxKld}};
    j["first_divergence"] =
        c.firstDivergence ? nlohmann::json(*c.firstDivergence) : nlohmann::json(nullptr);
    return j;
}

} // namespace bitlens::workspace

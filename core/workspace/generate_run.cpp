#include "workspace/generate_run.h"

#include "exec/executor.h"
#include "kernels/cpu_features.h"
#include "quant/engine.h"
#include "quant/real_kernels.h"
#include "text/tokenizer.h"
#include "workspace/workspace_state.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

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

/// The `k` most likely tokens of a logit row, most likely first (a tie: the lower id), with
/// their softmax probabilities.
std::vector<TokenProbability> mostLikely(std::span<const float> logits, int k,
                                         const text::Tokenizer& tokenizer)
{
    std::vector<TokenProbability> out;
    if (k <= 0 || logits.empty())
        return out;
    const float top = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (const float l : logits)
        sum += std::exp(static_cast<double>(l) - top);
    std::vector<std::int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(k), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](std::int32_t x, std::int32_t y) {
                          const float lx = logits[static_cast<std::size_t>(x)];
                          const float ly = logits[static_cast<std::size_t>(y)];
                          return lx > ly || (lx == ly && x < y);
                      });
    for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t id = ids[i];
        out.push_back({id, tokenizer.decode(std::span(&id, 1), false),
                       std::exp(static_cast<double>(logits[static_cast<std::size_t>(id)]) - top) /
                           sum});
    }
    return out;
}

nlohmann::json topJson(const std::vector<TokenProbability>& top)
{
    nlohmann::json j = nlohmann::json::array();
    for (const TokenProbability& t : top)
        j.push_back({{"id", t.id}, {"token", t.token}, {"p", t.probability}});
    return j;
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

Result<void> checkGenerate(const Workspace& ws)
{
    const Model& m = *ws.model();
    if (auto ok = model::checkDecodable(m.graph(), m.path()); !ok)
        return ok.error();
    if (!m.tokenizer())
        return Error::unsupported(m.path(), "generation needs the model's tokenizer "
                                            "(tokenizer.json beside the weights, or a GGUF "
                                            "vocabulary)");
    return {};
}

Result<GenerateComparison> generateCompare(Workspace& ws, const GenerateRequest& request,
                                           Progress& progress, const CancelToken& cancel,
                                           const GenerateObserver& observer)
{
    if (auto ok = checkGenerate(ws); !ok)
        return ok.error();
    // A scheme that does not parse fails now, not after the float continuation.
    if (auto ok = checkRun(request.run); !ok)
        return ok.error();
    const Model& m = *ws.model();
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
    const auto maxTokens = static_cast<double>(std::max<std::int64_t>(1, out.options.maxTokens));

    // One model's generation, each token timed from the start of its prompt pass and handed
    // to the observer as it is picked; progress moves over [begin, end] with the tokens.
    const auto generateWith = [&](model::Decoder& decoder, const model::GenerateOptions& options,
                                  bool quantized, double begin, double end,
                                  const std::string& stage) {
        const auto started = std::chrono::steady_clock::now();
        std::int64_t index = 0;
        return model::generate(
            decoder, out.promptIds, options,
            [&](std::int32_t id) {
                if (observer.onToken) {
                    GeneratedToken t;
                    t.quantized = quantized;
                    t.index = index;
                    t.id = id;
                    t.token = tokenizer.decode(std::span(&id, 1), false);
                    t.promptTokens = static_cast<std::int64_t>(out.promptIds.size());
                    t.elapsedSeconds = std::chrono::duration<double>(
                                           std::chrono::steady_clock::now() - started)
                                           .count();
                    observer.onToken(t);
                }
                ++index;
                progress.report(begin + (end - begin) * static_cast<double>(index) / maxTokens,
                                stage);
            },
            cancel);
    };

    // The float continuation first: it needs no preparation, so its tokens stream while the
    // quantized model is still to be made.
    std::optional<model::Generation> fg;
    auto floatDone = detail::guarded(ws, [&]() -> Result<void> {
        out.threads = at::get_num_threads();
        out.cpu = kernels::cpuModelName();
        out.isa = kernels::isaName(kernels::isaLevel());
        progress.report(0.0, "generating with float32");
        auto floatDecoder = model::Decoder::create(m.graph(), {}, m.path());
        if (!floatDecoder)
            return floatDecoder.error();
        auto g = generateWith(**floatDecoder, out.options, false, 0.0, 0.3,
                              "generating with float32");
        if (!g)
            return g.error();
        fg = std::move(g).value();
        out.floatRun = continuation("float32", *fg, tokenizer);
        return {};
    });
    if (!floatDone)
        return floatDone.error();
    if (observer.onContinuation)
        observer.onContinuation(out.floatRun, false);

    Progress prepareProgress = detail::subProgress(progress, 0.3, 0.5);
    prepareProgress.report(0.0, "preparing " + request.run.scheme);
    auto q = prepared(ws, request.run, prepareProgress, cancel);
    if (!q)
        return q.error();
    const std::shared_ptr<const quant::QuantizedModel> qm = std::move(q).value();

    return detail::guarded(ws, [&]() -> Result<GenerateComparison> {
        const std::string stage = "generating with " + request.run.scheme;
        progress.report(0.5, stage);
        auto hook = quant::makeRealKernelHook(*qm, c10::Device(c10::kCPU));
        auto quantDecoder = model::Decoder::create(qm->graph, {hook}, m.path());
        if (!quantDecoder)
            return quantDecoder.error();
        model::GenerateOptions quantOptions = out.options;
        quantOptions.keepLogits = false;
        auto qg = generateWith(**quantDecoder, quantOptions, true, 0.5, 0.8, stage);
        if (!qg)
            return qg.error();
        out.quantRun = continuation(request.run.scheme, *qg, tokenizer);
        out.quantRun.kernels = hook->kernelsRun();
        if (observer.onContinuation)
            observer.onContinuation(out.quantRun, true);

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
        const std::string scoring = "scoring " + request.run.scheme + " on the float tokens";
        progress.report(0.8, scoring);
        (*quantDecoder)->reset();
        auto scored = (*quantDecoder)->append(out.promptIds);
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (!scored)
                return scored.error();
            if (cancel.cancelled())
                return Error::cancelled();
            ScoredToken s;
            s.index = static_cast<std::int64_t>(i);
            s.kld = model::klDivergence(fg->logits[i], *scored);
            s.floatTop = mostLikely(fg->logits[i], request.topTokens, tokenizer);
            s.quantTop = mostLikely(*scored, request.topTokens, tokenizer);
            out.kld.push_back(s.kld);
            out.floatTop.push_back(s.floatTop);
            out.quantTop.push_back(s.quantTop);
            if (observer.onScored)
                observer.onScored(s);
            progress.report(0.8 + 0.2 * static_cast<double>(i + 1) /
                                      static_cast<double>(a.size()),
                            scoring);
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

Result<GenerateComparison> generateCompare(
    Workspace& ws, const GenerateRequest& request, Progress& progress, const CancelToken& cancel,
    const std::function<void(bool quantized, std::int32_t id)>& onToken)
{
    GenerateObserver observer;
    if (onToken)
        observer.onToken = [&onToken](const GeneratedToken& t) { onToken(t.quantized, t.id); };
    return generateCompare(ws, request, progress, cancel, observer);
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
    nlohmann::json top = nlohmann::json::array();
    for (std::size_t i = 0; i < c.floatTop.size() && i < c.quantTop.size(); ++i)
        top.push_back({{"float", topJson(c.floatTop[i])}, {"quantized", topJson(c.quantTop[i])}});
    j["top"] = std::move(top);
    j["first_divergence"] =
        c.firstDivergence ? nlohmann::json(*c.firstDivergence) : nlohmann::json(nullptr);
    return j;
}

} // namespace bitlens::workspace

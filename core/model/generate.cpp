#include "model/generate.h"

#include "exec/executor.h"
#include "ir/graph.h"
#include "kernels/lowbit.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>

namespace bitlens::model {

// ---- Sampler ----------------------------------------------------------------------------------

Sampler::Sampler(SamplingOptions options) : m_options(options), m_rng(options.seed) {}

std::int32_t Sampler::next(std::span<const float> logits)
{
    const auto vocab = static_cast<std::int64_t>(logits.size());
    if (vocab == 0)
        return 0;
    if (!(m_options.temperature > 0.0)) {
        // Greedy: the first of equal maxima, as torch.argmax gives it.
        std::int64_t best = 0;
        for (std::int64_t i = 1; i < vocab; ++i)
            if (logits[static_cast<std::size_t>(i)] > logits[static_cast<std::size_t>(best)])
                best = i;
        return static_cast<std::int32_t>(best);
    }
    // transformers' order: temperature, then top-k, then top-p, then one draw.
    std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    auto higher = [&](std::int32_t a, std::int32_t b) {
        const float la = logits[static_cast<std::size_t>(a)];
        const float lb = logits[static_cast<std::size_t>(b)];
        return la > lb || (la == lb && a < b);
    };
    std::int64_t kept = vocab;
    if (m_options.topK > 0 && m_options.topK < vocab) {
        kept = m_options.topK;
        std::partial_sort(order.begin(), order.begin() + kept, order.end(), higher);
    } else {
        std::sort(order.begin(), order.end(), higher);
    }
    const double top = logits[static_cast<std::size_t>(order[0])] / m_options.temperature;
    std::vector<double> probs(static_cast<std::size_t>(kept));
    double total = 0.0;
    for (std::int64_t i = 0; i < kept; ++i) {
        const double l = logits[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
        probs[static_cast<std::size_t>(i)] = std::exp(l / m_options.temperature - top);
        total += probs[static_cast<std::size_t>(i)];
    }
    if (m_options.topP < 1.0) {
        // The smallest head of the sorted tokens whose probability reaches topP (at least one).
        double sum = 0.0;
        std::int64_t head = 0;
        while (head < kept) {
            sum += probs[static_cast<std::size_t>(head)] / total;
            ++head;
            if (sum >= m_options.topP)
                break;
        }
        kept = head;
        total = std::accumulate(probs.begin(), probs.begin() + kept, 0.0);
    }
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(m_rng) * total;
    double sum = 0.0;
    for (std::int64_t i = 0; i < kept; ++i) {
        sum += probs[static_cast<std::size_t>(i)];
        if (u < sum)
            return order[static_cast<std::size_t>(i)];
    }
    return order[static_cast<std::size_t>(kept - 1)];
}

// ---- KV cache ---------------------------------------------------------------------------------

namespace {

enum class Role { Positions, KeyPositions, Key, Value };

/// The value a node name plays for the cache, or nothing.
std::optional<Role> roleOf(const std::string& name)
{
    if (name == "positions")
        return Role::Positions;
    if (name == "causal_mask.cols" || name == "sliding_mask.cols")
        return Role::KeyPositions;
    if (name.starts_with("layer.") && name.ends_with(".attn.k_groups"))
        return Role::Key;
    if (name.starts_with("layer.") && name.ends_with(".attn.v_groups"))
        return Role::Value;
    return std::nullopt;
}

/// Rewrites the position and K / V values of a run (see the header) and keeps K / V.
class KvCacheHook final : public exec::NodeHook {
public:
    std::int64_t past = 0;    ///< positions cached by runs that completed
    std::int64_t pending = 0; ///< positions of the run in flight

    void afterNode(const ir::Node& node, std::vector<at::Tensor>& outputs) override
    {
        if (outputs.empty() || !outputs[0].defined())
            return;
        const auto role = roleOf(node.name);
        if (!role)
            return;
        at::Tensor& x = outputs[0];
        switch (*role) {
        case Role::Positions:
            pending = x.size(0);
            x = at::arange(past, past + pending, x.options());
            break;
        case Role::KeyPositions:
            x = at::arange(0, past + pending, x.options()).unsqueeze(0);
            break;
        case Role::Key:
        case Role::Value: x = append(m_buffers[node.name], x); break;
        }
    }

    void reset()
    {
        past = 0;
        pending = 0;
        m_buffers.clear();
    }

private:
    /// x [B, kvHeads, 1, S, headDim] written after the `past` cached positions of `buffer`
    /// (grown by doubling); returns the cached positions and x, a view of the buffer.
    at::Tensor append(at::Tensor& buffer, const at::Tensor& x)
    {
        const std::int64_t s = x.size(3);
        const std::int64_t need = past + s;
        bool fits = buffer.defined() && buffer.dim() == x.dim() && buffer.size(3) >= need &&
                    buffer.scalar_type() == x.scalar_type();
        for (std::int64_t d = 0; fits && d < x.dim(); ++d)
            fits = d == 3 || buffer.size(d) == x.size(d);
        if (!fits) {
            auto shape = x.sizes().vec();
            shape[3] = std::max<std::int64_t>(
                {need, buffer.defined() ? 2 * buffer.size(3) : 0, std::int64_t{64}});
            at::Tensor grown = at::empty(shape, x.options());
            if (past > 0 && buffer.defined())
                grown.narrow(3, 0, past).copy_(buffer.narrow(3, 0, past));
            buffer = grown;
        }
        buffer.narrow(3, past, s).copy_(x);
        return buffer.narrow(3, 0, need);
    }

    std::map<std::string, at::Tensor> m_buffers;
};

/// The float32 projections of a decode step (x [.., K] of at most kMaxRows rows times a weight
/// read as W^T, W [N, K] row-major: hf_builders' Linear) on BitLens's own GEMV row
/// (kernels::float32Gemm): LibTorch's matmul of one row reaches MKL's GEMV, whose generic path
/// on an AMD CPU reads the weights at a third of memory speed (bench/RESULTS.md). A node that
/// an earlier hook computes (a quantized layer's real kernel) never gets here; anything else
/// (more rows: the prompt pass; other layouts, types or devices; the scalar level, whose
/// reference row is slower than LibTorch) is left to the executor.
class FloatGemvHook final : public exec::NodeHook {
public:
    static constexpr std::int64_t kMaxRows = 4;

    bool computeNode(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                     std::vector<at::Tensor>& outputs) override
    {
        if (node.op != ir::OpKind::MatMul || inputs.size() != 2)
            return false;
        const at::Tensor& x = inputs[0];
        const at::Tensor& w = inputs[1];
        if (!x.defined() || !w.defined() || w.dim() != 2 || x.dim() < 1 ||
            x.scalar_type() != at::kFloat || w.scalar_type() != at::kFloat || !x.is_cpu() ||
            !w.is_cpu() || x.requires_grad() || w.requires_grad())
            return false;
        const std::int64_t k = w.size(0);
        const std::int64_t n = w.size(1);
        // W^T as a view of W [N, K]: unit stride along K, rows of W at least K apart.
        if (k < 1 || n < 1 || w.stride(0) != 1 || w.stride(1) < k || x.size(-1) != k)
            return false;
        const std::int64_t rows = x.numel() / k;
        if (rows < 1 || rows > kMaxRows || kernels::float32GemmKernel().isReference())
            return false;
        const at::Tensor xc = x.contiguous();
        auto shape = x.sizes().vec();
        shape.back() = n;
        at::Tensor y = at::empty(shape, x.options());
        const kernels::Float32Weight weight{w.data_ptr<float>(), n, k, w.stride(1)};
        kernels::float32Gemm(xc.data_ptr<float>(), rows, k, weight, nullptr, y.data_ptr<float>());
        outputs = {y};
        return true;
    }
};

std::int64_t metadataInt(const ir::Graph& graph, const std::string& key)
{
    auto it = graph.metadata.find(key);
    if (it == graph.metadata.end())
        return 0;
    try {
        return std::stoll(it->second);
    } catch (const std::exception&) {
        return 0;
    }
}

} // namespace

Result<void> checkDecodable(const ir::Graph& graph, const std::string& path)
{
    auto task = graph.metadata.find("task");
    if (task == graph.metadata.end() || task->second != "lm")
        return Error::unsupported(path, "generation needs a language model (this model's task "
                                        "is '" +
                                            (task == graph.metadata.end() ? std::string("none")
                                                                          : task->second) +
                                            "')");
    if (graph.inputs.size() != 1 || graph.outputs.empty())
        return Error::unsupported(path, "generation needs a language model with one input "
                                        "(token ids) and logits as output");
    int keys = 0;
    int values = 0;
    bool positions = false;
    for (const auto& node : graph.nodes) {
        const auto role = roleOf(node.name);
        if (!role)
            continue;
        positions = positions || (*role == Role::Positions && node.op == ir::OpKind::Range);
        keys += *role == Role::Key ? 1 : 0;
        values += *role == Role::Value ? 1 : 0;
    }
    if (!positions || keys == 0 || keys != values)
        return Error::unsupported(path, "generation with a KV cache needs a graph BitLens builds "
                                        "from Hugging Face or GGUF weights (positions and the "
                                        "attention keys and values by name); this one has "
                                        "none");
    return {};
}

struct Decoder::Impl {
    const ir::Graph* graph = nullptr;
    std::unique_ptr<exec::Executor> executor;
    std::shared_ptr<KvCacheHook> cache;
    std::int64_t vocab = 0;
    std::int64_t context = 0;
    std::string path;
};

Decoder::Decoder() : m_impl(std::make_unique<Impl>()) {}
Decoder::~Decoder() = default;

Result<std::unique_ptr<Decoder>> Decoder::create(const ir::Graph& graph,
                                                 std::vector<std::shared_ptr<exec::NodeHook>> hooks,
                                                 const std::string& path)
{
    if (auto ok = checkDecodable(graph, path); !ok)
        return ok.error();
    std::unique_ptr<Decoder> d(new Decoder());
    Impl& m = *d->m_impl;
    m.graph = &graph;
    m.path = path;
    m.executor = std::make_unique<exec::Executor>(graph);
    for (auto& hook : hooks)
        m.executor->addHook(std::move(hook));
    m.executor->addHook(std::make_shared<FloatGemvHook>());
    m.cache = std::make_shared<KvCacheHook>();
    m.executor->addHook(m.cache);
    m.vocab = metadataInt(graph, "vocab_size");
    const auto& out = graph.outputs[0].shape;
    if (m.vocab <= 0 && !out.empty())
        m.vocab = out.back();
    if (m.vocab <= 0)
        return Error::unsupported(path, "the model's vocabulary size is unknown");
    m.context = metadataInt(graph, "context_length");
    return d;
}

std::int64_t Decoder::position() const { return m_impl->cache->past; }
std::int64_t Decoder::vocabSize() const { return m_impl->vocab; }
std::int64_t Decoder::contextLength() const { return m_impl->context; }
void Decoder::reset() { m_impl->cache->reset(); }

Result<std::vector<float>> Decoder::append(std::span<const std::int32_t> ids, bool allPositions)
{
    Impl& m = *m_impl;
    const auto n = static_cast<std::int64_t>(ids.size());
    if (n == 0)
        return Error::badInput(m.path, "no tokens to run (an empty prompt?)");
    for (const std::int32_t id : ids)
        if (id < 0 || id >= m.vocab)
            return Error::badInput(m.path, "token id " + std::to_string(id) +
                                               " is outside the vocabulary (0.." +
                                               std::to_string(m.vocab - 1) + ")");
    if (m.context > 0 && m.cache->past + n > m.context)
        return Error::badInput(m.path, std::to_string(m.cache->past + n) +
                                           " positions exceed the model's context length " +
                                           std::to_string(m.context));
    std::vector<std::int64_t> wide(ids.begin(), ids.end());
    const at::Tensor input =
        at::tensor(wide, at::TensorOptions().dtype(at::kLong)).reshape({1, n});
    m.cache->pending = 0;
    auto out = m.executor->run({input});
    if (!out)
        return out.error();
    m.cache->past += n;
    at::Tensor logits = (*out)[0];
    if (logits.dim() != 3 || logits.size(1) != n || logits.size(2) != m.vocab)
        return Error::runtime("the model's logits have an unexpected shape", m.path);
    logits = logits.select(0, 0);
    if (!allPositions)
        logits = logits.select(0, n - 1);
    logits = logits.to(at::kFloat).contiguous();
    const float* p = logits.data_ptr<float>();
    return std::vector<float>(p, p + logits.numel());
}

// ---- generate ---------------------------------------------------------------------------------

double Generation::prefillTokensPerS() const
{
    return prefillSeconds > 0 ? static_cast<double>(promptTokens) / prefillSeconds : 0.0;
}

double Generation::decodeTokensPerS() const
{
    return decodeSeconds > 0 && decodeSteps > 0 ? static_cast<double>(decodeSteps) / decodeSeconds
                                                : 0.0;
}

Result<Generation> generate(Decoder& decoder, std::span<const std::int32_t> prompt,
                            const GenerateOptions& options,
                            const std::function<void(std::int32_t)>& onToken,
                            const CancelToken& cancel)
{
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
    };
    if (options.maxTokens < 1)
        return Error::usage("the number of tokens to generate must be at least 1");
    decoder.reset();
    Sampler sampler(options.sampling);
    Generation g;
    g.promptTokens = static_cast<std::int64_t>(prompt.size());
    auto start = Clock::now();
    auto logits = decoder.append(prompt);
    g.prefillSeconds = seconds(start, Clock::now());
    if (!logits)
        return logits.error();
    while (true) {
        if (cancel.cancelled())
            return Error::cancelled();
        const std::int32_t id = sampler.next(*logits);
        g.ids.push_back(id);
        if (options.keepLogits)
            g.logits.push_back(std::move(*logits));
        if (onToken)
            onToken(id);
        if (std::find(options.stopIds.begin(), options.stopIds.end(), id) !=
            options.stopIds.end()) {
            g.stopReason = "stop_token";
            break;
        }
        if (static_cast<std::int64_t>(g.ids.size()) >= options.maxTokens) {
            g.stopReason = "max_tokens";
            break;
        }
        if (decoder.contextLength() > 0 && decoder.position() >= decoder.contextLength()) {
            g.stopReason = "context_length";
            break;
        }
        start = Clock::now();
        logits = decoder.append(std::span<const std::int32_t>(&g.ids.back(), 1));
        g.decodeSeconds += seconds(start, Clock::now());
        ++g.decodeSteps;
        if (!logits)
            return logits.error();
    }
    return g;
}

double klDivergence(std::span<const float> pLogits, std::span<const float> qLogits)
{
    const std::size_t n = std::min(pLogits.size(), qLogits.size());
    if (n == 0)
        return 0.0;
    auto logSumExp = [n](std::span<const float> l) {
        const double top = *std::max_element(l.begin(), l.begin() + static_cast<std::ptrdiff_t>(n));
        double sum = 0.0;
        for (std::size_t i = 0; i < n; ++i)
            sum += std::exp(l[i] - top);
        return top + std::log(sum);
    };
    const double lp = logSumExp(pLogits);
    const double lq = logSumExp(qLogits);
    double kl = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        const double logP = pLogits[i] - lp;
        const double logQ = qLogits[i] - lq;
        kl += std::exp(logP) * (logP - logQ);
    }
    return std::max(kl, 0.0);
}

} // namespace bitlens::model

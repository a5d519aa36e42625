#include "model/hf_builders.h"

#include "exec/op_support.h"
#include "io/json_read.h"
#include "jobs/guard.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>

namespace bitlens::model {

namespace {

using ir::OpKind;
using nlohmann::json;

/// Thrown inside the builders, turned into the Result at the public boundary (buildGuarded).
using BuildError = ErrorException;

using exec::detail::shapeText;  // "[2, 3, 28, 28]", as the executor's errors write shapes

/// Reads hyper-parameters from a JSON object with errors naming the key.
class Params {
public:
    Params(const json& j, std::string path, std::string where)
        : m_j(j), m_path(std::move(path)), m_where(std::move(where))
    {
    }

    bool has(const std::string& key) const
    {
        return m_j.is_object() && m_j.contains(key) && !m_j[key].is_null();
    }

    std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = {},
                         std::int64_t lo = 1, std::int64_t hi = std::int64_t{1} << 24) const
    {
        if (!has(key)) {
            if (fallback)
                return *fallback;
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key + "\" is missing")};
        }
        const json& v = m_j[key];
        if (!v.is_number_integer() && !(v.is_number_float() &&
                                         v.get<double>() == std::floor(v.get<double>())))
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key +
                                                         "\" is not a whole number")};
        const auto n = v.is_number_integer() ? v.get<std::int64_t>()
                                             : static_cast<std::int64_t>(v.get<double>());
        if (n < lo || n > hi)
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key + "\" is " +
                                                         std::to_string(n) + ", outside " +
                                                         std::to_string(lo) + ".." +
                                                         std::to_string(hi))};
        return n;
    }

    double number(const std::string& key, std::optional<double> fallback = {}) const
    {
        if (!has(key)) {
            if (fallback)
                return *fallback;
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key + "\" is missing")};
        }
        if (!m_j[key].is_number())
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key +
                                                         "\" is not a number")};
        const double v = m_j[key].get<double>();
        if (!std::isfinite(v) || v <= 0.0)
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key +
                                                         "\" must be a positive number")};
        return v;
    }

    bool flag(const std::string& key, bool fallback) const
    {
        if (!has(key))
            return fallback;
        if (!m_j[key].is_boolean())
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key +
                                                         "\" is not true or false")};
        return m_j[key].get<bool>();
    }

    std::string text(const std::string& key, const std::string& fallback) const
    {
        if (!has(key))
            return fallback;
        if (!m_j[key].is_string())
            throw BuildError{Error::badInput(m_path, m_where + ": \"" + key +
                                                         "\" is not a string")};
        return m_j[key].get<std::string>();
    }

    const json& raw() const { return m_j; }

private:
    const json& m_j;
    std::string m_path;
    std::string m_where;
};

/// A graph under construction plus the weights it draws from.
class Net {
public:
    Net(std::string graphName, const std::map<std::string, at::Tensor>& weights, std::string path,
        std::vector<std::string> prefixes)
        : m_weights(weights), m_path(std::move(path)), m_prefixes(std::move(prefixes))
    {
        g.name = std::move(graphName);
    }

    ir::Graph g;
    /// Display names of tensors renamed on the way in (GGUF name for each HF name).
    std::map<std::string, std::string> sourceNames;

    const std::string& path() const { return m_path; }

    /// The stored name of `name` (trying the prefixes), or empty when absent.
    std::string resolve(const std::string& name) const
    {
        for (const auto& prefix : m_prefixes)
            if (m_weights.count(prefix + name) != 0)
                return prefix + name;
        return {};
    }

    bool has(const std::string& name) const { return !resolve(name).empty(); }

    std::string display(const std::string& name) const
    {
        auto it = sourceNames.find(name);
        return it == sourceNames.end() ? name : it->second;
    }

    /// A parameter, checked for shape; cached, so a tensor used twice (tied embeddings) stays
    /// one tensor. 16-bit floats (bf16 / fp16) stay as stored, views of the mapped file: init()
    /// marks them widenOnRead and they are checked for NaN when first widened, so opening an 8B
    /// model reads no weight. Other float types become float32 here, checked for finiteness.
    at::Tensor weight(const std::string& name, const std::vector<std::int64_t>& shape)
    {
        const std::string stored = resolve(name);
        if (stored.empty())
            throw BuildError{Error::badInput(m_path, "tensor '" + display(name) +
                                                         "' is missing")};
        if (auto it = m_cache.find(stored); it != m_cache.end())
            return it->second;
        const at::Tensor& t = m_weights.at(stored);
        if (!t.defined() || t.sizes().vec() != shape)
            throw BuildError{Error::badInput(
                m_path, "tensor '" + display(stored) + "' has shape " +
                            (t.defined() ? shapeText(t.sizes()) : std::string("(none)")) +
                            ", expected " + shapeText(shape))};
        if (!t.is_floating_point())
            throw BuildError{Error::badInput(m_path, "tensor '" + display(stored) + "' has dtype " +
                                                         std::string(c10::toString(
                                                             t.scalar_type())) +
                                                         ", expected a float type")};
        if (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf) {
            m_cache[stored] = t;
            return t;
        }
        at::Tensor f = t.scalar_type() == at::kFloat ? t : t.to(at::kFloat);
        // One reduction pass without a mask tensor: NaN propagates through min/max and
        // +-inf shows in them, so both ends are finite exactly when every element is.
        const auto [lo, hi] = f.numel() > 0 ? at::aminmax(f)
                                            : std::tuple<at::Tensor, at::Tensor>(
                                                  at::zeros({}), at::zeros({}));
        if (!std::isfinite(lo.item<float>()) || !std::isfinite(hi.item<float>()))
            throw BuildError{Error::badInput(m_path, "tensor '" + display(stored) +
                                                         "' holds NaN or infinite values")};
        m_cache[stored] = f;
        return f;
    }

    std::string input(const std::string& name, std::vector<std::int64_t> shape, ir::DType dtype)
    {
        g.inputs.push_back({name, dtype, std::move(shape)});
        return name;
    }

    /// Declares a graph output; -1 marks dynamic dimensions (batch, sequence).
    void output(const std::string& value, std::vector<std::int64_t> shape)
    {
        g.outputs.push_back({value, ir::DType::Float32, std::move(shape)});
    }

    std::string init(const std::string& name, const at::Tensor& t)
    {
        g.initializers[name] = t;
        if (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf)
            g.widenOnRead.insert(name);
        return name;
    }

    std::string ints(const std::vector<std::int64_t>& values)
    {
        std::string name = "const.i64";
        for (const auto v : values)
            name += "." + std::to_string(v);
        if (g.initializers.count(name) == 0)
            g.initializers[name] =
                at::tensor(values, at::TensorOptions().dtype(at::kLong)).clone();
        return name;
    }

    std::string scalarInt(std::int64_t v)
    {
        const std::string name = "const.i64.scalar." + std::to_string(v);
        if (g.initializers.count(name) == 0)
            g.initializers[name] = at::scalar_tensor(v, at::TensorOptions().dtype(at::kLong));
        return name;
    }

    std::string scalarFloat(const std::string& name, float v)
    {
        if (g.initializers.count(name) == 0)
            g.initializers[name] = at::scalar_tensor(v, at::TensorOptions().dtype(at::kFloat));
        return name;
    }

    std::string add(const std::string& name, OpKind op, std::vector<std::string> inputs,
                    ir::Attributes attrs = {})
    {
        return addMulti(name, op, std::move(inputs), {name}, std::move(attrs)).front();
    }

    std::vector<std::string> addMulti(const std::string& name, OpKind op,
                                      std::vector<std::string> inputs,
                                      std::vector<std::string> outputs, ir::Attributes attrs = {})
    {
        ir::Node n;
        n.name = name;
        n.op = op;
        n.inputs = std::move(inputs);
        n.outputs = std::move(outputs);
        n.attrs = std::move(attrs);
        g.nodes.push_back(std::move(n));
        return g.nodes.back().outputs;
    }

    /// y = x W^T (+ b) for an HF Linear weight W [out, in]: a MatMul reading W^T as a view
    /// (no copy; the engine's weightView sees W again), then Add of the bias.
    std::string linear(const std::string& name, const std::string& x, const std::string& wName,
                       std::int64_t in, std::int64_t out, const std::string& bName = {})
    {
        const at::Tensor w = weight(wName, {out, in});
        std::string y = add(name, OpKind::MatMul, {x, init(resolve(wName), w.t())});
        if (!bName.empty())
            y = add(name + ".bias", OpKind::Add, {y, init(resolve(bName), weight(bName, {out}))});
        return y;
    }

    /// The same for a GPT-2 Conv1D weight, stored [in, out] already.
    std::string conv1d(const std::string& name, const std::string& x, const std::string& wName,
                       const std::string& bName, std::int64_t in, std::int64_t out)
    {
        const at::Tensor w = weight(wName, {in, out});
        std::string y = add(name, OpKind::MatMul, {x, init(resolve(wName), w)});
        return add(name + ".bias", OpKind::Add, {y, init(resolve(bName), weight(bName, {out}))});
    }

    std::string layerNorm(const std::string& name, const std::string& x, const std::string& prefix,
                          std::int64_t hidden, double eps, const char* scaleKey = "weight",
                          const char* biasKey = "bias")
    {
        ir::Attributes a;
        a.set("axis", std::int64_t{-1});
        a.set("epsilon", eps);
        const std::string s = prefix + "." + scaleKey;
        const std::string b = prefix + "." + biasKey;
        return add(name, OpKind::LayerNorm,
                   {x, init(resolve(s), weight(s, {hidden})),
                    init(resolve(b), weight(b, {hidden}))},
                   a);
    }

    /// `plusOne` (Gemma): the norm scales by 1 + weight, computed in float32 as transformers
    /// does, held as its own initializer "<weight>.plus_one".
    std::string rmsNorm(const std::string& name, const std::string& x, const std::string& wName,
                        std::int64_t hidden, double eps, bool plusOne = false)
    {
        ir::Attributes a;
        a.set("axis", std::int64_t{-1});
        a.set("epsilon", eps);
        if (plusOne)
            return add(name, OpKind::RMSNorm,
                       {x, init(resolve(wName) + ".plus_one",
                                weight(wName, {hidden}).to(at::kFloat) + 1.0)},
                       a);
        return add(name, OpKind::RMSNorm, {x, init(resolve(wName), weight(wName, {hidden}))}, a);
    }

    /// tanh(x / cap) * cap: Gemma 2's soft-capping of attention scores and logits.
    std::string softcap(const std::string& name, const std::string& x, double cap)
    {
        const std::string c = scalarFloat("const.f32.softcap." + std::to_string(cap),
                                          static_cast<float>(cap));
        std::string y = add(name + ".scaled", OpKind::Div, {x, c});
        y = add(name + ".tanh", OpKind::Tanh, {y});
        return add(name, OpKind::Mul, {y, c});
    }

    std::string reshape(const std::string& name, const std::string& x,
                        const std::vector<std::int64_t>& shape)
    {
        return add(name, OpKind::Reshape, {x, ints(shape)});
    }

    std::string transpose(const std::string& name, const std::string& x,
                          const std::vector<std::int64_t>& perm)
    {
        ir::Attributes a;
        a.set("perm", perm);
        return add(name, OpKind::Transpose, {x}, a);
    }

    std::string softmax(const std::string& name, const std::string& x)
    {
        ir::Attributes a;
        a.set("axis", std::int64_t{-1});
        return add(name, OpKind::Softmax, {x}, a);
    }

    /// Positions 0..S-1 of the token input ([S] int64), S read from its shape at run time.
    std::string positions(const std::string& ids)
    {
        const std::string shape = add("positions.shape", OpKind::Shape, {ids});
        const std::string len =
            add("positions.length", OpKind::Gather, {shape, scalarInt(1)});
        return add("positions", OpKind::Range, {scalarInt(0), len, scalarInt(1)});
    }

    /// Additive causal mask [S, S]: 0 on and below the diagonal, the lowest float above it
    /// (what Hugging Face adds for masked positions).
    /// With `window` > 0 (Mistral's sliding window), also the keys `window` or more positions
    /// back: query i sees keys j with i - window < j <= i.
    std::string causalMask(const std::string& pos, std::int64_t window = 0,
                           const std::string& m = "causal_mask")
    {
        const std::string rows = add(m + ".rows", OpKind::Unsqueeze, {pos, ints({1})});
        const std::string cols = add(m + ".cols", OpKind::Unsqueeze, {pos, ints({0})});
        const std::string future = add(m + ".future", OpKind::Less, {rows, cols});
        const std::string lowest =
            scalarFloat("const.f32.lowest", std::numeric_limits<float>::lowest());
        std::string mask = add(window > 0 ? m + ".causal" : m, OpKind::Where,
                               {future, lowest, scalarFloat("const.f32.zero", 0.0f)});
        if (window > 0) {
            const std::string back = add(m + ".back", OpKind::Sub, {rows, cols});
            const std::string old =
                add(m + ".outside_window", OpKind::Less, {scalarInt(window - 1), back});
            mask = add(m, OpKind::Where, {old, lowest, mask});
        }
        return mask;
    }

    /// Multi-head attention core: q [B, S, heads*hd], k, v [B, S, kvHeads*hd] (already projected)
    /// -> [B, S, heads*hd]. Rotary (cos, sin [1, S, hd/2]) when given; `mask` is additive and
    /// broadcasts against the scores [B, kvHeads, heads/kvHeads, S, S].
    std::string attention(const std::string& p, std::string q, std::string k, std::string v,
                          std::int64_t heads, std::int64_t kvHeads, std::int64_t headDim,
                          const std::string& mask, const std::string& cos = {},
                          const std::string& sin = {}, const std::string& qNorm = {},
                          const std::string& kNorm = {}, double normEps = 1e-6,
                          double scaleOverride = 0.0, double scoreCap = 0.0,
                          bool normPlusOne = false)
    {
        const std::int64_t rep = heads / kvHeads;
        q = reshape(p + ".q_split", q, {0, 0, heads, headDim});
        k = reshape(p + ".k_split", k, {0, 0, kvHeads, headDim});
        // Qwen3: each head of q and k RMS-normalized over its head_dim before rotary.
        if (!qNorm.empty())
            q = rmsNorm(p + ".q_norm", q, qNorm, headDim, normEps, normPlusOne);
        if (!kNorm.empty())
            k = rmsNorm(p + ".k_norm", k, kNorm, headDim, normEps, normPlusOne);
        q = transpose(p + ".q_heads", q, {0, 2, 1, 3});
        k = transpose(p + ".k_heads", k, {0, 2, 1, 3});
        v = transpose(p + ".v_heads", reshape(p + ".v_split", v, {0, 0, kvHeads, headDim}),
                      {0, 2, 1, 3});
        if (!cos.empty()) {
            q = add(p + ".q_rotary", OpKind::RotaryEmbedding, {q, cos, sin});
            k = add(p + ".k_rotary", OpKind::RotaryEmbedding, {k, cos, sin});
        }
        // Grouped-query attention without copying K/V: query heads grouped by the K/V head
        // they share, [B, kvHeads, rep, S, hd] against [B, kvHeads, 1, hd, S].
        q = reshape(p + ".q_groups", q, {0, kvHeads, rep, -1, headDim});
        k = add(p + ".k_groups", OpKind::Unsqueeze, {k, ints({2})});
        v = add(p + ".v_groups", OpKind::Unsqueeze, {v, ints({2})});
        const std::string kT = transpose(p + ".k_t", k, {0, 1, 2, 4, 3});
        std::string s = add(p + ".scores", OpKind::MatMul, {q, kT});
        // Gemma 2 scales by query_pre_attn_scalar^-0.5 instead and soft-caps the scores.
        const float scale = static_cast<float>(
            scaleOverride > 0 ? scaleOverride : 1.0 / std::sqrt(static_cast<double>(headDim)));
        s = add(p + ".scale", OpKind::Mul,
                {s, scaleOverride > 0 ? scalarFloat("const.f32.attn_scale.q" +
                                                        std::to_string(scaleOverride),
                                                    scale)
                                      : scalarFloat("const.f32.attn_scale." +
                                                        std::to_string(headDim),
                                                    scale)});
        if (scoreCap > 0)
            s = softcap(p + ".softcap", s, scoreCap);
        s = add(p + ".mask", OpKind::Add, {s, mask});
        s = softmax(p + ".softmax", s);
        std::string o = add(p + ".context", OpKind::MatMul, {s, v});
        o = reshape(p + ".context_heads", o, {0, heads, -1, headDim});
        o = transpose(p + ".context_t", o, {0, 2, 1, 3});
        return reshape(p + ".context_merge", o, {0, 0, heads * headDim});
    }

    Result<ir::Graph> finish()
    {
        if (auto r = g.validate(m_path); !r)
            return r.error();
        return std::move(g);
    }

private:
    const std::map<std::string, at::Tensor>& m_weights;
    std::string m_path;
    std::vector<std::string> m_prefixes;
    std::map<std::string, at::Tensor> m_cache;
};

std::string str(std::int64_t v) { return std::to_string(v); }

// ---- BERT -------------------------------------------------------------------------------------

ir::Graph buildBert(const Params& c, const std::map<std::string, at::Tensor>& weights,
                    const std::string& path)
{
    const std::int64_t hidden = c.integer("hidden_size");
    const std::int64_t layers = c.integer("num_hidden_layers", {}, 1, 1024);
    const std::int64_t heads = c.integer("num_attention_heads");
    const std::int64_t inter = c.integer("intermediate_size");
    const std::int64_t vocab = c.integer("vocab_size");
    const std::int64_t maxPos = c.integer("max_position_embeddings");
    const std::int64_t typeVocab = c.integer("type_vocab_size", 2);
    const double eps = c.number("layer_norm_eps", 1e-12);
    const std::string act = c.text("hidden_act", "gelu");
    if (hidden % heads != 0)
        throw BuildError{Error::badInput(path, "config.json: hidden_size " + str(hidden) +
                                                   " is not a multiple of num_attention_heads " +
                                                   str(heads))};
    if (c.text("position_embedding_type", "absolute") != "absolute")
        throw BuildError{Error::unsupported(path, "BERT position_embedding_type '" +
                                                      c.text("position_embedding_type", "") +
                                                      "' is not supported (only absolute)")};
    if (act != "gelu" && act != "relu" && act != "gelu_new" && act != "gelu_pytorch_tanh")
        throw BuildError{Error::unsupported(path, "BERT hidden_act '" + act +
                                                      "' is not supported")};
    const std::int64_t headDim = hidden / heads;

    Net n("bert", weights, path, {"", "bert."});
    const std::string ids = n.input("input_ids", {-1, -1}, ir::DType::Int64);
    const std::string maskIn = n.input("attention_mask", {-1, -1}, ir::DType::Int64);
    const std::string E = "embeddings.";
    auto table = [&](const std::string& name, std::int64_t rows) {
        return n.init(n.resolve(E + name + ".weight"), n.weight(E + name + ".weight",
                                                                {rows, hidden}));
    };
    std::string x =
        n.add("embeddings.word", OpKind::Gather, {table("word_embeddings", vocab), ids});
    // token_type_ids default to 0: every token adds row 0 of the token-type table.
    const std::string type0 = n.add("embeddings.token_type", OpKind::Gather,
                                    {table("token_type_embeddings", typeVocab), n.scalarInt(0)});
    x = n.add("embeddings.add_token_type", OpKind::Add, {x, type0});
    const std::string pos = n.positions(ids);
    const std::string posEmb = n.add("embeddings.position", OpKind::Gather,
                                     {table("position_embeddings", maxPos), pos});
    x = n.add("embeddings.add_position", OpKind::Add, {x, posEmb});
    x = n.layerNorm("embeddings.norm", x, "embeddings.LayerNorm", hidden, eps);

    // Padding mask: 0 where attention_mask is 1, the lowest float where it is 0; [B, 1, 1, S].
    ir::Attributes toFloat;
    toFloat.set("to", std::int64_t{1});
    std::string m = n.add("attention_mask.float", OpKind::Cast, {maskIn}, toFloat);
    m = n.add("attention_mask.invert", OpKind::Sub, {n.scalarFloat("const.f32.one", 1.0f), m});
    m = n.add("attention_mask.bias", OpKind::Mul,
              {m, n.scalarFloat("const.f32.lowest", std::numeric_limits<float>::lowest())});
    // [B, 1, 1, 1, S] against the scores [B, heads, 1, S, S] of Net::attention.
    m = n.add("attention_mask.broadcast", OpKind::Unsqueeze, {m, n.ints({1, 2, 3})});

    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string p = "layer." + str(i);
        const std::string hf = "encoder.layer." + str(i) + ".";
        const std::string q = n.linear(p + ".attn.q_proj", x, hf + "attention.self.query.weight",
                                       hidden, hidden, hf + "attention.self.query.bias");
        const std::string k = n.linear(p + ".attn.k_proj", x, hf + "attention.self.key.weight",
                                       hidden, hidden, hf + "attention.self.key.bias");
        const std::string v = n.linear(p + ".attn.v_proj", x, hf + "attention.self.value.weight",
                                       hidden, hidden, hf + "attention.self.value.bias");
        std::string a = n.attention(p + ".attn", q, k, v, heads, heads, headDim, m);
        a = n.linear(p + ".attn.o_proj", a, hf + "attention.output.dense.weight", hidden, hidden,
                     hf + "attention.output.dense.bias");
        a = n.add(p + ".attn.residual", OpKind::Add, {a, x});
        x = n.layerNorm(p + ".attn.norm", a, hf + "attention.output.LayerNorm", hidden, eps);
        std::string f = n.linear(p + ".mlp.up_proj", x, hf + "intermediate.dense.weight", hidden,
                                 inter, hf + "intermediate.dense.bias");
        if (act == "relu") {
            f = n.add(p + ".mlp.act", OpKind::Relu, {f});
        } else {
            ir::Attributes ga;
            ga.set("approximate", std::string(act == "gelu" ? "none" : "tanh"));
            f = n.add(p + ".mlp.act", OpKind::Gelu, {f}, ga);
        }
        f = n.linear(p + ".mlp.down_proj", f, hf + "output.dense.weight", inter, hidden,
                     hf + "output.dense.bias");
        f = n.add(p + ".mlp.residual", OpKind::Add, {f, x});
        x = n.layerNorm(p + ".mlp.norm", f, hf + "output.LayerNorm", hidden, eps);
    }
    x = n.add("last_hidden_state", OpKind::Identity, {x});
    n.output(x, {-1, -1, hidden});
    n.g.metadata["task"] = "embedding";
    n.g.metadata["model_type"] = "bert";
    n.g.metadata["pad_token_id"] = str(c.integer("pad_token_id", 0, 0, vocab - 1));
    n.g.metadata["context_length"] = str(maxPos);
    n.g.opsetVersion = 20;
    auto g = n.finish();
    if (!g)
        throw BuildError{g.error()};
    return std::move(g).value();
}

// ---- Llama ------------------------------------------------------------------------------------

/// Rotary frequencies: theta and the scaling (config rope_scaling / rope_parameters):
/// "default", "linear" or "llama3".
struct RopeSpec {
    double theta = 10000.0;
    std::string type = "default";
    double factor = 1.0;
    double lowFreqFactor = 1.0;
    double highFreqFactor = 4.0;
    double originalMaxPos = 8192.0;
    /// llama.cpp's rope_freqs.weight [hd / 2]: each frequency divided by its factor (what its
    /// converter writes for Llama 3.1's scaling); undefined: none.
    at::Tensor factors;
};

/// inv_freq [hd / 2] as transformers computes it, in float32: 1 / theta^(2i / hd), scaled.
at::Tensor inverseFrequencies(const RopeSpec& r, std::int64_t hd)
{
    const at::Tensor exponent =
        at::arange(0, hd, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) /
        static_cast<double>(hd);
    at::Tensor invFreq = at::reciprocal(at::pow(r.theta, exponent));
    if (r.type == "linear") {
        invFreq = invFreq / r.factor;
    } else if (r.type == "llama3") {
        // Llama 3.1: wavelengths beyond original / low_freq_factor are stretched by the
        // factor, those below original / high_freq_factor kept, and the ones between blended
        // (transformers' rope_type "llama3", in float32 as it computes them).
        const double lowWavelen = r.originalMaxPos / r.lowFreqFactor;
        const double highWavelen = r.originalMaxPos / r.highFreqFactor;
        const at::Tensor wavelen = 2.0 * M_PI / invFreq;
        at::Tensor scaled = at::where(wavelen > lowWavelen, invFreq / r.factor, invFreq);
        const at::Tensor smooth = (r.originalMaxPos / wavelen - r.lowFreqFactor) /
                                  (r.highFreqFactor - r.lowFreqFactor);
        const at::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
        const at::Tensor medium = (wavelen >= highWavelen).logical_and(wavelen <= lowWavelen);
        invFreq = at::where(medium, smoothed, scaled);
    }
    if (r.factors.defined())
        invFreq = invFreq / r.factors.to(at::kFloat);
    return invFreq;
}

/// The rope settings of one rope_scaling / rope_parameters object over `base`. Forms that
/// transformers refuses are refused too, rather than read as no scaling: a value that is not an
/// object, scaling keys without a rope_type (or type), and linear / llama3 without the keys
/// they need.
RopeSpec parseRope(const Params& rope, RopeSpec base, const std::string& path,
                   const std::string& where)
{
    const json& j = rope.raw();
    if (!j.is_object())
        throw BuildError{Error::badInput(path, "config.json: key '" + where +
                                                   "': expected an object, got " +
                                                   io::jsonTypeName(j))};
    base.theta = rope.number("rope_theta", base.theta);
    if (!rope.has("rope_type") && !rope.has("type"))
        for (const auto& [key, value] : j.items())
            if (key != "rope_theta" && !value.is_null())
                throw BuildError{Error::badInput(path, "config.json: key '" + where +
                                                           "' has \"" + key +
                                                           "\" but no \"rope_type\" (default, "
                                                           "linear or llama3)")};
    const std::string type = rope.text("rope_type", rope.text("type", "default"));
    if (type != "default" && type != "linear" && type != "llama3")
        throw BuildError{Error::unsupported(path, "config.json: key '" + where + "': rope_type '" +
                                                      type + "' is not supported (default, "
                                                             "linear, llama3)")};
    base.type = type;
    std::vector<const char*> required;
    if (type == "linear")
        required = {"factor"};
    if (type == "llama3")
        required = {"factor", "low_freq_factor", "high_freq_factor",
                    "original_max_position_embeddings"};
    for (const char* key : required)
        if (!rope.has(key))
            throw BuildError{Error::badInput(path, "config.json: key '" + where + "': rope_type " +
                                                       type + " needs \"" + key + "\"")};
    base.factor = rope.number("factor", 1.0);
    if (rope.number("partial_rotary_factor", 1.0) != 1.0)
        throw BuildError{Error::unsupported(path, "config.json: key '" + where +
                                                      "': partial_rotary_factor other than 1 "
                                                      "is not supported")};
    if (type == "llama3") {
        base.lowFreqFactor = rope.number("low_freq_factor", 1.0);
        base.highFreqFactor = rope.number("high_freq_factor", 4.0);
        base.originalMaxPos = rope.number("original_max_position_embeddings", 8192.0);
        if (!(base.highFreqFactor > base.lowFreqFactor) || !(base.lowFreqFactor > 0) ||
            !(base.originalMaxPos > 0))
            throw BuildError{Error::badInput(path, "config.json " + where +
                                                       ": llama3 rope needs high_freq_factor > "
                                                       "low_freq_factor > 0")};
    }
    if (type != "default" && !(base.factor > 0))
        throw BuildError{Error::badInput(path, "config.json " + where +
                                                   ": factor must be positive")};
    return base;
}

struct LlamaSpec {
    std::int64_t hidden = 0;
    std::int64_t layers = 0;
    std::int64_t heads = 0;
    std::int64_t kvHeads = 0;
    std::int64_t headDim = 0;
    std::int64_t inter = 0;
    std::int64_t vocab = 0;
    std::int64_t maxPos = 0;
    double eps = 1e-6;
    RopeSpec rope;
    /// Gemma 3: the sliding layers' own rope (rope_local_base_freq); unset: `rope` everywhere.
    std::optional<RopeSpec> localRope;
    bool tied = false;
    bool attentionBias = false;
    bool mlpBias = false;
    std::string family = "llama";  ///< model_type: llama, mistral, qwen2, qwen3
    bool qkvBias = false;          ///< qwen2: biases on q, k, v only
    bool qkNorm = false;           ///< qwen3: RMSNorm of each head of q and k
    std::int64_t slidingWindow = 0; ///< mistral: keys within this many positions (0 = all)
    // Gemma 2: the window on the layers listed, sqrt(hidden) embedding scale, (1 + w) norms,
    // sandwich norms around attention and MLP, tanh GeGLU, score and logit soft-capping.
    std::vector<bool> slidingLayers;  ///< per layer; empty: every layer when slidingWindow > 0
    bool gemma = false;
    double attnScale = 0.0;           ///< query_pre_attn_scalar^-0.5; 0: head_dim^-0.5
    double attnSoftcap = 0.0;
    double finalSoftcap = 0.0;
};

void checkLlama(const LlamaSpec& s, const std::string& path, const std::string& where)
{
    if (s.heads % s.kvHeads != 0)
        throw BuildError{Error::badInput(path, where + ": " + str(s.heads) +
                                                   " attention heads do not divide into " +
                                                   str(s.kvHeads) + " key/value heads")};
    if (s.headDim % 2 != 0)
        throw BuildError{Error::badInput(path, where + ": head size " + str(s.headDim) +
                                                   " is odd; rotary embeddings need it even")};
}

/// The Llama graph from HF-named weights (already renamed when they came from GGUF).
ir::Graph buildLlamaGraph(const LlamaSpec& s, Net& n)
{
    const std::int64_t hd = s.headDim;
    const std::string ids = n.input("input_ids", {-1, -1}, ir::DType::Int64);
    const at::Tensor embed = n.weight("model.embed_tokens.weight", {s.vocab, s.hidden});
    const std::string embedName = n.init(n.resolve("model.embed_tokens.weight"), embed);
    std::string x = n.add("embed_tokens", OpKind::Gather, {embedName, ids});
    if (s.gemma)  // Gemma scales the embeddings by sqrt(hidden), as a float32 constant
        x = n.add("embed_scale", OpKind::Mul,
                  {x, n.scalarFloat("const.f32.embed_scale",
                                    static_cast<float>(std::sqrt(static_cast<double>(s.hidden))))});

    // Rotary tables as Hugging Face computes them (float32): angle = position * inv_freq,
    // cos/sin [1, S, hd/2]; the half-rotation layout. Gemma 3's sliding layers have their own.
    const std::string pos = n.positions(ids);
    ir::Attributes toFloat;
    toFloat.set("to", std::int64_t{1});
    auto rotary = [&](const std::string& r, const RopeSpec& rope) {
        std::string angle = n.add(r + ".positions", OpKind::Cast, {pos}, toFloat);
        angle = n.add(r + ".positions_column", OpKind::Unsqueeze, {angle, n.ints({1})});
        angle = n.add(r + ".angles", OpKind::Mul,
                      {angle, n.init(r + ".inv_freq", inverseFrequencies(rope, hd))});
        angle = n.add(r + ".angles_batch", OpKind::Unsqueeze, {angle, n.ints({0})});
        // RotaryEmbedding-23 without position_ids takes caches of x's own batch and length,
        // [B, S, hd/2]: onnxruntime refuses [1, S, hd/2] for a batch of several windows
        // (found by export --verify's consumer check), so the tables are expanded (a view).
        ir::Attributes axis0;
        axis0.set("axis", std::int64_t{0});
        const std::string cacheShape =
            n.add(r + ".cache_shape", OpKind::Concat, {pos + ".shape", n.ints({hd / 2})}, axis0);
        angle = n.add(r + ".angles_expanded", OpKind::Expand, {angle, cacheShape});
        return std::pair{n.add(r + ".cos", OpKind::Cos, {angle}),
                         n.add(r + ".sin", OpKind::Sin, {angle})};
    };
    const auto [cos, sin] = rotary("rotary", s.rope);
    const auto [localCos, localSin] =
        s.localRope ? rotary("rotary_local", *s.localRope) : std::pair{cos, sin};
    // [S, S] broadcast against the scores [B, kvHeads, rep, S, S].
    // One mask for every layer, or (Gemma 2) a full one and a windowed one by layer type.
    const bool perLayer = !s.slidingLayers.empty() && s.slidingWindow > 0;
    const std::string mask = n.causalMask(pos, perLayer ? 0 : s.slidingWindow);
    const std::string windowMask =
        perLayer ? n.causalMask(pos, s.slidingWindow, "sliding_mask") : mask;

    const std::int64_t qOut = s.heads * hd;
    const std::int64_t kvOut = s.kvHeads * hd;
    for (std::int64_t i = 0; i < s.layers; ++i) {
        const std::string p = "layer." + str(i);
        const std::string hf = "model.layers." + str(i) + ".";
        auto bias = [&](const std::string& w, bool on) {
            return on ? hf + w + ".bias" : std::string();
        };
        std::string h = n.rmsNorm(p + ".input_norm", x, hf + "input_layernorm.weight", s.hidden,
                                  s.eps, s.gemma);
        const bool qkvBias = s.attentionBias || s.qkvBias;
        const std::string q = n.linear(p + ".attn.q_proj", h, hf + "self_attn.q_proj.weight",
                                       s.hidden, qOut, bias("self_attn.q_proj", qkvBias));
        const std::string k = n.linear(p + ".attn.k_proj", h, hf + "self_attn.k_proj.weight",
                                       s.hidden, kvOut, bias("self_attn.k_proj", qkvBias));
        const std::string v = n.linear(p + ".attn.v_proj", h, hf + "self_attn.v_proj.weight",
                                       s.hidden, kvOut, bias("self_attn.v_proj", qkvBias));
        const bool windowed = perLayer && s.slidingLayers[static_cast<std::size_t>(i)];
        std::string a = n.attention(
            p + ".attn", q, k, v, s.heads, s.kvHeads, hd, windowed ? windowMask : mask,
            windowed ? localCos : cos, windowed ? localSin : sin,
            s.qkNorm ? hf + "self_attn.q_norm.weight" : std::string(),
            s.qkNorm ? hf + "self_attn.k_norm.weight" : std::string(), s.eps, s.attnScale,
            s.attnSoftcap, s.gemma);
        a = n.linear(p + ".attn.o_proj", a, hf + "self_attn.o_proj.weight", qOut, s.hidden,
                     bias("self_attn.o_proj", s.attentionBias));
        // Gemma's sandwich: post_attention_layernorm normalizes the attention output, and
        // pre_ / post_feedforward_layernorm wrap the MLP; llama's post_attention_layernorm
        // is the MLP's input norm.
        if (s.gemma)
            a = n.rmsNorm(p + ".post_attention_norm", a, hf + "post_attention_layernorm.weight",
                          s.hidden, s.eps, true);
        x = n.add(p + ".attn.residual", OpKind::Add, {x, a});
        h = s.gemma ? n.rmsNorm(p + ".pre_feedforward_norm", x,
                                hf + "pre_feedforward_layernorm.weight", s.hidden, s.eps, true)
                    : n.rmsNorm(p + ".post_attention_norm", x,
                                hf + "post_attention_layernorm.weight", s.hidden, s.eps);
        std::string gate = n.linear(p + ".mlp.gate_proj", h, hf + "mlp.gate_proj.weight",
                                    s.hidden, s.inter, bias("mlp.gate_proj", s.mlpBias));
        const std::string up = n.linear(p + ".mlp.up_proj", h, hf + "mlp.up_proj.weight",
                                        s.hidden, s.inter, bias("mlp.up_proj", s.mlpBias));
        if (s.gemma) {
            ir::Attributes tanhGelu;
            tanhGelu.set("approximate", std::string("tanh"));
            gate = n.add(p + ".mlp.act", OpKind::Gelu, {gate}, tanhGelu);
        } else {
            gate = n.add(p + ".mlp.act", OpKind::Silu, {gate});
        }
        std::string f = n.add(p + ".mlp.gated", OpKind::Mul, {gate, up});
        f = n.linear(p + ".mlp.down_proj", f, hf + "mlp.down_proj.weight", s.inter, s.hidden,
                     bias("mlp.down_proj", s.mlpBias));
        if (s.gemma)
            f = n.rmsNorm(p + ".post_feedforward_norm", f, hf + "post_feedforward_layernorm.weight",
                          s.hidden, s.eps, true);
        x = n.add(p + ".mlp.residual", OpKind::Add, {x, f});
    }
    x = n.rmsNorm("norm", x, "model.norm.weight", s.hidden, s.eps, s.gemma);
    std::string logits;
    if (n.has("lm_head.weight")) {
        logits = n.linear("lm_head", x, "lm_head.weight", s.hidden, s.vocab);
    } else if (s.tied) {
        // Tied: the LM head reads the embedding table transposed, one tensor for both.
        logits = n.add("lm_head", OpKind::MatMul, {x, n.init("lm_head.weight", embed.t())});
    } else {
        throw BuildError{Error::badInput(n.path(), "tensor '" + n.display("lm_head.weight") +
                                                       "' is missing and the config does not "
                                                       "tie it to the embeddings")};
    }
    if (s.finalSoftcap > 0)
        logits = n.softcap("logits.softcap", logits, s.finalSoftcap);
    logits = n.add("logits", OpKind::Identity, {logits});
    n.output(logits, {-1, -1, s.vocab});
    n.g.metadata["task"] = "lm";
    // GGUF export (llama.cpp's "llama" architecture) takes model_type llama only.
    n.g.metadata["model_type"] = s.family;
    n.g.metadata["context_length"] = str(s.maxPos);
    n.g.metadata["vocab_size"] = str(s.vocab);
    // The hyper-parameters a GGUF writer needs (core/export/gguf_export.cpp), exactly.
    auto exact = [](double v) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.17g", v);
        return std::string(buf);
    };
    n.g.metadata["llama.embedding_length"] = str(s.hidden);
    n.g.metadata["llama.block_count"] = str(s.layers);
    n.g.metadata["llama.feed_forward_length"] = str(s.inter);
    n.g.metadata["llama.attention.head_count"] = str(s.heads);
    n.g.metadata["llama.attention.head_count_kv"] = str(s.kvHeads);
    n.g.metadata["llama.rope.dimension_count"] = str(s.headDim);
    n.g.metadata["llama.rope.freq_base"] = exact(s.rope.theta);
    n.g.metadata["llama.attention.layer_norm_rms_epsilon"] = exact(s.eps);
    n.g.opsetVersion = 23;
    auto g = n.finish();
    if (!g)
        throw BuildError{g.error()};
    return std::move(g).value();
}

ir::Graph buildLlama(const Params& c, const std::map<std::string, at::Tensor>& weights,
                     const std::string& path)
{
    LlamaSpec s;
    s.hidden = c.integer("hidden_size");
    s.layers = c.integer("num_hidden_layers", {}, 1, 1024);
    s.heads = c.integer("num_attention_heads");
    s.kvHeads = c.integer("num_key_value_heads", s.heads);
    if (s.hidden % s.heads != 0 && !c.has("head_dim"))
        throw BuildError{Error::badInput(path, "config.json: hidden_size " + str(s.hidden) +
                                                   " is not a multiple of num_attention_heads " +
                                                   str(s.heads))};
    s.headDim = c.integer("head_dim", s.hidden / s.heads);
    s.inter = c.integer("intermediate_size");
    s.vocab = c.integer("vocab_size");
    s.maxPos = c.integer("max_position_embeddings", 2048);
    s.eps = c.number("rms_norm_eps", 1e-6);
    s.tied = c.flag("tie_word_embeddings", false);
    s.attentionBias = c.flag("attention_bias", false);
    s.mlpBias = c.flag("mlp_bias", false);
    const std::string family = c.text("model_type", "llama");
    if (family == "gemma2" || family == "gemma3_text") {
        // Gemma 2 / 3: GeGLU with tanh gelu, (1 + w) norms, their own attention scale and
        // (Gemma 2) caps; Gemma 3 adds q / k norms and its sliding layers' own rope base.
        s.gemma = true;
        s.qkNorm = family == "gemma3_text";
        if (c.flag("use_bidirectional_attention", false))
            throw BuildError{Error::unsupported(path, family + " with "
                                                               "use_bidirectional_attention is "
                                                               "not supported")};
        s.tied = c.flag("tie_word_embeddings", true);
        const std::string act =
            c.text("hidden_activation", c.text("hidden_act", "gelu_pytorch_tanh"));
        if (act != "gelu_pytorch_tanh")
            throw BuildError{Error::unsupported(path, family + " hidden_activation '" + act +
                                                          "' is not supported "
                                                          "(only gelu_pytorch_tanh)")};
        s.attnScale = 1.0 / std::sqrt(c.number("query_pre_attn_scalar",
                                               static_cast<double>(s.headDim)));
        for (auto [key, slot] : {std::pair{"attn_logit_softcapping", &s.attnSoftcap},
                                 std::pair{"final_logit_softcapping", &s.finalSoftcap}})
            if (c.has(key) && !c.raw()[key].is_null())
                *slot = c.number(key);
        if (c.has("sliding_window") && !c.raw()["sliding_window"].is_null())
            s.slidingWindow = c.integer("sliding_window", {}, 1);
        // layer_types names each layer's attention; older configs alternate, sliding first
        // (Gemma 2), or make every sliding_window_pattern-th layer full (Gemma 3, default 6).
        const std::int64_t pattern =
            family == "gemma3_text" ? c.integer("sliding_window_pattern", 6, 1) : 2;
        for (std::int64_t i = 0; i < s.layers; ++i)
            s.slidingLayers.push_back((i + 1) % pattern != 0);
        if (c.has("layer_types") && c.raw()["layer_types"].is_array()) {
            const auto& types = c.raw()["layer_types"];
            const auto count = static_cast<std::int64_t>(types.size());
            if (count != s.layers)
                throw BuildError{Error::badInput(path, "config.json: layer_types has " +
                                                           str(count) + " entries for " +
                                                           str(s.layers) + " layers")};
            for (std::int64_t i = 0; i < s.layers; ++i)
                s.slidingLayers[static_cast<std::size_t>(i)] =
                    types[static_cast<std::size_t>(i)] == "sliding_attention";
        }
    } else if (c.text("hidden_act", "silu") != "silu") {
        throw BuildError{Error::unsupported(path, "llama hidden_act '" +
                                                      c.text("hidden_act", "") +
                                                      "' is not supported (only silu)")};
    }
    // transformers >= 5 writes rope settings as "rope_parameters"; older ones as rope_theta
    // and rope_scaling (Llama 3.1's files). Gemma 3's rope_parameters holds one object per
    // layer type; its older files give the sliding layers' base as rope_local_base_freq.
    s.rope.theta = c.number("rope_theta", 10000.0);
    const bool gemma3 = family == "gemma3_text";
    if (gemma3)
        s.localRope = RopeSpec{c.number("rope_local_base_freq", 10000.0)};
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
        if (!c.has(key) || c.raw()[key].is_null())
            continue;
        const json& r = c.raw()[key];
        const std::string where = std::string("config.json ") + key;
        if (gemma3 && r.is_object() && (r.contains("full_attention") ||
                                        r.contains("sliding_attention"))) {
            if (r.contains("full_attention"))
                s.rope = parseRope(Params(r["full_attention"], path, where + ".full_attention"),
                                   s.rope, path, std::string(key) + ".full_attention");
            if (r.contains("sliding_attention"))
                s.localRope = parseRope(Params(r["sliding_attention"], path,
                                               where + ".sliding_attention"),
                                        *s.localRope, path, std::string(key) +
                                                                ".sliding_attention");
            continue;
        }
        s.rope = parseRope(Params(r, path, where), s.rope, path, key);
    }
    // The llama-shaped families: mistral and phi3 (one sliding window for every layer), qwen2
    // (q/k/v biases), qwen3 (q/k norm); Qwen's per-layer windows are refused.
    s.family = family;
    if ((s.family == "mistral" || s.family == "phi3") && c.has("sliding_window") &&
        !c.raw()["sliding_window"].is_null())
        s.slidingWindow = c.integer("sliding_window", {}, 1);  // every layer's window
    if (s.family == "qwen2")
        s.qkvBias = true;
    if (s.family == "qwen3")
        s.qkNorm = true;
    if ((s.family == "qwen2" || s.family == "qwen3") && c.flag("use_sliding_window", false))
        throw BuildError{Error::unsupported(path, s.family + " with use_sliding_window is not "
                                                             "supported (per-layer windows)")};
    if (s.slidingWindow >= s.maxPos) {
        s.slidingWindow = 0;  // a window past the context masks nothing
        s.slidingLayers.clear();
    }
    checkLlama(s, path, "config.json");
    // Phi-3 stores q, k, v as one qkv_proj and gate, up as one gate_up_proj: the graph reads
    // row slices of them (views of the mapped tensor, no copy) under llama's names.
    std::map<std::string, at::Tensor> split;
    if (s.family == "phi3") {
        split = weights;
        const std::int64_t qOut = s.heads * s.headDim;
        const std::int64_t kvOut = s.kvHeads * s.headDim;
        auto rows = [&](const std::string& fused, std::int64_t total,
                        const std::vector<std::pair<std::string, std::int64_t>>& parts) {
            auto it = weights.find(fused);
            if (it == weights.end())
                throw BuildError{Error::badInput(path, "tensor '" + fused + "' is missing")};
            if (it->second.dim() != 2 || it->second.size(0) != total)
                throw BuildError{Error::badInput(
                    path, "tensor '" + fused + "' has shape " + shapeText(it->second.sizes()) +
                              ", expected " + std::to_string(total) + " rows")};
            std::int64_t at = 0;
            for (const auto& [name, count] : parts) {
                split[name] = it->second.narrow(0, at, count);
                at += count;
            }
            split.erase(fused);
        };
        for (std::int64_t i = 0; i < s.layers; ++i) {
            const std::string b = "model.layers." + str(i) + ".";
            rows(b + "self_attn.qkv_proj.weight", qOut + 2 * kvOut,
                 {{b + "self_attn.q_proj.weight", qOut},
                  {b + "self_attn.k_proj.weight", kvOut},
                  {b + "self_attn.v_proj.weight", kvOut}});
            rows(b + "mlp.gate_up_proj.weight", 2 * s.inter,
                 {{b + "mlp.gate_proj.weight", s.inter}, {b + "mlp.up_proj.weight", s.inter}});
        }
    }
    Net n(s.family, s.family == "phi3" ? split : weights, path, {"", "model.", "base_model."});
    // HF names carry "model." already; the prefixes above let bare names ("layers.0...") work.
    return buildLlamaGraph(s, n);
}

// ---- GPT-2 ------------------------------------------------------------------------------------

ir::Graph buildGpt2(const Params& c, const std::map<std::string, at::Tensor>& weights,
                    const std::string& path)
{
    const std::int64_t hidden = c.integer("n_embd");
    const std::int64_t layers = c.integer("n_layer", {}, 1, 1024);
    const std::int64_t heads = c.integer("n_head");
    const std::int64_t inter = c.integer("n_inner", 4 * hidden);
    const std::int64_t vocab = c.integer("vocab_size");
    const std::int64_t maxPos = c.integer("n_positions", 1024);
    const double eps = c.number("layer_norm_epsilon", 1e-5);
    const std::string act = c.text("activation_function", "gelu_new");
    if (hidden % heads != 0)
        throw BuildError{Error::badInput(path, "config.json: n_embd " + str(hidden) +
                                                   " is not a multiple of n_head " + str(heads))};
    if (act != "gelu_new" && act != "gelu" && act != "gelu_pytorch_tanh" && act != "relu")
        throw BuildError{Error::unsupported(path, "GPT-2 activation_function '" + act +
                                                      "' is not supported")};
    if (c.flag("scale_attn_by_inverse_layer_idx", false) ||
        c.flag("reorder_and_upcast_attn", false) || !c.flag("scale_attn_weights", true))
        throw BuildError{Error::unsupported(path, "GPT-2 attention scaling options other than "
                                                  "the default are not supported")};
    const std::int64_t headDim = hidden / heads;

    Net n("gpt2", weights, path, {"", "transformer."});
    const std::string ids = n.input("input_ids", {-1, -1}, ir::DType::Int64);
    const at::Tensor wte = n.weight("wte.weight", {vocab, hidden});
    const std::string wteName = n.init(n.resolve("wte.weight"), wte);
    std::string x = n.add("wte", OpKind::Gather, {wteName, ids});
    const std::string pos = n.positions(ids);
    const std::string wpe = n.add(
        "wpe", OpKind::Gather,
        {n.init(n.resolve("wpe.weight"), n.weight("wpe.weight", {maxPos, hidden})), pos});
    x = n.add("embeddings", OpKind::Add, {x, wpe});
    const std::string mask = n.causalMask(pos);
    ir::Attributes gelu;
    gelu.set("approximate", std::string(act == "gelu" ? "none" : "tanh"));

    for (std::int64_t i = 0; i < layers; ++i) {
        const std::string p = "layer." + str(i);
        const std::string hf = "h." + str(i) + ".";
        std::string h = n.layerNorm(p + ".ln_1", x, hf + "ln_1", hidden, eps);
        h = n.conv1d(p + ".attn.c_attn", h, hf + "attn.c_attn.weight", hf + "attn.c_attn.bias",
                     hidden, 3 * hidden);
        ir::Attributes split;
        split.set("axis", std::int64_t{-1});
        const auto qkv = n.addMulti(p + ".attn.split", OpKind::Split,
                                    {h, n.ints({hidden, hidden, hidden})},
                                    {p + ".attn.q", p + ".attn.k", p + ".attn.v"}, split);
        std::string a = n.attention(p + ".attn", qkv[0], qkv[1], qkv[2], heads, heads, headDim,
                                    mask);
        a = n.conv1d(p + ".attn.c_proj", a, hf + "attn.c_proj.weight", hf + "attn.c_proj.bias",
                     hidden, hidden);
        x = n.add(p + ".attn.residual", OpKind::Add, {a, x});
        h = n.layerNorm(p + ".ln_2", x, hf + "ln_2", hidden, eps);
        h = n.conv1d(p + ".mlp.c_fc", h, hf + "mlp.c_fc.weight", hf + "mlp.c_fc.bias", hidden,
                     inter);
        h = act == "relu" ? n.add(p + ".mlp.act", OpKind::Relu, {h})
                          : n.add(p + ".mlp.act", OpKind::Gelu, {h}, gelu);
        h = n.conv1d(p + ".mlp.c_proj", h, hf + "mlp.c_proj.weight", hf + "mlp.c_proj.bias",
                     inter, hidden);
        x = n.add(p + ".mlp.residual", OpKind::Add, {x, h});
    }
    x = n.layerNorm("ln_f", x, "ln_f", hidden, eps);
    std::string logits;
    if (n.has("lm_head.weight"))
        logits = n.linear("lm_head", x, "lm_head.weight", hidden, vocab);
    else
        logits = n.add("lm_head", OpKind::MatMul, {x, n.init("lm_head.weight", wte.t())});
    logits = n.add("logits", OpKind::Identity, {logits});
    n.output(logits, {-1, -1, vocab});
    n.g.metadata["task"] = "lm";
    n.g.metadata["model_type"] = "gpt2";
    n.g.metadata["context_length"] = str(maxPos);
    n.g.metadata["vocab_size"] = str(vocab);
    n.g.opsetVersion = 20;
    auto g = n.finish();
    if (!g)
        throw BuildError{g.error()};
    return std::move(g).value();
}

// ---- RNN --------------------------------------------------------------------------------------

/// Reorders the gate blocks of a [gates * H, ...] tensor.
at::Tensor reorderGates(const at::Tensor& t, const std::vector<std::int64_t>& order)
{
    const auto chunks = t.chunk(static_cast<std::int64_t>(order.size()), 0);
    std::vector<at::Tensor> parts;
    for (const auto i : order)
        parts.push_back(chunks[static_cast<std::size_t>(i)]);
    return at::cat(parts, 0);
}

ir::Graph buildRnn(const Params& c, const std::map<std::string, at::Tensor>& weights,
                   const std::string& path)
{
    const std::string mode = c.text("mode", "lstm");
    if (mode != "lstm" && mode != "gru")
        throw BuildError{Error::unsupported(path, "RNN mode '" + mode +
                                                      "' is not supported (lstm or gru)")};
    const bool lstm = mode == "lstm";
    const std::int64_t gates = lstm ? 4 : 3;
    // PyTorch i,f,g,o -> ONNX i,o,f,c; PyTorch r,z,n -> ONNX z,r,h.
    const std::vector<std::int64_t> order = lstm ? std::vector<std::int64_t>{0, 3, 1, 2}
                                                 : std::vector<std::int64_t>{1, 0, 2};
    const std::int64_t inputSize = c.integer("input_size");
    const std::int64_t hidden = c.integer("hidden_size");
    const std::int64_t layers = c.integer("num_layers", 1, 1, 64);
    const bool bidirectional = c.flag("bidirectional", false);
    const bool batchFirst = c.flag("batch_first", false);
    if (c.has("proj_size") && c.integer("proj_size", 0, 0) != 0)
        throw BuildError{Error::unsupported(path, "LSTM proj_size is not supported")};
    const std::int64_t dirs = bidirectional ? 2 : 1;

    Net n(mode, weights, path, {""});
    const std::string in = n.input("input", {-1, -1, inputSize}, ir::DType::Float32);
    std::string x = batchFirst ? n.transpose("input.time_major", in, {1, 0, 2}) : in;
    std::vector<std::string> hs;
    std::vector<std::string> cs;
    const bool hasBias = n.has("bias_ih_l0");
    for (std::int64_t l = 0; l < layers; ++l) {
        const std::int64_t width = l == 0 ? inputSize : hidden * dirs;
        std::vector<at::Tensor> w;
        std::vector<at::Tensor> r;
        std::vector<at::Tensor> b;
        for (std::int64_t d = 0; d < dirs; ++d) {
            const std::string suffix = "_l" + str(l) + (d == 1 ? "_reverse" : "");
            w.push_back(reorderGates(n.weight("weight_ih" + suffix, {gates * hidden, width}),
                                     order));
            r.push_back(reorderGates(n.weight("weight_hh" + suffix, {gates * hidden, hidden}),
                                     order));
            if (hasBias)
                b.push_back(at::cat(
                    {reorderGates(n.weight("bias_ih" + suffix, {gates * hidden}), order),
                     reorderGates(n.weight("bias_hh" + suffix, {gates * hidden}), order)}));
        }
        const std::string p = mode + "." + str(l);
        std::vector<std::string> inputs{x, n.init(p + ".W", at::stack(w)),
                                        n.init(p + ".R", at::stack(r))};
        inputs.push_back(hasBias ? n.init(p + ".B", at::stack(b)) : std::string());
        ir::Attributes a;
        a.set("hidden_size", hidden);
        a.set("direction", std::string(bidirectional ? "bidirectional" : "forward"));
        if (!lstm)
            a.set("linear_before_reset", std::int64_t{1});
        std::vector<std::string> outs{p, p + ".h"};
        if (lstm)
            outs.push_back(p + ".c");
        outs = n.addMulti(p, lstm ? OpKind::LSTM : OpKind::GRU, inputs, outs, a);
        hs.push_back(outs[1]);
        if (lstm)
            cs.push_back(outs[2]);
        // Y [S, dirs, B, H] -> [S, B, dirs * H], the next layer's input.
        x = n.transpose(p + ".directions", outs[0], {0, 2, 1, 3});
        x = n.reshape(p + ".merge", x, {0, 0, -1});
    }
    ir::Attributes cat;
    cat.set("axis", std::int64_t{0});
    x = batchFirst ? n.transpose("output", x, {1, 0, 2}) : n.add("output", OpKind::Identity, {x});
    n.output(x, {-1, -1, dirs * hidden});
    n.output(n.add("h_n", OpKind::Concat, hs, cat), {layers * dirs, -1, hidden});
    if (lstm)
        n.output(n.add("c_n", OpKind::Concat, cs, cat), {layers * dirs, -1, hidden});
    n.g.metadata["task"] = "sequence";
    n.g.metadata["model_type"] = mode;
    auto g = n.finish();
    if (!g)
        throw BuildError{g.error()};
    return std::move(g).value();
}

/// Builds under the error boundary: a LibTorch error or a JSON value of the wrong type while
/// building is bad input (the config or the weights do not fit the family).
template <typename F>
Result<ir::Graph> buildGuarded(const std::string& path, F&& f)
{
    return guarded<ir::Graph>(
        Boundary{.path = path,
                 .library = ErrorCode::BadInput,
                 .libraryPrefix = "building the graph failed: ",
                 .oomWhile = "building the graph",
                 .jsonWhere = "config.json"},
        [&] {
            c10::InferenceMode guard;
            return f();
        });
}

} // namespace

Result<ir::Graph> buildFromHfConfig(const nlohmann::json& config,
                                    const std::map<std::string, at::Tensor>& weights,
                                    const std::string& path)
{
    return buildGuarded(path, [&]() -> ir::Graph {
        if (!config.is_object())
            throw BuildError{Error::badInput(path, "config.json is not a JSON object")};
        const Params c(config, path, "config.json");
        if (!c.has("model_type"))
            throw BuildError{Error::badInput(path, "config.json has no \"model_type\"")};
        const std::string type = c.text("model_type", "");
        if (!isHfModelType(type))
            throw BuildError{Error::unsupported(path, "model_type '" + type +
                                                          "' is not supported (" +
                                                          hfModelTypesText() + ")")};
        if (type == "bert")
            return buildBert(c, weights, path);
        if (type == "gpt2")
            return buildGpt2(c, weights, path);
        return buildLlama(c, weights, path);  // llama and the llama-shaped families
    });
}

Result<ir::Graph> buildLlamaFromGguf(const nlohmann::json& hparams,
                                     const std::map<std::string, at::Tensor>& weights,
                                     const std::string& path)
{
    return buildGuarded(path, [&]() -> ir::Graph {
        const Params h(hparams, path, "GGUF metadata");
        LlamaSpec s;
        s.hidden = h.integer("llama.embedding_length");
        s.layers = h.integer("llama.block_count", {}, 1, 1024);
        s.heads = h.integer("llama.attention.head_count");
        s.kvHeads = h.integer("llama.attention.head_count_kv", s.heads);
        if (s.hidden % s.heads != 0)
            throw BuildError{Error::badInput(path, "GGUF metadata: embedding_length " +
                                                       str(s.hidden) +
                                                       " is not a multiple of head_count " +
                                                       str(s.heads))};
        s.headDim = s.hidden / s.heads;
        if (h.has("llama.rope.dimension_count") &&
            h.integer("llama.rope.dimension_count") != s.headDim)
            throw BuildError{Error::unsupported(path, "partial rotary embeddings "
                                                      "(llama.rope.dimension_count != head size) "
                                                      "are not supported")};
        s.eps = h.number("llama.attention.layer_norm_rms_epsilon", 1e-5);
        s.rope.theta = h.number("llama.rope.freq_base", 10000.0);
        s.maxPos = h.integer("llama.context_length", 2048);
        s.tied = true;  // llama.cpp reads token_embd when there is no output.weight
        if (auto f = weights.find("rope_freqs.weight"); f != weights.end()) {
            // Llama 3.1 GGUFs: llama.cpp divides each rotary frequency by its factor.
            const at::Tensor& t = f->second;
            if (!t.defined() || t.numel() != s.headDim / 2 || !t.is_floating_point())
                throw BuildError{Error::badInput(
                    path, "tensor 'rope_freqs.weight' has shape " +
                              (t.defined() ? shapeText(t.sizes()) : std::string("(none)")) +
                              ", expected [" + str(s.headDim / 2) + "] (one factor per rotary "
                              "frequency)")};
            const at::Tensor factors = t.to(at::kFloat).reshape({s.headDim / 2}).contiguous();
            if (!(factors > 0).all().item<bool>() || !at::isfinite(factors).all().item<bool>())
                throw BuildError{Error::badInput(path, "tensor 'rope_freqs.weight' holds a "
                                                       "factor that is not a positive number")};
            s.rope.factors = factors;
        }
        auto need = [&](const std::string& name) -> const at::Tensor& {
            auto it = weights.find(name);
            if (it == weights.end() || !it->second.defined())
                throw BuildError{Error::badInput(path, "tensor '" + name + "' is missing")};
            return it->second;
        };
        const at::Tensor& embd = need("token_embd.weight");
        if (embd.dim() != 2 || embd.size(1) != s.hidden)
            throw BuildError{Error::badInput(path, "tensor 'token_embd.weight' has shape " +
                                                       shapeText(embd.sizes()) + ", expected [" +
                                                       "vocab, " + str(s.hidden) + "]")};
        s.vocab = embd.size(0);
        s.inter = h.integer("llama.feed_forward_length",
                            need("blk.0.ffn_gate.weight").dim() == 2
                                ? std::optional<std::int64_t>(need("blk.0.ffn_gate.weight").size(0))
                                : std::nullopt);
        checkLlama(s, path, "GGUF metadata");

        // Rename to HF names. llama.cpp's converter permuted the rows of attn_q / attn_k
        // within each head from the half-rotation layout to interleaved pairs
        // (row h*hd + 2j + s <- HF row h*hd + s*hd/2 + j); undo it so the HF graph applies.
        std::map<std::string, at::Tensor> hf;
        std::map<std::string, std::string> source;
        auto put = [&](const std::string& hfName, const std::string& ggufName) {
            hf[hfName] = need(ggufName);
            source[hfName] = ggufName;
        };
        auto unpermute = [&](const std::string& hfName, const std::string& ggufName,
                             std::int64_t heads) {
            const at::Tensor& t = need(ggufName);
            source[hfName] = ggufName;
            if (t.dim() != 2 || t.size(0) != heads * s.headDim) {
                hf[hfName] = t;  // the shape check in the builder names it
                return;
            }
            hf[hfName] = t.reshape({heads, s.headDim / 2, 2, t.size(1)})
                             .transpose(1, 2)
                             .reshape({heads * s.headDim, t.size(1)})
                             .contiguous();
        };
        put("model.embed_tokens.weight", "token_embd.weight");
        for (std::int64_t i = 0; i < s.layers; ++i) {
            const std::string b = "blk." + str(i) + ".";
            const std::string l = "model.layers." + str(i) + ".";
            put(l + "input_layernorm.weight", b + "attn_norm.weight");
            unpermute(l + "self_attn.q_proj.weight", b + "attn_q.weight", s.heads);
            unpermute(l + "self_attn.k_proj.weight", b + "attn_k.weight", s.kvHeads);
            put(l + "self_attn.v_proj.weight", b + "attn_v.weight");
            put(l + "self_attn.o_proj.weight", b + "attn_output.weight");
            put(l + "post_attention_layernorm.weight", b + "ffn_norm.weight");
            put(l + "mlp.gate_proj.weight", b + "ffn_gate.weight");
            put(l + "mlp.up_proj.weight", b + "ffn_up.weight");
            put(l + "mlp.down_proj.weight", b + "ffn_down.weight");
        }
        put("model.norm.weight", "output_norm.weight");
        if (weights.count("output.weight") != 0)
            put("lm_head.weight", "output.weight");
        Net n("llama", hf, path, {""});
        n.sourceNames = source;
        return buildLlamaGraph(s, n);
    });
}

Result<ir::Graph> buildRnnFromTorch(const nlohmann::json& config,
                                    const std::map<std::string, at::Tensor>& weights,
                                    const std::string& path)
{
    return buildGuarded(path, [&]() -> ir::Graph {
        if (!config.is_object())
            throw BuildError{Error::badInput(path, "RNN config is not a JSON object")};
        return buildRnn(Params(config, path, "RNN config"), weights, path);
    });
}

} // namespace bitlens::model

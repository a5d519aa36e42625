#include "ir/shape_inference.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

namespace bitlens::ir {

namespace {

using Shape = std::vector<std::int64_t>;

/// Integer tensors of at most this many elements are followed by value.
constexpr std::int64_t kMaxTrackedValues = 64;

/// The most elements one value of one sample may hold (4 TiB of float32): more is no machine's
/// memory, so attributes that imply it are malformed, refused before anything is allocated.
constexpr std::int64_t kMaxValueElements = std::int64_t{1} << 40;
/// The largest window attribute (kernel, stride, dilation, pad) a node may hold.
constexpr std::int64_t kMaxWindowAttribute = std::int64_t{1} << 24;

/// A node whose attributes contradict each other or its input (checkShapes reports it).
struct Malformed {
    std::string why;
};

/// Shape arithmetic that leaves int64 (hostile or fuzzed dimensions and values): the node's
/// outputs stay unknown, as for any value the pass cannot follow. Every sum and product of
/// dimensions or tracked values goes through add / sub / mul.
struct Overflow : std::runtime_error {
    Overflow() : std::runtime_error("int64 overflow in shape arithmetic") {}
};
std::int64_t add(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r))
        throw Overflow{};
    return r;
}
std::int64_t sub(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r))
        throw Overflow{};
    return r;
}
std::int64_t mul(std::int64_t a, std::int64_t b)
{
    std::int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r))
        throw Overflow{};
    return r;
}
/// a mod b with the divisor's sign (Python's %, ONNX Mod with fmod=0); b != 0.
std::int64_t floorMod(std::int64_t a, std::int64_t b)
{
    if (b == -1)
        return 0;  // INT64_MIN % -1 is undefined
    std::int64_t r = a % b;
    if (r != 0 && (r < 0) != (b < 0))
        r += b;
    return r;
}

std::string label(const Node& node)
{
    return "node '" + node.name + "' (" + std::string(opKindName(node.op)) + ")";
}

std::string listText(const Shape& values)
{
    std::string text = "[";
    for (std::size_t i = 0; i < values.size(); ++i)
        text += (i ? ", " : "") + std::to_string(values[i]);
    return text + "]";
}

/// Attributes that are wrong whatever the input: a window of size 0, a negative pad, group 0.
std::optional<std::string> attributeProblem(const Node& node)
{
    const bool conv = node.op == OpKind::Conv || node.op == OpKind::ConvTranspose;
    const bool pool = node.op == OpKind::MaxPool || node.op == OpKind::AveragePool;
    if (!conv && !pool)
        return std::nullopt;
    auto attribute = [&](const char* name) { return "attribute '" + std::string(name) + "' "; };
    for (const char* name : {"kernel_shape", "strides", "dilations", "pads", "output_padding"}) {
        if (!node.attrs.has(name))
            continue;
        const Shape values = node.attrs.getInts(name, {});
        const std::int64_t least = std::string(name) == "pads" ||
                                           std::string(name) == "output_padding"
                                       ? 0
                                       : 1;
        for (const std::int64_t v : values) {
            if (v < least)
                return attribute(name) + listText(values) + " holds " + std::to_string(v) +
                       (least == 0 ? ", which is negative" : "; each must be at least 1");
            if (v > kMaxWindowAttribute)
                return attribute(name) + "holds " + std::to_string(v) + ", more than 2^24";
        }
    }
    if (conv && node.attrs.has("group") && node.attrs.getInt("group", 1) < 1)
        return attribute("group") + "is " + std::to_string(node.attrs.getInt("group", 1)) +
               "; it must be at least 1";
    // As onnxruntime: a pooling window's pads are smaller than the window.
    if (pool && node.attrs.has("pads") && node.attrs.has("kernel_shape")) {
        const Shape pads = node.attrs.getInts("pads", {});
        const Shape kernel = node.attrs.getInts("kernel_shape", {});
        for (std::size_t i = 0; i < pads.size() && !kernel.empty(); ++i)
            if (pads[i] >= kernel[i % kernel.size()])
                return attribute("pads") + listText(pads) + " must be smaller than the window (" +
                       "kernel_shape " + listText(kernel) + ")";
    }
    return std::nullopt;
}

/// What the pass knows: shapes, and the values of small integer tensors. Strict: a malformed
/// node (Malformed) stops the pass and is kept in problem(); otherwise its outputs stay unknown.
class Inference {
public:
    explicit Inference(const Graph& graph, bool strict = false)
        : m_graph(graph), m_strict(strict)
    {
    }

    const std::optional<std::string>& problem() const { return m_problem; }

    void run(const std::vector<Shape>& inputShapes)
    {
        for (std::size_t i = 0; i < m_graph.inputs.size(); ++i)
            m_shapes[m_graph.inputs[i].name] = inputShapes[i];
        for (const auto& [name, t] : m_graph.initializers) {
            m_shapes[name] = t.sizes().vec();
            if (!t.is_floating_point() && !t.is_complex() && t.numel() <= kMaxTrackedValues) {
                const at::Tensor v = t.to(at::kCPU).to(at::kLong).contiguous();
                m_values[name].assign(v.data_ptr<std::int64_t>(),
                                      v.data_ptr<std::int64_t>() + v.numel());
            }
        }
        for (const auto& node : m_graph.nodes) {
            // Malformed attributes make a node unknown here (strict: they stop the pass).
            try {
                inferNode(node);
            } catch (const Malformed& m) {
                if (m_strict) {
                    m_problem = label(node) + ": " + m.why;
                    return;
                }
            } catch (const std::exception&) {
            }
        }
    }

    ShapeMap shapes() && { return std::move(m_shapes); }

private:
    const Shape* shape(const Node& node, std::size_t i) const
    {
        if (i >= node.inputs.size() || node.inputs[i].empty())
            return nullptr;
        auto it = m_shapes.find(node.inputs[i]);
        return it == m_shapes.end() ? nullptr : &it->second;
    }
    const Shape* value(const Node& node, std::size_t i) const
    {
        if (i >= node.inputs.size() || node.inputs[i].empty())
            return nullptr;
        auto it = m_values.find(node.inputs[i]);
        return it == m_values.end() ? nullptr : &it->second;
    }
    bool present(const Node& node, std::size_t i) const
    {
        return i < node.inputs.size() && !node.inputs[i].empty();
    }
    void set(const Node& node, std::size_t output, Shape s)
    {
        // A negative dimension (a hostile Reshape, Expand, TopK or attribute): unknown.
        if (std::any_of(s.begin(), s.end(), [](std::int64_t d) { return d < 0; }))
            return;
        checkSize(node, s);
        if (output < node.outputs.size() && !node.outputs[output].empty())
            m_shapes[node.outputs[output]] = std::move(s);
    }
    /// Strict: throws Malformed when `s` holds more than kMaxValueElements, naming the
    /// attributes that shape the node's output. (Not otherwise: the memory estimate infers at a
    /// run's batch, and a value it cannot know would make its estimate low.)
    void checkSize(const Node& node, const Shape& s) const
    {
        if (!m_strict)
            return;
        std::int64_t elements = 1;
        bool tooLarge = false;
        for (const std::int64_t d : s) {
            if (d > kMaxValueElements || (d > 0 && elements > kMaxValueElements / d))
                tooLarge = true;
            else
                elements *= std::max<std::int64_t>(d, 0);
        }
        if (!tooLarge && elements <= kMaxValueElements)
            return;
        std::string attrs;
        for (const char* name : {"pads", "strides", "dilations", "kernel_shape", "output_shape",
                                 "output_padding", "scales", "sizes", "repeats"})
            if (node.attrs.has(name))
                attrs += (attrs.empty() ? "" : ", ") + std::string(name) + " " +
                         listText(node.attrs.getInts(name, {}));
        throw Malformed{(attrs.empty() ? std::string("its inputs") : "attributes " + attrs) +
                        " imply an output of shape " + listText(s) + ", more than 2^40 elements"};
    }
    void setValue(const Node& node, std::size_t output, Shape s, Shape v)
    {
        if (output >= node.outputs.size() || node.outputs[output].empty())
            return;
        if (std::any_of(s.begin(), s.end(), [](std::int64_t d) { return d < 0; }))
            return;
        checkSize(node, s);
        if (static_cast<std::int64_t>(v.size()) <= kMaxTrackedValues)
            m_values[node.outputs[output]] = std::move(v);
        m_shapes[node.outputs[output]] = std::move(s);
    }

    static std::int64_t numel(const Shape& s)
    {
        std::int64_t n = 1;
        for (const std::int64_t d : s)
            n = mul(n, d);
        return n;
    }
    static std::int64_t axisOf(std::int64_t axis, std::int64_t rank)
    {
        if (rank == 0 || axis < -rank || axis >= rank)
            throw std::out_of_range("axis");
        return axis < 0 ? axis + rank : axis;
    }
    /// Numpy broadcast; nullopt when the shapes do not broadcast.
    static std::optional<Shape> broadcast(const Shape& a, const Shape& b)
    {
        Shape out(std::max(a.size(), b.size()));
        for (std::size_t i = 0; i < out.size(); ++i) {
            const std::int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
            const std::int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
            if (x != y && x != 1 && y != 1)
                return std::nullopt;
            out[out.size() - 1 - i] = x == 1 ? y : x;
        }
        return out;
    }
    /// Axes from input `index` (opset 13+) or the "axes" attribute; nullopt when absent,
    /// throws when given but not known.
    std::optional<Shape> axes(const Node& node, std::size_t index) const
    {
        if (present(node, index)) {
            if (const Shape* v = value(node, index))
                return *v;
            throw std::runtime_error("axes unknown");
        }
        if (node.attrs.has("axes"))
            return node.attrs.getInts("axes", {});
        return std::nullopt;
    }

    /// Output spatial sizes of a convolution or pooling window over x [N, C, spatial...].
    static Shape windowed(const Node& node, const Shape& x, const Shape& kernel, bool ceilMode)
    {
        const std::size_t spatial = kernel.size();
        if (x.size() != spatial + 2)
            throw std::runtime_error("rank");
        const auto strides = node.attrs.getInts("strides", Shape(spatial, 1));
        const auto dilations = node.attrs.getInts("dilations", Shape(spatial, 1));
        const std::string autoPad = node.attrs.getString("auto_pad", "NOTSET");
        const auto pads = node.attrs.getInts("pads", Shape(2 * spatial, 0));
        for (const auto& [name, values, want] :
             {std::tuple{"strides", strides, spatial}, std::tuple{"dilations", dilations, spatial},
              std::tuple{"pads", pads, 2 * spatial}})
            if (values.size() != want)
                throw Malformed{"attribute '" + std::string(name) + "' " + listText(values) +
                                " has " + std::to_string(values.size()) + " values; the " +
                                std::to_string(spatial) + " spatial dimensions of the input need " +
                                std::to_string(want)};
        Shape out;
        for (std::size_t d = 0; d < spatial; ++d) {
            const std::int64_t in = x[2 + d];
            if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
                out.push_back(add(in, strides[d] - 1) / strides[d]);
                continue;
            }
            const std::int64_t padded =
                add(in, autoPad == "VALID" ? 0 : add(pads[d], pads[d + spatial]));
            const std::int64_t span =
                sub(sub(padded, mul(dilations[d], sub(kernel[d], 1))), 1);
            std::int64_t o =
                (ceilMode ? add(span, strides[d] - 1) / strides[d] : span / strides[d]) + 1;
            // As PyTorch (and ONNX) do: the last window must start inside the input or its
            // left padding.
            if (ceilMode &&
                mul(o - 1, strides[d]) >= add(in, autoPad == "VALID" ? 0 : pads[d]))
                --o;
            out.push_back(o);
        }
        return out;
    }

    void inferNode(const Node& node);

    /// Output shape of an Einsum: each letter's size from the operands, "..." broadcast, and
    /// without "->" the letters seen once in alphabetical order after the "..." dimensions.
    std::optional<Shape> einsumShape(const Node& node) const
    {
        std::string eq = node.attrs.getString("equation", "");
        eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
        const auto arrow = eq.find("->");
        const std::string lhs = eq.substr(0, arrow);
        std::vector<std::string> terms{{}};
        for (const char c : lhs) {
            if (c == ',')
                terms.emplace_back();
            else
                terms.back() += c;
        }
        if (terms.size() != node.inputs.size())
            return std::nullopt;
        std::map<char, std::int64_t> sizes;
        std::map<char, int> seen;
        Shape ellipsis;
        for (std::size_t i = 0; i < terms.size(); ++i) {
            const Shape* s = shape(node, i);
            if (!s)
                return std::nullopt;
            const std::string& term = terms[i];
            const auto dots = term.find("...");
            const std::string letters =
                dots == std::string::npos ? term : term.substr(0, dots) + term.substr(dots + 3);
            if (letters.size() > s->size() ||
                (dots == std::string::npos && letters.size() != s->size()))
                return std::nullopt;
            const std::size_t extra = s->size() - letters.size();
            const std::size_t before = dots == std::string::npos ? letters.size() : dots;
            for (std::size_t j = 0; j < letters.size(); ++j) {
                const std::int64_t dim = (*s)[j < before ? j : j + extra];
                auto [it, fresh] = sizes.emplace(letters[j], dim);
                if (!fresh && it->second != dim) {
                    if (it->second != 1 && dim != 1)
                        return std::nullopt;
                    it->second = std::max(it->second, dim);
                }
                ++seen[letters[j]];
            }
            if (dots != std::string::npos) {
                const auto first = s->begin() + static_cast<std::ptrdiff_t>(before);
                const auto part =
                    broadcast(ellipsis, Shape(first, first + static_cast<std::ptrdiff_t>(extra)));
                if (!part)
                    return std::nullopt;
                ellipsis = *part;
            }
        }
        Shape out;
        if (arrow == std::string::npos) {
            out = ellipsis;
            for (const auto& [c, count] : seen)
                if (count == 1)
                    out.push_back(sizes[c]);
            return out;
        }
        const std::string rhs = eq.substr(arrow + 2);
        for (std::size_t j = 0; j < rhs.size(); ++j) {
            if (rhs.compare(j, 3, "...") == 0) {
                out.insert(out.end(), ellipsis.begin(), ellipsis.end());
                j += 2;
                continue;
            }
            const auto it = sizes.find(rhs[j]);
            if (it == sizes.end())
                return std::nullopt;
            out.push_back(it->second);
        }
        return out;
    }

    const Graph& m_graph;
    bool m_strict = false;
    std::optional<std::string> m_problem;
    ShapeMap m_shapes;
    std::map<std::string, Shape> m_values;
};

void Inference::inferNode(const Node& node)
{
    if (auto why = attributeProblem(node))
        throw Malformed{*why};
    const Shape* x = shape(node, 0);
    switch (node.op) {
    // One output shaped like the first input.
    case OpKind::Relu: case OpKind::Gelu: case OpKind::Silu: case OpKind::Sigmoid:
    case OpKind::Tanh: case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::Sqrt:
    case OpKind::Erf: case OpKind::Neg: case OpKind::Cos: case OpKind::Sin: case OpKind::Abs:
    case OpKind::Exp: case OpKind::Log: case OpKind::Reciprocal: case OpKind::Floor:
    case OpKind::Ceil: case OpKind::Clip: case OpKind::HardSigmoid: case OpKind::HardSwish:
    case OpKind::LeakyRelu: case OpKind::PRelu: case OpKind::Elu: case OpKind::Selu:
    case OpKind::Softplus: case OpKind::BatchNorm: case OpKind::InstanceNorm: case OpKind::LRN:
    case OpKind::LayerNorm: case OpKind::RMSNorm: case OpKind::RotaryEmbedding:
    case OpKind::QuantizeLinear: case OpKind::DequantizeLinear: case OpKind::Mish:
    case OpKind::GroupNorm: case OpKind::Round: case OpKind::Not: case OpKind::CumSum:
    case OpKind::Trilu: case OpKind::ScatterND:
        if (x)
            set(node, 0, *x);
        return;
    case OpKind::Identity:
    case OpKind::Cast:
        if (x) {
            if (const Shape* v = value(node, 0))
                setValue(node, 0, *x, *v);
            else
                set(node, 0, *x);
        }
        return;
    case OpKind::Dropout:
        if (x) {
            set(node, 0, *x);
            set(node, 1, *x);
        }
        return;
    case OpKind::DynamicQuantizeLinear:
        if (x) {
            set(node, 0, *x);
            set(node, 1, {});
            set(node, 2, {});
        }
        return;
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow:
    case OpKind::Equal: case OpKind::Less: case OpKind::Greater: case OpKind::Where:
    case OpKind::Min: case OpKind::Max: case OpKind::Sum: case OpKind::Mean: case OpKind::And:
    case OpKind::Or: case OpKind::Xor: case OpKind::Mod: {
        std::optional<Shape> out;
        for (std::size_t i = 0; i < node.inputs.size(); ++i) {
            const Shape* s = shape(node, i);
            if (!s)
                return;
            out = out ? broadcast(*out, *s) : *s;
            if (!out)
                return;
        }
        if (!out)
            return;
        // Integer arithmetic on shape values (Div is left out: it depends on the dtype).
        const Shape* a = value(node, 0);
        const Shape* b = value(node, 1);
        if (a && b && node.inputs.size() == 2 &&
            (node.op == OpKind::Add || node.op == OpKind::Sub || node.op == OpKind::Mul ||
             (node.op == OpKind::Mod && node.attrs.getInt("fmod", 0) == 0 &&
              std::find(b->begin(), b->end(), 0) == b->end())) &&
            static_cast<std::int64_t>(a->size()) == numel(*out) &&
            (b->size() == a->size() || b->size() == 1) &&
            (a->size() == 1 || a->size() == b->size())) {
            Shape v(std::max(a->size(), b->size()));
            for (std::size_t i = 0; i < v.size(); ++i) {
                const std::int64_t p = (*a)[a->size() == 1 ? 0 : i];
                const std::int64_t q = (*b)[b->size() == 1 ? 0 : i];
                v[i] = node.op == OpKind::Add   ? add(p, q)
                       : node.op == OpKind::Sub ? sub(p, q)
                       : node.op == OpKind::Mul ? mul(p, q)
                                                : floorMod(p, q);
            }
            setValue(node, 0, *out, std::move(v));
            return;
        }
        set(node, 0, *out);
        return;
    }
    case OpKind::Conv: {
        const Shape* w = shape(node, 1);
        if (!x || !w || w->size() < 3 || x->size() < 3)
            return;
        const Shape kernel = node.attrs.getInts("kernel_shape", Shape(w->begin() + 2, w->end()));
        Shape out{(*x)[0], (*w)[0]};
        for (const auto d : windowed(node, *x, kernel, false))
            out.push_back(d);
        set(node, 0, out);
        return;
    }
    case OpKind::ConvTranspose: {
        const Shape* w = shape(node, 1);
        if (!x || !w || w->size() < 3 || x->size() != w->size())
            return;
        const std::size_t spatial = w->size() - 2;
        const Shape kernel = node.attrs.getInts("kernel_shape", Shape(w->begin() + 2, w->end()));
        const auto strides = node.attrs.getInts("strides", Shape(spatial, 1));
        const auto dilations = node.attrs.getInts("dilations", Shape(spatial, 1));
        const auto outPad = node.attrs.getInts("output_padding", Shape(spatial, 0));
        const auto pads = node.attrs.getInts("pads", Shape(2 * spatial, 0));
        const auto outShape = node.attrs.getInts("output_shape", {});
        const std::string autoPad = node.attrs.getString("auto_pad", "NOTSET");
        if (kernel.size() != spatial || strides.size() != spatial || dilations.size() != spatial ||
            outPad.size() != spatial || pads.size() != 2 * spatial)
            return;
        Shape out{(*x)[0], mul((*w)[1], node.attrs.getInt("group", 1))};
        for (std::size_t d = 0; d < spatial; ++d) {
            if (!outShape.empty()) {
                if (outShape.size() != spatial)
                    return;
                out.push_back(outShape[d]);
            } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
                out.push_back(mul((*x)[2 + d], strides[d]));
            } else {
                const std::int64_t p =
                    autoPad == "VALID" ? 0 : add(pads[d], pads[d + spatial]);
                out.push_back(sub(add(add(mul(strides[d], sub((*x)[2 + d], 1)), outPad[d]),
                                      add(mul(sub(kernel[d], 1), dilations[d]), 1)),
                                  p));
            }
        }
        set(node, 0, out);
        return;
    }
    case OpKind::MaxPool:
    case OpKind::AveragePool: {
        const auto kernel = node.attrs.getInts("kernel_shape", {});
        if (!x || kernel.empty() || x->size() < 3)
            return;
        Shape out{(*x)[0], (*x)[1]};
        for (const auto d : windowed(node, *x, kernel, node.attrs.getInt("ceil_mode", 0) != 0))
            out.push_back(d);
        set(node, 0, out);
        return;
    }
    case OpKind::GlobalAveragePool:
    case OpKind::GlobalMaxPool:
        if (x && x->size() >= 3) {
            Shape out(*x);
            std::fill(out.begin() + 2, out.end(), 1);
            set(node, 0, out);
        }
        return;
    case OpKind::Gemm: {
        const Shape* b = shape(node, 1);
        if (!x || !b || x->size() != 2 || b->size() != 2)
            return;
        const bool ta = node.attrs.getInt("transA", 0) != 0;
        const bool tb = node.attrs.getInt("transB", 0) != 0;
        set(node, 0, {(*x)[ta ? 1 : 0], (*b)[tb ? 0 : 1]});
        return;
    }
    case OpKind::MatMul: {
        const Shape* b = shape(node, 1);
        if (!x || !b || x->empty() || b->empty())
            return;
        Shape a2 = *x, b2 = *b;
        if (a2.size() == 1)
            a2.insert(a2.begin(), 1);
        if (b2.size() == 1)
            b2.push_back(1);
        const auto batch =
            broadcast(Shape(a2.begin(), a2.end() - 2), Shape(b2.begin(), b2.end() - 2));
        if (!batch || a2.back() != b2[b2.size() - 2])
            return;
        Shape out = *batch;
        if (x->size() > 1)
            out.push_back(a2[a2.size() - 2]);
        if (b->size() > 1)
            out.push_back(b2.back());
        set(node, 0, out);
        return;
    }
    case OpKind::Flatten: {
        if (!x)
            return;
        const auto rank = static_cast<std::int64_t>(x->size());
        std::int64_t axis = node.attrs.getInt("axis", 1);
        if (axis < -rank || axis > rank)
            throw Malformed{"attribute 'axis' is " + std::to_string(axis) + ", outside " +
                            std::to_string(-rank) + ".." + std::to_string(rank) +
                            " for its rank-" + std::to_string(rank) + " input"};
        if (axis < 0)
            axis += rank;
        const std::int64_t outer = numel(Shape(x->begin(), x->begin() + axis));
        set(node, 0, {outer, outer == 0 ? 0 : numel(*x) / outer});
        return;
    }
    case OpKind::Reshape: {
        const Shape* v = value(node, 1);
        if (!x || !v)
            return;
        Shape out = *v;
        const bool allowZero = node.attrs.getInt("allowzero", 0) != 0;
        std::int64_t known = 1;
        int infer = -1;
        for (std::size_t i = 0; i < out.size(); ++i) {
            if (out[i] == 0 && !allowZero) {
                if (i >= x->size())
                    return;
                out[i] = (*x)[i];
            }
            if (out[i] < -1)
                return;
            if (out[i] == -1) {
                if (infer >= 0)
                    return;
                infer = static_cast<int>(i);
            } else {
                known = mul(known, out[i]);
            }
        }
        if (infer >= 0) {
            if (known == 0 || numel(*x) % known != 0)
                return;
            out[static_cast<std::size_t>(infer)] = numel(*x) / known;
        }
        if (numel(out) != numel(*x))
            return;
        if (const Shape* xv = value(node, 0))
            setValue(node, 0, out, *xv);
        else
            set(node, 0, out);
        return;
    }
    case OpKind::Transpose: {
        if (!x)
            return;
        Shape reversed(x->size());
        std::iota(reversed.rbegin(), reversed.rend(), 0);
        const auto perm = node.attrs.getInts("perm", reversed);
        if (perm.size() != x->size())
            return;
        const auto rank = static_cast<std::int64_t>(x->size());
        Shape out;
        for (const auto p : perm)
            out.push_back((*x)[static_cast<std::size_t>(axisOf(p, rank))]);
        set(node, 0, out);
        return;
    }
    case OpKind::Concat: {
        if (!x || x->empty())
            return;
        const std::size_t axis = static_cast<std::size_t>(
            axisOf(node.attrs.getInt("axis", 0), static_cast<std::int64_t>(x->size())));
        Shape out = *x;
        out[axis] = 0;
        Shape values;
        bool allValues = x->size() == 1;
        for (std::size_t i = 0; i < node.inputs.size(); ++i) {
            const Shape* s = shape(node, i);
            if (!s || s->size() != x->size())
                return;
            out[axis] = add(out[axis], (*s)[axis]);
            const Shape* v = value(node, i);
            if (allValues && v)
                values.insert(values.end(), v->begin(), v->end());
            else
                allValues = false;
        }
        if (allValues)
            setValue(node, 0, out, values);
        else
            set(node, 0, out);
        return;
    }
    case OpKind::Gather: {
        const Shape* idx = shape(node, 1);
        if (!x || !idx || x->empty())
            return;
        const auto rank = static_cast<std::int64_t>(x->size());
        const auto axis = static_cast<std::size_t>(axisOf(node.attrs.getInt("axis", 0), rank));
        Shape out(x->begin(), x->begin() + static_cast<std::ptrdiff_t>(axis));
        out.insert(out.end(), idx->begin(), idx->end());
        out.insert(out.end(), x->begin() + static_cast<std::ptrdiff_t>(axis) + 1, x->end());
        const Shape* data = value(node, 0);
        const Shape* indices = value(node, 1);
        if (data && indices && rank == 1) {
            Shape v;
            for (auto i : *indices) {
                if (i < 0)
                    i += (*x)[0];
                if (i < 0 || i >= (*x)[0] || static_cast<std::size_t>(i) >= data->size())
                    return;
                v.push_back((*data)[static_cast<std::size_t>(i)]);
            }
            setValue(node, 0, out, v);
            return;
        }
        set(node, 0, out);
        return;
    }
    case OpKind::Unsqueeze: {
        const auto ax = axes(node, 1);
        if (!x || !ax || ax->empty())
            return;
        const auto rank = static_cast<std::int64_t>(x->size() + ax->size());
        std::vector<bool> inserted(static_cast<std::size_t>(rank), false);
        for (const auto a : *ax)
            inserted[static_cast<std::size_t>(axisOf(a, rank))] = true;
        Shape out;
        std::size_t next = 0;
        for (std::int64_t d = 0; d < rank; ++d) {
            if (inserted[static_cast<std::size_t>(d)])
                out.push_back(1);
            else if (next < x->size())
                out.push_back((*x)[next++]);
            else
                return;  // repeated axes
        }
        if (next != x->size())
            return;
        if (const Shape* v = value(node, 0))
            setValue(node, 0, out, *v);
        else
            set(node, 0, out);
        return;
    }
    case OpKind::Squeeze: {
        if (!x)
            return;
        const auto ax = axes(node, 1);
        const auto rank = static_cast<std::int64_t>(x->size());
        std::vector<bool> drop(x->size(), false);
        if (ax) {
            for (const auto a : *ax)
                drop[static_cast<std::size_t>(axisOf(a, rank))] = true;
        } else {
            for (std::size_t d = 0; d < x->size(); ++d)
                drop[d] = (*x)[d] == 1;
        }
        Shape out;
        for (std::size_t d = 0; d < x->size(); ++d)
            if (!drop[d])
                out.push_back((*x)[d]);
        if (const Shape* v = value(node, 0))
            setValue(node, 0, out, *v);
        else
            set(node, 0, out);
        return;
    }
    case OpKind::Slice: {
        const Shape* starts = value(node, 1);
        const Shape* ends = value(node, 2);
        if (!x || !starts || !ends)
            return;
        Shape ax;
        if (present(node, 3)) {
            const Shape* v = value(node, 3);
            if (!v)
                return;
            ax = *v;
        } else {
            for (std::size_t i = 0; i < starts->size(); ++i)
                ax.push_back(static_cast<std::int64_t>(i));
        }
        Shape steps(starts->size(), 1);
        if (present(node, 4)) {
            const Shape* v = value(node, 4);
            if (!v)
                return;
            steps = *v;
        }
        if (ends->size() != starts->size() || ax.size() != starts->size() ||
            steps.size() != starts->size())
            return;
        Shape out = *x;
        const auto rank = static_cast<std::int64_t>(x->size());
        std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> ranges;
        for (std::size_t i = 0; i < starts->size(); ++i) {
            const auto axis = static_cast<std::size_t>(axisOf(ax[i], rank));
            const std::int64_t dim = (*x)[axis];
            const std::int64_t step = steps[i];
            if (step == 0)
                return;
            std::int64_t s = (*starts)[i], e = (*ends)[i];
            if (s < 0)
                s += dim;
            if (e < 0)
                e += dim;
            if (step > 0) {
                s = std::clamp<std::int64_t>(s, 0, dim);
                e = std::clamp<std::int64_t>(e, 0, dim);
                out[axis] = e > s ? add(e - s, step - 1) / step : 0;
            } else {
                s = std::clamp<std::int64_t>(s, 0, dim - 1);
                e = std::clamp<std::int64_t>(e, -1, dim - 1);
                // ceil((s - e) / -step); a step of INT64_MIN takes the first element only.
                const std::int64_t back =
                    step == std::numeric_limits<std::int64_t>::min() ? 0 : -step;
                out[axis] = s <= e ? 0 : back == 0 ? 1 : (s - e - 1) / back + 1;
            }
            ranges.emplace_back(s, e, step);
        }
        const Shape* v = value(node, 0);
        if (v && rank == 1) {
            const auto [s, e, step] = ranges.front();
            Shape sliced;
            // out[0] elements from s by step: each index lies in [0, dim) by construction.
            for (std::int64_t k = 0; k < out[0]; ++k) {
                const std::int64_t i = s + k * step;
                if (i < 0 || static_cast<std::size_t>(i) >= v->size())
                    return;
                sliced.push_back((*v)[static_cast<std::size_t>(i)]);
            }
            setValue(node, 0, out, sliced);
            return;
        }
        set(node, 0, out);
        return;
    }
    case OpKind::Split: {
        if (!x || x->empty())
            return;
        const std::size_t axis = static_cast<std::size_t>(
            axisOf(node.attrs.getInt("axis", 0), static_cast<std::int64_t>(x->size())));
        const std::int64_t dim = (*x)[axis];
        Shape sizes;
        if (present(node, 1)) {
            const Shape* v = value(node, 1);
            if (!v)
                return;
            sizes = *v;
        } else if (node.attrs.has("split")) {
            sizes = node.attrs.getInts("split", {});
        }
        if (sizes.empty()) {
            const std::int64_t n =
                node.attrs.getInt("num_outputs", static_cast<std::int64_t>(node.outputs.size()));
            if (n < 1)
                return;
            const std::int64_t chunk = add(dim, n - 1) / n;
            for (std::int64_t left = dim; left > 0; left -= chunk)
                sizes.push_back(std::min(chunk, left));
        }
        std::int64_t total = 0;
        for (const std::int64_t s : sizes) {
            if (s < 0)
                return;
            total = add(total, s);
        }
        if (total != dim)
            return;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            Shape out = *x;
            out[axis] = sizes[i];
            set(node, i, out);
        }
        return;
    }
    case OpKind::Expand: {
        const Shape* v = value(node, 1);
        if (!x || !v)
            return;
        if (auto out = broadcast(*x, *v))
            set(node, 0, *out);
        return;
    }
    case OpKind::Tile: {
        const Shape* v = value(node, 1);
        if (!x || !v || v->size() != x->size())
            return;
        Shape out = *x;
        for (std::size_t d = 0; d < out.size(); ++d)
            out[d] = mul(out[d], (*v)[d]);
        set(node, 0, out);
        return;
    }
    case OpKind::ReduceMean: case OpKind::ReduceSum: case OpKind::ReduceMax:
    case OpKind::ReduceMin: case OpKind::ReduceProd: case OpKind::ReduceL1:
    case OpKind::ReduceL2: case OpKind::ReduceLogSumExp: case OpKind::ReduceSumSquare: {
        if (!x)
            return;
        auto ax = axes(node, 1);
        const auto rank = static_cast<std::int64_t>(x->size());
        if (!ax || ax->empty()) {
            if (node.attrs.getInt("noop_with_empty_axes", 0) != 0) {
                set(node, 0, *x);
                return;
            }
            ax = Shape(x->size());
            std::iota(ax->begin(), ax->end(), 0);
        }
        std::vector<bool> reduced(x->size(), false);
        for (const auto a : *ax)
            reduced[static_cast<std::size_t>(axisOf(a, rank))] = true;
        const bool keep = node.attrs.getInt("keepdims", 1) != 0;
        Shape out;
        for (std::size_t d = 0; d < x->size(); ++d) {
            if (!reduced[d])
                out.push_back((*x)[d]);
            else if (keep)
                out.push_back(1);
        }
        set(node, 0, out);
        return;
    }
    case OpKind::Range: {
        const Shape* s = value(node, 0);
        const Shape* l = value(node, 1);
        const Shape* d = value(node, 2);
        if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1 ||
            (*d)[0] == 0)
            return;
        const std::int64_t step = (*d)[0];
        const std::int64_t span = add(sub((*l)[0], (*s)[0]), step + (step > 0 ? -1 : 1));
        if (step == -1 && span == std::numeric_limits<std::int64_t>::min())
            return;  // INT64_MIN / -1
        const std::int64_t count = std::max<std::int64_t>(span / step, 0);
        if (count <= kMaxTrackedValues) {
            Shape v;
            for (std::int64_t i = 0; i < count; ++i)
                v.push_back(add((*s)[0], mul(i, step)));
            setValue(node, 0, {count}, v);
        } else {
            set(node, 0, {count});
        }
        return;
    }
    case OpKind::Shape: {
        if (!x)
            return;
        const auto rank = static_cast<std::int64_t>(x->size());
        auto clampIndex = [rank](std::int64_t i) {
            return std::clamp<std::int64_t>(i < 0 ? i + rank : i, 0, rank);
        };
        const std::int64_t start = clampIndex(node.attrs.getInt("start", 0));
        const std::int64_t end = clampIndex(node.attrs.getInt("end", rank));
        Shape v;
        for (std::int64_t d = start; d < end; ++d)
            v.push_back((*x)[static_cast<std::size_t>(d)]);
        setValue(node, 0, {static_cast<std::int64_t>(v.size())}, v);
        return;
    }
    case OpKind::Pad: {
        const Shape* pads = value(node, 1);
        if (!x || !pads || pads->size() != 2 * x->size())
            return;
        Shape out = *x;
        for (std::size_t d = 0; d < out.size(); ++d) {
            const std::int64_t before = (*pads)[d];
            const std::int64_t after = (*pads)[d + out.size()];
            if (std::abs(before) > kMaxValueElements || std::abs(after) > kMaxValueElements)
                throw Malformed{"pads " + listText(*pads) + " hold more than 2^40"};
            out[d] = add(out[d], before + after);
        }
        set(node, 0, out);
        return;
    }
    case OpKind::Resize: {
        if (!x)
            return;
        if (const Shape* sizes = value(node, 3); sizes && sizes->size() == x->size()) {
            set(node, 0, *sizes);
            return;
        }
        // Scales are floats: read them from the initializer itself.
        if (!present(node, 2))
            return;
        const at::Tensor* scales = m_graph.initializer(node.inputs[2]);
        if (!scales || scales->numel() != static_cast<std::int64_t>(x->size()))
            return;
        const at::Tensor s = scales->to(at::kCPU).to(at::kDouble).contiguous();
        Shape out;
        for (std::size_t d = 0; d < x->size(); ++d) {
            const double size = std::floor(static_cast<double>((*x)[d]) * s.data_ptr<double>()[d]);
            if (size < 0)
                return;  // a negative scale
            if (!(size <= static_cast<double>(kMaxValueElements))) {
                char text[32];
                std::snprintf(text, sizeof text, "%.4g", size);
                throw Malformed{"scales '" + node.inputs[2] + "' make dimension " +
                                std::to_string(d) + " " + text + ", more than 2^40"};
            }
            out.push_back(static_cast<std::int64_t>(size));
        }
        set(node, 0, out);
        return;
    }
    case OpKind::DepthToSpace:
    case OpKind::SpaceToDepth: {
        const std::int64_t b = node.attrs.getInt("blocksize", 0);
        if (!x || x->size() != 4 || b < 1)
            return;
        const std::int64_t bb = mul(b, b);
        if (node.op == OpKind::DepthToSpace)
            set(node, 0, {(*x)[0], (*x)[1] / bb, mul((*x)[2], b), mul((*x)[3], b)});
        else
            set(node, 0, {(*x)[0], mul((*x)[1], bb), (*x)[2] / b, (*x)[3] / b});
        return;
    }
    case OpKind::ArgMax:
    case OpKind::ArgMin: {
        if (!x)
            return;
        const auto rank = static_cast<std::int64_t>(x->size());
        const auto axis = static_cast<std::size_t>(axisOf(node.attrs.getInt("axis", 0), rank));
        Shape out = *x;
        if (node.attrs.getInt("keepdims", 1) != 0)
            out[axis] = 1;
        else
            out.erase(out.begin() + static_cast<std::ptrdiff_t>(axis));
        set(node, 0, out);
        return;
    }
    case OpKind::TopK: {
        const Shape* k = value(node, 1);
        if (!x || !k || k->size() != 1 || x->empty())
            return;
        const auto rank = static_cast<std::int64_t>(x->size());
        Shape out = *x;
        out[static_cast<std::size_t>(axisOf(node.attrs.getInt("axis", -1), rank))] = (*k)[0];
        set(node, 0, out);
        set(node, 1, out);
        return;
    }
    case OpKind::GatherElements:
        if (const Shape* idx = shape(node, 1))
            set(node, 0, *idx);
        return;
    case OpKind::GatherND: {
        const Shape* idx = shape(node, 1);
        const std::int64_t b = node.attrs.getInt("batch_dims", 0);
        if (!x || !idx || idx->empty())
            return;
        const std::int64_t k = idx->back();
        const auto rank = static_cast<std::int64_t>(x->size());
        if (k < 1 || b < 0 || b > rank || k > rank - b)
            return;
        Shape out(idx->begin(), idx->end() - 1);
        out.insert(out.end(), x->begin() + b + k, x->end());
        set(node, 0, out);
        return;
    }
    case OpKind::Einsum: {
        if (auto out = einsumShape(node))
            set(node, 0, *out);
        return;
    }
    case OpKind::LSTM:
    case OpKind::GRU:
    case OpKind::RNN: {
        const Shape* r = shape(node, 2);
        if (!x || x->size() != 3)
            return;
        const std::int64_t hidden =
            node.attrs.getInt("hidden_size", r && r->size() == 3 ? (*r)[2] : 0);
        const std::int64_t dirs =
            node.attrs.getString("direction", "forward") == "bidirectional" ? 2 : 1;
        const bool batchFirst = node.attrs.getInt("layout", 0) != 0;
        const std::int64_t seq = (*x)[batchFirst ? 1 : 0];
        const std::int64_t batch = (*x)[batchFirst ? 0 : 1];
        set(node, 0,
            batchFirst ? Shape{batch, seq, dirs, hidden} : Shape{seq, dirs, batch, hidden});
        const Shape state = batchFirst ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
        set(node, 1, state);
        if (node.op == OpKind::LSTM)
            set(node, 2, state);
        return;
    }
    default: return;  // unknown here: its outputs and what reads them stay out
    }
}

} // namespace

Result<std::vector<std::vector<std::int64_t>>>
sampleInputShapes(const Graph& graph, const std::vector<std::vector<std::int64_t>>& inputShapes)
{
    // Sequence models (metadata "task" lm / embedding / sequence) trace one token or step.
    const auto task = graph.metadata.find("task");
    const bool sequenceModel = task != graph.metadata.end() && task->second != "classification";
    std::vector<Shape> shapes;
    for (std::size_t i = 0; i < graph.inputs.size(); ++i) {
        const auto& info = graph.inputs[i];
        Shape shape =
            i < inputShapes.size() && !inputShapes[i].empty() ? inputShapes[i] : info.shape;
        for (std::size_t d = 0; d < shape.size(); ++d) {
            if (shape[d] >= 0)
                continue;
            if (d != 0 && !sequenceModel)
                return Error::unsupported({}, "input '" + info.name + "' has a dynamic dimension " +
                                                  std::to_string(d) +
                                                  "; give its size to infer shapes");
            shape[d] = 1;
        }
        shapes.push_back(std::move(shape));
    }
    return shapes;
}

Result<void> checkShapes(const Graph& graph, const std::string& path)
{
    for (const auto& node : graph.nodes)
        if (auto why = attributeProblem(node))
            return Error::badInput(path, label(node) + ": " + *why);
    auto samples = sampleInputShapes(graph);
    if (!samples)
        return {};  // a dynamic dimension: the attributes above are all that can be checked
    Inference inference(graph, true);
    inference.run(*samples);
    if (inference.problem())
        return Error::badInput(path, *inference.problem());
    return {};
}

Result<ShapeMap> inferShapes(const Graph& graph,
                             const std::vector<std::vector<std::int64_t>>& inputShapes)
{
    auto samples = sampleInputShapes(graph, inputShapes);
    if (!samples)
        return samples.error();
    Inference inference(graph);
    inference.run(*samples);
    return std::move(inference).shapes();
}

} // namespace bitlens::ir

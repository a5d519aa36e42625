#pragma once
// The model representation every reader produces and every pass consumes: an ONNX-like graph of
// nodes that read and write named values, with weights (initializers) held as LibTorch tensors.
// Nodes are kept in topological order; value names are unique in a graph.

#include "jobs/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace bitlens::ir {

/// The operators the executor runs. Names follow ONNX op_type (see opKindName).
enum class OpKind {
    Conv,              ///< ONNX Conv (2-D): X[N,C,H,W], W[M,C/group,kH,kW], optional B[M]
    Gemm,              ///< ONNX Gemm: Y = alpha * A' * B' + beta * C (Linear when transB = 1)
    MatMul,            ///< ONNX MatMul with numpy broadcasting
    BatchNorm,         ///< ONNX BatchNormalization: X, scale, B, mean, var
    Relu,
    Gelu,              ///< ONNX Gelu (opset 20), approximate = "none" | "tanh"
    Silu,              ///< x * sigmoid(x); written to ONNX as Sigmoid + Mul
    Sigmoid,
    Tanh,
    MaxPool,           ///< 2-D, kernel_shape, strides, pads, dilations, ceil_mode
    AveragePool,       ///< 2-D, kernel_shape, strides, pads, ceil_mode, count_include_pad
    GlobalAveragePool,
    Add,
    Sub,
    Mul,
    Div,
    Flatten,           ///< axis (default 1)
    Reshape,           ///< shape from a constant int64 input; 0 copies, -1 infers
    Transpose,         ///< perm
    Softmax,           ///< axis (default -1, opset 13 semantics)
    Concat,            ///< axis
    Identity,
    Dropout,           ///< identity at inference
    // Sequence models (transformers, LLMs, RNNs). Axes/starts/... are int64 inputs (opset 13+).
    LayerNorm,         ///< ONNX LayerNormalization: X, Scale, B?; axis (-1), epsilon (1e-5)
    RMSNorm,           ///< ONNX RMSNormalization (opset 23): X, Scale; axis, epsilon, in float32
    Gather,            ///< data, int64 indices (negative counts from the end); axis (0)
    Unsqueeze,         ///< data, axes
    Squeeze,           ///< data, axes? (all size-1 dimensions when omitted)
    Slice,             ///< data, starts, ends, axes?, steps?
    Split,             ///< input, split?; axis (0); equal parts over the outputs without split
    Cast,              ///< to (ONNX TensorProto.DataType code)
    Where,             ///< condition, X, Y
    Expand,            ///< input, shape (numpy broadcast of the two shapes)
    Equal,
    Less,
    Greater,
    Pow,
    Sqrt,
    ReduceMean,        ///< data, axes? (or the axes attribute before opset 18); keepdims (1)
    Erf,
    Neg,
    Cos,
    Sin,
    Range,             ///< start, limit, delta (scalars)
    Shape,             ///< int64 sizes of the input; start, end (opset 15)
    RotaryEmbedding,   ///< ONNX opset 23: X [B,heads,S,hd] or [B,S,hidden], cos, sin, position_ids?
    LSTM,              ///< ONNX LSTM: X, W, R, B?, sequence_lens?, initial_h?, initial_c?, P?
    GRU,               ///< ONNX GRU: X, W, R, B?, sequence_lens?, initial_h?; linear_before_reset
    /// ONNX QuantizeLinear (opset 21): y = saturate(round_half_even(x / y_scale) + y_zero_point);
    /// per-tensor, per-axis (`axis`) or blocked (`block_size`); int8/uint8/int4/uint4 (int4
    /// held one code per int8/uint8 element) and float8 (`saturate`) outputs.
    QuantizeLinear,
    /// ONNX DequantizeLinear (opset 21): y = (x - x_zero_point) * x_scale in float32, same
    /// per-tensor / per-axis / blocked layouts as QuantizeLinear.
    DequantizeLinear,
    /// ONNX DynamicQuantizeLinear: uint8 codes, scale and zero point of the whole tensor,
    /// range widened to include 0.
    DynamicQuantizeLinear,
    // CNN ops (MobileNet-style exports). Files of opsets 7-12 are converted on import to the
    // opset-13 forms below (attributes that became inputs are initializers).
    Clip,              ///< input, min?, max? (scalars; omitted means unbounded)
    HardSigmoid,       ///< max(0, min(1, alpha * x + beta)); alpha (0.2), beta (0.5)
    HardSwish,         ///< x * max(0, min(1, x / 6 + 0.5))
    LeakyRelu,         ///< alpha (0.01)
    PRelu,             ///< X, slope (unidirectional broadcast to X)
    Elu,               ///< alpha (1)
    Selu,              ///< alpha (1.67326...), gamma (1.0507...)
    Softplus,          ///< log(1 + exp(x))
    Resize,            ///< X, roi?, scales?, sizes?; mode nearest | linear, coordinate modes
    ConvTranspose,     ///< 1-D/2-D/3-D: X, W[C, M/group, k...], B?; pads, output_padding/shape
    Pad,               ///< data, pads (int64 [begins, ends]), constant_value?; mode
    Abs,
    Exp,
    Log,
    Reciprocal,
    Floor,
    Ceil,
    Min,               ///< variadic, numpy broadcast
    Max,               ///< variadic, numpy broadcast
    Sum,               ///< variadic, numpy broadcast
    Mean,              ///< variadic, numpy broadcast
    ReduceSum,         ///< data, axes? (input from opset 13); keepdims, noop_with_empty_axes
    ReduceMax,         ///< data, axes? (the axes attribute before opset 18); keepdims
    ReduceMin,         ///< data, axes? (the axes attribute before opset 18); keepdims
    InstanceNorm,      ///< ONNX InstanceNormalization: input, scale, B; epsilon (1e-5)
    Tile,              ///< input, repeats (int64)
    DepthToSpace,      ///< blocksize, mode DCR | CRD
    SpaceToDepth,      ///< blocksize
    GlobalMaxPool,
    LogSoftmax,        ///< axis (default -1, opset 13 semantics)
    LRN,               ///< local response normalization across channels; size, alpha, beta, bias
    // Elementwise, logical and reduction ops of opsets 7-21 (cnn_ops.cpp).
    Mish,              ///< x * tanh(softplus(x)) (opset 18)
    /// ONNX GroupNormalization (opset 21): X [N, C, ...], scale [C], bias [C]; num_groups,
    /// epsilon (1e-5), stash_type. Opset 18's per-group scale / bias is converted on import.
    GroupNorm,
    Round,             ///< round half to even
    /// ONNX Mod (opset 10), numpy broadcast: fmod 0 (default) gives the remainder with the
    /// divisor's sign (Python's %), fmod 1 the one with the dividend's sign (C's fmod).
    Mod,
    Not,               ///< bool
    And,               ///< bool, numpy broadcast
    Or,                ///< bool, numpy broadcast
    Xor,               ///< bool, numpy broadcast
    ReduceProd,        ///< data, axes? (the axes attribute before opset 18); keepdims
    ReduceL1,          ///< sum |x|; axes as ReduceProd
    ReduceL2,          ///< sqrt(sum x^2); axes as ReduceProd
    ReduceLogSumExp,   ///< log(sum exp x); axes as ReduceProd
    ReduceSumSquare,   ///< sum x^2; axes as ReduceProd
    // Index, gather and scatter ops (index_ops.cpp).
    ArgMax,            ///< int64 index; axis (0), keepdims (1), select_last_index (0)
    ArgMin,            ///< int64 index; axis (0), keepdims (1), select_last_index (0)
    TopK,              ///< X, K (int64 [1], opset 10+); axis (-1), largest, sorted: values, indices
    CumSum,            ///< x, axis (scalar); exclusive (0), reverse (0)
    Trilu,             ///< input, k? (scalar); upper (1)
    GatherElements,    ///< data, indices (same rank); axis (0)
    GatherND,          ///< data, indices [..., k]; batch_dims (0)
    ScatterND,         ///< data, indices [..., k], updates; reduction none | add | mul | max | min
    NonZero,           ///< int64 [rank, count] coordinates of the nonzero elements, row-major
    Einsum,            ///< equation, variadic inputs
    // Sequence models (sequence_ops.cpp), next to LSTM and GRU.
    RNN,               ///< ONNX RNN: X, W, R, B?, sequence_lens?, initial_h?; activations
};

/// ONNX op_type spelling of an op ("BatchNormalization" for BatchNorm).
std::string_view opKindName(OpKind op);
/// The OpKind for an ONNX op_type, or nullopt when BitLens does not run it.
std::optional<OpKind> opKindFromName(std::string_view opType);

/// Element types of graph values; codes match ONNX TensorProto.DataType.
enum class DType : int {
    Float32 = 1,
    UInt8 = 2,
    Int8 = 3,
    Int32 = 6,
    Int64 = 7,
    Bool = 9,
    Float16 = 10,
    Float64 = 11,
    BFloat16 = 16,
    Float8E4M3FN = 17,
    Float8E5M2 = 19,
    UInt4 = 21,  ///< held in memory as uint8 codes 0..15, one per byte; packed two per byte in files
    Int4 = 22,   ///< held in memory as int8 codes -8..7, one per byte; packed two per byte in files
};

/// "float32", "int8", ... for display.
std::string_view dtypeName(DType dtype);
/// Bytes per element in memory (1 for Int4 / UInt4, whose files hold two per byte).
int dtypeSize(DType dtype);
/// Bytes `elements` values of `dtype` take in a file: ceil(elements / 2) for Int4 / UInt4.
std::int64_t dtypeStorageBytes(DType dtype, std::int64_t elements);

/// An attribute value: int, float, string, ints, floats or strings (the ONNX kinds BitLens
/// uses; strings for RNN activations).
using AttrValue = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>,
                               std::vector<double>, std::vector<std::string>>;

/// Named node attributes with typed getters that fall back to a default.
class Attributes {
public:
    void set(const std::string& name, AttrValue value) { m_values[name] = std::move(value); }
    bool has(const std::string& name) const { return m_values.count(name) != 0; }
    /// Removes `name` (no effect when absent).
    void erase(const std::string& name) { m_values.erase(name); }
    std::int64_t getInt(const std::string& name, std::int64_t fallback) const;
    double getFloat(const std::string& name, double fallback) const;
    std::string getString(const std::string& name, const std::string& fallback) const;
    std::vector<std::int64_t> getInts(const std::string& name,
                                      const std::vector<std::int64_t>& fallback) const;
    std::vector<double> getFloats(const std::string& name,
                                  const std::vector<double>& fallback) const;
    std::vector<std::string> getStrings(const std::string& name,
                                        const std::vector<std::string>& fallback) const;
    const std::map<std::string, AttrValue>& all() const { return m_values; }

private:
    std::map<std::string, AttrValue> m_values;
};

/// One operator application. Inputs and outputs are value names; an empty input name means an
/// omitted optional input (as in ONNX).
struct Node {
    std::string name;
    OpKind op = OpKind::Identity;
    std::vector<std::string> inputs;
    std::vector<std::string> outputs;
    Attributes attrs;
};

/// Name, element type and shape of a graph input or output; -1 marks a dynamic dimension.
struct ValueInfo {
    std::string name;
    DType dtype = DType::Float32;
    std::vector<std::int64_t> shape;
};

/// A model: inputs, outputs, nodes in topological order, and named constant tensors.
class Graph {
public:
    std::string name;
    std::vector<ValueInfo> inputs;
    std::vector<ValueInfo> outputs;
    std::vector<Node> nodes;
    std::map<std::string, at::Tensor> initializers; ///< weights and constants, CPU or device
    std::int64_t opsetVersion = 17;                 ///< ONNX default-domain opset it follows
    std::map<std::string, std::string> metadata;    ///< free-form key/value (ONNX metadata_props)
    /// Initializers whose file type is narrower than their tensor: Int4 / UInt4 codes held one
    /// per int8 / uint8 element. Writers pack them; parameterBytes() counts them packed.
    std::map<std::string, DType> initializerTypes;
    /// Initializers kept in their file's 16-bit float type (bf16 / fp16 views of the mapped
    /// file) that the graph reads as float32. Nothing widens them at open: the executor widens
    /// each one while a node reads it (so a layer's weights exist in float32 only while it
    /// runs), and widened() gives the whole graph in float32 for passes that rewrite weights.
    std::set<std::string> widenOnRead;

    /// The initializer called `name`, or nullptr when `name` is not a constant.
    const at::Tensor* initializer(const std::string& name) const;
    /// The initializer `valueName` as the graph reads it: float32 where it is in widenOnRead (a new
    /// tensor), else `tensor` itself. Throws std::runtime_error naming the tensor when the
    /// widened values hold NaN or infinity (16-bit weights are first checked here, not at open).
    at::Tensor readAs(const std::string& valueName, const at::Tensor& tensor) const;
    /// Checks structure: unique value names, every input defined before use, outputs produced.
    /// `path` is used in the error message.
    Result<void> validate(const std::string& path = {}) const;
    /// Elements in all floating-point initializers (what users call parameters).
    std::int64_t parameterCount() const;
    /// Bytes of all initializers as stored.
    std::int64_t parameterBytes() const;
    /// Bytes of one initializer as stored (Int4 / UInt4 ones packed two per byte).
    std::int64_t initializerBytes(const std::string& valueName, const at::Tensor& tensor) const;
    /// Parameters read by one node (its initializer inputs).
    std::int64_t nodeParameterCount(const Node& node) const;
    /// Bytes of the initializers read by one node.
    std::int64_t nodeParameterBytes(const Node& node) const;
    /// Index of the node producing `value`, or nullopt for graph inputs and initializers.
    std::optional<std::size_t> producerOf(const std::string& value) const;
};

/// `graph` with every widenOnRead initializer widened to float32 (checked for NaN and
/// infinity; BadInput naming the tensor otherwise) and widenOnRead empty. Tensors shared by two
/// initializers (a tied embedding and its transposed LM-head view) stay shared.
Result<Graph> widened(const Graph& graph, const std::string& path = {});

/// Options of a 2-D convolution for GraphBuilder::conv2d.
struct Conv2dOptions {
    std::int64_t stride = 1;
    std::int64_t padding = 0;
    std::int64_t dilation = 1;
    std::int64_t groups = 1;
};

/// Builds graphs in code (tests, the demo zoo). Every call adds a node and returns the name of
/// its output value; weights become initializers named "<node>.weight", "<node>.bias", ...
class GraphBuilder {
public:
    explicit GraphBuilder(std::string graphName);

    /// Declares a graph input; -1 in `shape` marks a dynamic dimension (batch).
    std::string input(const std::string& name, std::vector<std::int64_t> shape,
                      DType dtype = DType::Float32);
    /// Adds a constant tensor and returns its value name.
    std::string constant(const std::string& name, const at::Tensor& value);
    /// Marks a value as a graph output.
    void output(const std::string& value);

    std::string conv2d(const std::string& name, const std::string& x, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, Conv2dOptions options = {});
    /// y = x W^T + b, stored as Gemm(transB = 1); weight is [out, in].
    std::string linear(const std::string& name, const std::string& x, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias);
    std::string matmul(const std::string& name, const std::string& a, const std::string& b);
    std::string batchNorm(const std::string& name, const std::string& x, const at::Tensor& scale,
                          const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& var,
                          double epsilon = 1e-5);
    std::string unary(const std::string& name, OpKind op, const std::string& x);
    std::string binary(const std::string& name, OpKind op, const std::string& a,
                       const std::string& b);
    std::string maxPool(const std::string& name, const std::string& x, std::int64_t kernel,
                        std::int64_t stride, std::int64_t padding = 0);
    std::string avgPool(const std::string& name, const std::string& x, std::int64_t kernel,
                        std::int64_t stride, std::int64_t padding = 0);
    std::string globalAvgPool(const std::string& name, const std::string& x);
    std::string flatten(const std::string& name, const std::string& x, std::int64_t axis = 1);
    std::string reshape(const std::string& name, const std::string& x,
                        const std::vector<std::int64_t>& shape);
    std::string softmax(const std::string& name, const std::string& x, std::int64_t axis = -1);
    std::string concat(const std::string& name, const std::vector<std::string>& xs,
                       std::int64_t axis);
    /// Adds any node; its single output is named after the node.
    std::string node(const std::string& name, OpKind op, std::vector<std::string> inputs,
                     Attributes attrs = {});

    /// The graph built so far, validated.
    Result<Graph> build() const;

private:
    Graph m_graph;
};

} // namespace bitlens::ir

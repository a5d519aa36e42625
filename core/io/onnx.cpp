#include "io/onnx.h"

#include "io/file_util.h"
#include "io/onnx_import.h"
#include "io/protobuf.h"
#include "ir/shape_inference.h"
#include "jobs/guard.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <bit>
#include <algorithm>
#include <charconv>
#include <cstring>
#include <iterator>
#include <limits>
#include <new>
#include <set>
#include <stdexcept>

namespace bitlens::io {

namespace {

// raw_data is little-endian by definition; we copy it into tensors byte for byte.
static_assert(std::endian::native == std::endian::little,
              "the ONNX reader assumes a little-endian host");

// Field numbers from onnx.proto (checked against onnx 1.17+).
struct ModelProto {
    enum : std::uint32_t {
        kIrVersion = 1,
        kProducerName = 2,
        kProducerVersion = 3,
        kGraph = 7,
        kOpsetImport = 8,
        kMetadataProps = 14,
    };
};
struct OperatorSetIdProto {
    enum : std::uint32_t { kDomain = 1, kVersion = 2 };
};
struct StringStringEntryProto {
    enum : std::uint32_t { kKey = 1, kValue = 2 };
};
struct GraphProto {
    enum : std::uint32_t {
        kNode = 1,
        kName = 2,
        kInitializer = 5,
        kInput = 11,
        kOutput = 12,
        kValueInfo = 13,
        kSparseInitializer = 15,
    };
};
struct NodeProto {
    enum : std::uint32_t {
        kInput = 1,
        kOutput = 2,
        kName = 3,
        kOpType = 4,
        kAttribute = 5,
        kDomain = 7,
    };
};
struct AttributeProto {
    enum : std::uint32_t {
        kName = 1,
        kF = 2,
        kI = 3,
        kS = 4,
        kT = 5,
        kG = 6,
        kFloats = 7,
        kInts = 8,
        kStrings = 9,
        kTensors = 10,
        kGraphs = 11,
        kType = 20,
        kSparseTensor = 22,
    };
};
/// AttributeProto.AttributeType.
enum class AttrType : std::int64_t {
    Undefined = 0,
    Float = 1,
    Int = 2,
    String = 3,
    Tensor = 4,
    Graph = 5,
    Floats = 6,
    Ints = 7,
    Strings = 8,
    Tensors = 9,
    Graphs = 10,
    SparseTensor = 11,
    SparseTensors = 12,
    TypeProto = 13,
    TypeProtos = 14,
};
struct TensorProto {
    enum : std::uint32_t {
        kDims = 1,
        kDataType = 2,
        kSegment = 3,
        kFloatData = 4,
        kInt32Data = 5,
        kInt64Data = 7,
        kName = 8,
        kRawData = 9,
        kDoubleData = 10,
        kExternalData = 13,
        kDataLocation = 14,
    };
};
struct ValueInfoProto {
    enum : std::uint32_t { kName = 1, kType = 2 };
};
struct TypeProto {
    enum : std::uint32_t { kTensorType = 1 };
    struct Tensor {
        enum : std::uint32_t { kElemType = 1, kShape = 2 };
    };
};
struct TensorShapeProto {
    enum : std::uint32_t { kDim = 1 };
    struct Dimension {
        enum : std::uint32_t { kDimValue = 1, kDimParam = 2 };
    };
};

constexpr std::int64_t kMinWriteOpset = 13;
constexpr std::int64_t kWriteIrVersion = 8;
constexpr std::int64_t kGeluOpset = 20;
constexpr std::int64_t kFloat8Opset = 19;     ///< float8 types, QuantizeLinear saturate
constexpr std::int64_t kBlockedQdqOpset = 21; ///< int4 / uint4, block_size, output_dtype

bool isInt4(ir::DType dtype) { return dtype == ir::DType::Int4 || dtype == ir::DType::UInt4; }

bool hasFloat8(const ir::Graph& graph)
{
    return std::any_of(graph.initializers.begin(), graph.initializers.end(), [](const auto& kv) {
        const auto type = kv.second.scalar_type();
        return type == at::kFloat8_e4m3fn || type == at::kFloat8_e5m2;
    });
}

/// Unpacks ONNX INT4 / UINT4 bytes (two values per byte, element 2k in the low nibble, a last
/// odd element in the low nibble of the last byte) into one code per element: int8 -8..7
/// (sign-extended: nibble 0xF is -1) or uint8 0..15.
void unpackInt4Codes(const std::uint8_t* src, std::int64_t count, bool isSigned, std::uint8_t* dst)
{
    for (std::int64_t i = 0; i < count; ++i) {
        const std::uint8_t nibble = (src[i / 2] >> ((i % 2) * 4)) & 0x0F;
        dst[i] = isSigned ? static_cast<std::uint8_t>((nibble ^ 0x08) - 0x08) : nibble;
    }
}
constexpr std::int64_t kDataLocationExternal = 1;

std::string inQuotes(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string shapeText(const std::vector<std::int64_t>& dims)
{
    std::string text = "[";
    for (std::size_t i = 0; i < dims.size(); ++i)
        text += (i ? ", " : "") + std::to_string(dims[i]);
    return text + "]";
}

/// Name of an ONNX TensorProto.DataType code for messages, also for types BitLens lacks.
std::string onnxTypeName(std::int64_t code)
{
    static constexpr std::string_view kNames[] = {
        "undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64", "string",
        "bool", "float16", "float64", "uint32", "uint64", "complex64", "complex128", "bfloat16",
        "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "uint4", "int4",
        "float4_e2m1"};
    if (code >= 0 && code < static_cast<std::int64_t>(std::size(kNames)))
        return std::string(kNames[code]);
    return "type " + std::to_string(code);
}

/// The ir::DType for an ONNX data type code BitLens holds, or nullopt.
std::optional<ir::DType> dtypeFromOnnx(std::int64_t code)
{
    switch (code) {
    case 1: return ir::DType::Float32;
    case 2: return ir::DType::UInt8;
    case 3: return ir::DType::Int8;
    case 6: return ir::DType::Int32;
    case 7: return ir::DType::Int64;
    case 9: return ir::DType::Bool;
    case 10: return ir::DType::Float16;
    case 11: return ir::DType::Float64;
    case 16: return ir::DType::BFloat16;
    case 17: return ir::DType::Float8E4M3FN;
    case 19: return ir::DType::Float8E5M2;
    case 21: return ir::DType::UInt4;
    case 22: return ir::DType::Int4;
    default: return std::nullopt;
    }
}

at::ScalarType scalarType(ir::DType dtype)
{
    switch (dtype) {
    case ir::DType::Float32: return at::kFloat;
    case ir::DType::UInt8: return at::kByte;
    case ir::DType::Int8: return at::kChar;
    case ir::DType::Int32: return at::kInt;
    case ir::DType::Int64: return at::kLong;
    case ir::DType::Bool: return at::kBool;
    case ir::DType::Float16: return at::kHalf;
    case ir::DType::Float64: return at::kDouble;
    case ir::DType::BFloat16: return at::kBFloat16;
    case ir::DType::Float8E4M3FN: return at::kFloat8_e4m3fn;
    case ir::DType::Float8E5M2: return at::kFloat8_e5m2;
    case ir::DType::UInt4: return at::kByte;  // one code per byte in memory
    case ir::DType::Int4: return at::kChar;
    }
    return at::kFloat;
}

std::optional<ir::DType> dtypeFromScalar(at::ScalarType type)
{
    switch (type) {
    case at::kFloat: return ir::DType::Float32;
    case at::kByte: return ir::DType::UInt8;
    case at::kChar: return ir::DType::Int8;
    case at::kInt: return ir::DType::Int32;
    case at::kLong: return ir::DType::Int64;
    case at::kBool: return ir::DType::Bool;
    case at::kHalf: return ir::DType::Float16;
    case at::kDouble: return ir::DType::Float64;
    case at::kBFloat16: return ir::DType::BFloat16;
    case at::kFloat8_e4m3fn: return ir::DType::Float8E4M3FN;
    case at::kFloat8_e5m2: return ir::DType::Float8E5M2;
    default: return std::nullopt;
    }
}

/// ONNX stores float attributes as float32. We widen them to the double a person would have
/// written: 1e-5f is 9.99999974737875e-06 as a double, but its shortest decimal form is "1e-05",
/// so it becomes 1e-5 exactly, and a graph written by BitLens reads back with the same values.
double widenFloat(float value)
{
    char text[64];
    const auto printed = std::to_chars(std::begin(text), std::end(text), value);
    double wide = static_cast<double>(value);
    if (printed.ec == std::errc())
        std::from_chars(std::begin(text), printed.ptr, wide);
    return wide;
}

std::string attrTypeName(AttrType type)
{
    static constexpr std::string_view kNames[] = {
        "UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS", "STRINGS",
        "TENSORS", "GRAPHS", "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
    const auto code = static_cast<std::int64_t>(type);
    if (code >= 0 && code < static_cast<std::int64_t>(std::size(kNames)))
        return std::string(kNames[code]);
    return std::to_string(code);
}

bool isDefaultDomain(std::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

// ---- Reading ----------------------------------------------------------------------------------

/// A tensor and where it started in the file.
struct DecodedTensor {
    std::string name;
    at::Tensor tensor;
    std::uint64_t offset = 0;
    std::optional<ir::DType> packedType;  ///< Int4 / UInt4: held one code per byte in `tensor`
};

/// An attribute as read, before it is turned into an ir::AttrValue.
struct RawAttribute {
    std::string name;
    AttrType type = AttrType::Undefined;
    std::uint64_t offset = 0;
    bool hasF = false;
    bool hasI = false;
    bool hasS = false;
    float f = 0.0f;
    std::int64_t i = 0;
    std::string s;
    std::vector<float> floats;
    std::vector<std::int64_t> ints;
    std::vector<std::string> strings;
    std::optional<pb::Field> t;  ///< TensorProto, decoded only for Constant / ConstantOfShape
    std::optional<pb::Field> g;  ///< GraphProto, decoded only for If
    int depth = 0;               ///< nesting level of a message held in `t` or `g`
    bool hasOther = false;       ///< graphs, tensors, sparse tensors, type protos
};

struct RawNode {
    std::string name;
    std::string opType;
    std::string domain;
    std::vector<std::string> inputs;
    std::vector<std::string> outputs;
    std::vector<RawAttribute> attributes;
    std::uint64_t offset = 0;
};

struct RawValueInfo {
    std::string name;
    bool isTensor = false;
    bool hasType = false;
    std::int64_t elemType = 0;
    std::vector<std::int64_t> shape;
    std::uint64_t offset = 0;
};

struct RawGraph {
    std::string name;
    std::vector<RawNode> nodes;
    std::vector<DecodedTensor> initializers;
    std::vector<RawValueInfo> inputs;
    std::vector<RawValueInfo> outputs;
};

class OnnxReader {
public:
    explicit OnnxReader(const std::string& path) : m_path(path) {}

    Result<ir::Graph> read(const std::vector<std::uint8_t>& bytes);

private:
    Result<void> decodeGraph(pb::Reader& reader, RawGraph& graph);
    Result<void> decodeNode(pb::Reader& reader, RawNode& node);
    Result<void> decodeAttribute(pb::Reader& reader, RawAttribute& attr);
    Result<void> decodeValueInfo(pb::Reader& reader, RawValueInfo& info);
    Result<void> decodeTensorType(pb::Reader& reader, RawValueInfo& info);
    Result<DecodedTensor> decodeTensor(pb::Reader& reader, const std::string& fallbackName);
    Result<ir::ValueInfo> convertValueInfo(const RawValueInfo& info, std::string_view role);
    Result<void> convertNode(RawNode& raw, ir::Graph& graph, std::set<std::string>& nodeNames);
    Result<void> addConstant(const RawNode& raw, ir::Graph& graph);
    Result<void> addConstantOfShape(const RawNode& raw, ir::Graph& graph,
                                    std::set<std::string>& nodeNames);
    Result<void> foldIf(const RawNode& raw, ir::Graph& graph, std::set<std::string>& nodeNames);
    std::optional<at::Tensor> constantValue(const std::string& value, const ir::Graph& graph,
                                            int depth) const;
    /// `value` as the graph calls it: If branches rename values that clash with outer ones.
    std::string resolve(const std::string& value) const;

    Error badInput(std::string message, std::uint64_t offset) const
    {
        return Error::badInput(m_path, std::move(message), offset);
    }
    Error unsupported(std::string message) const { return Error::unsupported(m_path, message); }

    const std::string& m_path;
    std::int64_t m_fileOpset = onnx_import::kInternalOpset;
    onnx_import::ValueNames m_valueNames;
    /// Renamed values of the If branches being folded, innermost last.
    std::vector<std::map<std::string, std::string>> m_scopes;
};

/// The node's name, or "<op_type>_<n>" (unique within the graph) when it has none.
std::string uniqueNodeName(const RawNode& raw, std::set<std::string>& nodeNames)
{
    if (!raw.name.empty())
        return raw.name;
    for (int n = 0;; ++n) {
        std::string candidate = raw.opType + "_" + std::to_string(n);
        if (nodeNames.insert(candidate).second)
            return candidate;
    }
}

Result<ir::Graph> OnnxReader::read(const std::vector<std::uint8_t>& bytes)
{
    if (bytes.empty())
        return badInput("file is empty", 0);

    // First pass over the top-level fields only: the opset decides whether the graph is worth
    // decoding, and protobuf writes opset_import (8) after graph (7).
    pb::Reader model(bytes, m_path, "ModelProto");
    std::optional<pb::Field> graphField;
    std::optional<std::int64_t> defaultOpset;
    ir::Graph graph;
    pb::Field field;
    while (model.next(field)) {
        switch (field.number) {
        case ModelProto::kIrVersion: model.int64(field, "ModelProto.ir_version"); break;
        case ModelProto::kProducerName: model.string(field, "ModelProto.producer_name"); break;
        case ModelProto::kGraph:
            model.bytes(field, "ModelProto.graph"); // checks the wire type
            graphField = field;
            break;
        case ModelProto::kOpsetImport: {
            auto opset = model.message(field, "OperatorSetIdProto");
            if (!opset)
                break;
            std::string domain;
            std::int64_t version = 0;
            pb::Field f;
            while (opset->next(f)) {
                if (f.number == OperatorSetIdProto::kDomain)
                    domain = opset->string(f, "OperatorSetIdProto.domain");
                else if (f.number == OperatorSetIdProto::kVersion)
                    version = opset->int64(f, "OperatorSetIdProto.version");
            }
            if (opset->failed())
                return opset->error();
            if (isDefaultDomain(domain))
                defaultOpset = version;
            break;
        }
        case ModelProto::kMetadataProps: {
            auto entry = model.message(field, "StringStringEntryProto");
            if (!entry)
                break;
            std::string key;
            std::string value;
            pb::Field f;
            while (entry->next(f)) {
                if (f.number == StringStringEntryProto::kKey)
                    key = entry->string(f, "StringStringEntryProto.key");
                else if (f.number == StringStringEntryProto::kValue)
                    value = entry->string(f, "StringStringEntryProto.value");
            }
            if (entry->failed())
                return entry->error();
            graph.metadata[key] = value;
            break;
        }
        default: break;
        }
    }
    if (model.failed())
        return model.error();
    if (!graphField)
        return badInput("no graph in the file (is it an ONNX model?)", 0);
    if (!defaultOpset)
        return badInput("the model imports no opset for the default ONNX domain", 0);
    if (*defaultOpset < onnx_import::kOldestOpset)
        return unsupported("opset " + std::to_string(*defaultOpset) +
                           " is not supported; BitLens reads ONNX opset " +
                           std::to_string(onnx_import::kOldestOpset) +
                           " and later (re-export the model with a newer opset)");
    if (*defaultOpset > onnx_import::kNewestOpset)
        return unsupported("opset " + std::to_string(*defaultOpset) +
                           " is newer than the newest BitLens knows (" +
                           std::to_string(onnx_import::kNewestOpset) +
                           "); re-export the model with opset " +
                           std::to_string(onnx_import::kNewestOpset) + " or older");
    // Older files are converted node by node to the opset-13 forms (see onnx_import.h), so the
    // graph follows opset 13 from then on.
    m_fileOpset = *defaultOpset;
    graph.opsetVersion = std::max(*defaultOpset, onnx_import::kInternalOpset);

    auto graphReader = model.message(*graphField, "GraphProto");
    if (!graphReader)
        return model.error();
    RawGraph raw;
    if (auto r = decodeGraph(*graphReader, raw); !r)
        return r.error();

    graph.name = raw.name;
    for (auto& init : raw.initializers) {
        if (graph.initializers.count(init.name) != 0)
            return badInput("initializer " + inQuotes(init.name) + " appears twice", init.offset);
        if (init.packedType)
            graph.initializerTypes[init.name] = *init.packedType;
        graph.initializers.emplace(init.name, std::move(init.tensor));
    }
    for (const auto& info : raw.inputs) {
        // Exporters before IR version 4 list every initializer as a graph input as well.
        if (graph.initializers.count(info.name) != 0)
            continue;
        auto value = convertValueInfo(info, "graph input");
        if (!value)
            return value.error();
        graph.inputs.push_back(std::move(value.value()));
    }
    for (const auto& info : raw.outputs) {
        auto value = convertValueInfo(info, "graph output");
        if (!value)
            return value.error();
        graph.outputs.push_back(std::move(value.value()));
    }
    std::set<std::string> nodeNames;
    for (auto& node : raw.nodes) {
        if (!node.name.empty())
            nodeNames.insert(node.name);
        for (const auto& name : node.inputs)
            m_valueNames.add(name);
        for (const auto& name : node.outputs)
            m_valueNames.add(name);
    }
    for (const auto& [name, tensor] : graph.initializers)
        m_valueNames.add(name);
    for (const auto& info : raw.inputs)
        m_valueNames.add(info.name);
    for (auto& node : raw.nodes)
        if (auto r = convertNode(node, graph, nodeNames); !r)
            return r.error();
    if (auto r = graph.validate(m_path); !r)
        return r.error();
    // Malformed attributes (a stride of 0, pads implying terabytes) are refused here, before
    // opening runs the graph.
    if (auto r = ir::checkShapes(graph, m_path); !r)
        return r.error();
    return graph;
}

Result<void> OnnxReader::decodeGraph(pb::Reader& reader, RawGraph& graph)
{
    pb::Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case GraphProto::kNode: {
            auto sub = reader.message(field, "NodeProto");
            if (!sub)
                return reader.error();
            RawNode node;
            node.offset = field.offset;
            if (auto r = decodeNode(*sub, node); !r)
                return r;
            graph.nodes.push_back(std::move(node));
            break;
        }
        case GraphProto::kName: graph.name = reader.string(field, "GraphProto.name"); break;
        case GraphProto::kInitializer: {
            auto sub = reader.message(field, "TensorProto");
            if (!sub)
                return reader.error();
            auto tensor = decodeTensor(*sub, {});
            if (!tensor)
                return tensor.error();
            if (tensor->name.empty())
                return badInput("an initializer has no name", field.offset);
            graph.initializers.push_back(std::move(tensor.value()));
            break;
        }
        case GraphProto::kInput:
        case GraphProto::kOutput: {
            auto sub = reader.message(field, "ValueInfoProto");
            if (!sub)
                return reader.error();
            RawValueInfo info;
            info.offset = field.offset;
            if (auto r = decodeValueInfo(*sub, info); !r)
                return r;
            (field.number == GraphProto::kInput ? graph.inputs : graph.outputs)
                .push_back(std::move(info));
            break;
        }
        case GraphProto::kSparseInitializer:
            return unsupported("the graph has sparse initializers, which BitLens does not "
                               "support");
        default: break; // value_info, doc_string, annotations: not needed to run the graph
        }
    }
    if (reader.failed())
        return reader.error();
    return {};
}

Result<void> OnnxReader::decodeNode(pb::Reader& reader, RawNode& node)
{
    pb::Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case NodeProto::kInput:
            node.inputs.emplace_back(reader.string(field, "NodeProto.input"));
            break;
        case NodeProto::kOutput:
            node.outputs.emplace_back(reader.string(field, "NodeProto.output"));
            break;
        case NodeProto::kName: node.name = reader.string(field, "NodeProto.name"); break;
        case NodeProto::kOpType: node.opType = reader.string(field, "NodeProto.op_type"); break;
        case NodeProto::kDomain: node.domain = reader.string(field, "NodeProto.domain"); break;
        case NodeProto::kAttribute: {
            auto sub = reader.message(field, "AttributeProto");
            if (!sub)
                return reader.error();
            RawAttribute attr;
            attr.offset = field.offset;
            if (auto r = decodeAttribute(*sub, attr); !r)
                return r;
            node.attributes.push_back(std::move(attr));
            break;
        }
        default: break;
        }
    }
    if (reader.failed())
        return reader.error();
    return {};
}

Result<void> OnnxReader::decodeAttribute(pb::Reader& reader, RawAttribute& attr)
{
    pb::Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case AttributeProto::kName: attr.name = reader.string(field, "AttributeProto.name"); break;
        case AttributeProto::kType:
            attr.type = static_cast<AttrType>(reader.int64(field, "AttributeProto.type"));
            break;
        case AttributeProto::kF:
            attr.f = reader.float32(field, "AttributeProto.f");
            attr.hasF = true;
            break;
        case AttributeProto::kI:
            attr.i = reader.int64(field, "AttributeProto.i");
            attr.hasI = true;
            break;
        case AttributeProto::kS:
            attr.s = reader.string(field, "AttributeProto.s");
            attr.hasS = true;
            break;
        case AttributeProto::kT:
            reader.bytes(field, "AttributeProto.t");
            attr.t = field;
            break;
        case AttributeProto::kFloats:
            reader.appendFloats(field, attr.floats, "AttributeProto.floats");
            break;
        case AttributeProto::kInts:
            reader.appendInt64s(field, attr.ints, "AttributeProto.ints");
            break;
        case AttributeProto::kG:
            reader.bytes(field, "AttributeProto.g");
            attr.g = field;
            attr.hasOther = true;
            break;
        case AttributeProto::kStrings:
            attr.strings.emplace_back(reader.string(field, "AttributeProto.strings"));
            break;
        case AttributeProto::kTensors:
        case AttributeProto::kGraphs:
        case AttributeProto::kSparseTensor: attr.hasOther = true; break;
        default: break;
        }
    }
    if (reader.failed())
        return reader.error();
    attr.depth = reader.depth() + 1;
    // IR version 1 files leave `type` out; infer it from the field that is set.
    if (attr.type == AttrType::Undefined) {
        if (attr.t)
            attr.type = AttrType::Tensor;
        else if (attr.g)
            attr.type = AttrType::Graph;
        else if (!attr.strings.empty())
            attr.type = AttrType::Strings;
        else if (!attr.floats.empty())
            attr.type = AttrType::Floats;
        else if (!attr.ints.empty())
            attr.type = AttrType::Ints;
        else if (attr.hasS)
            attr.type = AttrType::String;
        else if (attr.hasF)
            attr.type = AttrType::Float;
        else if (attr.hasI)
            attr.type = AttrType::Int;
    }
    return {};
}

Result<void> OnnxReader::decodeValueInfo(pb::Reader& reader, RawValueInfo& info)
{
    pb::Field field;
    while (reader.next(field)) {
        if (field.number == ValueInfoProto::kName) {
            info.name = reader.string(field, "ValueInfoProto.name");
        } else if (field.number == ValueInfoProto::kType) {
            auto type = reader.message(field, "TypeProto");
            if (!type)
                return reader.error();
            info.hasType = true;
            pb::Field f;
            while (type->next(f)) {
                if (f.number != TypeProto::kTensorType)
                    continue; // denotation, or a sequence/map/optional type: not a tensor
                auto tensorType = type->message(f, "TypeProto.Tensor");
                if (!tensorType)
                    return type->error();
                info.isTensor = true;
                if (auto r = decodeTensorType(*tensorType, info); !r)
                    return r;
            }
            if (type->failed())
                return type->error();
        }
    }
    if (reader.failed())
        return reader.error();
    return {};
}

Result<void> OnnxReader::decodeTensorType(pb::Reader& reader, RawValueInfo& info)
{
    pb::Field field;
    while (reader.next(field)) {
        if (field.number == TypeProto::Tensor::kElemType) {
            info.elemType = reader.int64(field, "TypeProto.Tensor.elem_type");
        } else if (field.number == TypeProto::Tensor::kShape) {
            auto shape = reader.message(field, "TensorShapeProto");
            if (!shape)
                return reader.error();
            info.shape.clear();
            pb::Field d;
            while (shape->next(d)) {
                if (d.number != TensorShapeProto::kDim)
                    continue;
                auto dim = shape->message(d, "TensorShapeProto.Dimension");
                if (!dim)
                    return shape->error();
                // dim_param ("batch", "N") and unknown dims are dynamic: -1.
                std::int64_t size = -1;
                pb::Field v;
                while (dim->next(v))
                    if (v.number == TensorShapeProto::Dimension::kDimValue)
                        size = std::max<std::int64_t>(
                            dim->int64(v, "TensorShapeProto.Dimension.dim_value"), -1);
                if (dim->failed())
                    return dim->error();
                info.shape.push_back(size);
            }
            if (shape->failed())
                return shape->error();
        }
    }
    if (reader.failed())
        return reader.error();
    return {};
}

Result<DecodedTensor> OnnxReader::decodeTensor(pb::Reader& reader,
                                               const std::string& fallbackName)
{
    DecodedTensor out;
    out.offset = reader.offset();
    std::vector<std::int64_t> dims;
    std::int64_t dataType = 0;
    std::int64_t dataLocation = 0;
    bool hasExternal = false;
    bool hasSegment = false;
    std::optional<pb::Field> raw;
    std::vector<float> floatData;
    std::vector<std::int64_t> intData; // int32_data and int64_data (only one applies)
    std::vector<double> doubleData;
    bool hasInt32 = false;
    bool hasInt64 = false;

    pb::Field field;
    while (reader.next(field)) {
        switch (field.number) {
        case TensorProto::kDims: reader.appendInt64s(field, dims, "TensorProto.dims"); break;
        case TensorProto::kDataType:
            dataType = reader.int64(field, "TensorProto.data_type");
            break;
        case TensorProto::kSegment: hasSegment = true; break;
        case TensorProto::kFloatData:
            reader.appendFloats(field, floatData, "TensorProto.float_data");
            break;
        case TensorProto::kInt32Data:
            reader.appendInt64s(field, intData, "TensorProto.int32_data");
            hasInt32 = true;
            break;
        case TensorProto::kInt64Data:
            reader.appendInt64s(field, intData, "TensorProto.int64_data");
            hasInt64 = true;
            break;
        case TensorProto::kName: out.name = reader.string(field, "TensorProto.name"); break;
        case TensorProto::kRawData:
            reader.bytes(field, "TensorProto.raw_data");
            raw = field;
            break;
        case TensorProto::kDoubleData:
            reader.appendDoubles(field, doubleData, "TensorProto.double_data");
            break;
        case TensorProto::kExternalData: hasExternal = true; break;
        case TensorProto::kDataLocation:
            dataLocation = reader.int64(field, "TensorProto.data_location");
            break;
        default: break;
        }
    }
    if (reader.failed())
        return reader.error();
    if (out.name.empty())
        out.name = fallbackName;
    const std::string label = "tensor " + inQuotes(out.name);

    if (dataLocation == kDataLocationExternal || hasExternal)
        return unsupported(label + " keeps its data in an external file, which BitLens does " +
                           "not support (save the model with its weights inside)");
    if (hasSegment)
        return unsupported(label + " is split into segments, which BitLens does not support");
    const auto dtype = dtypeFromOnnx(dataType);
    if (!dtype) {
        if (dataType == 0)
            return badInput(label + " has no data_type", out.offset);
        return unsupported(label + " has element type " + onnxTypeName(dataType) +
                           ", which BitLens does not support");
    }
    const std::string typeName(ir::dtypeName(*dtype));
    const std::int64_t elemSize = ir::dtypeSize(*dtype);

    std::int64_t count = 1;
    for (const std::int64_t d : dims) {
        if (d < 0)
            return badInput(label + " has a negative dimension in shape " + shapeText(dims),
                            out.offset);
        if (__builtin_mul_overflow(count, d, &count))
            return badInput(label + " has shape " + shapeText(dims) +
                                ", whose element count does not fit 64 bits",
                            out.offset);
    }
    std::int64_t byteCount = 0;
    if (isInt4(*dtype))
        byteCount = (count + 1) / 2;  // two per byte; the last byte may hold one
    else if (__builtin_mul_overflow(count, elemSize, &byteCount))
        return badInput(label + " has shape " + shapeText(dims) + ", whose size in bytes does " +
                            "not fit 64 bits",
                        out.offset);
    const std::string shapeAndType = " for shape " + shapeText(dims) + " " + typeName;

    // Every size is checked against the bytes present before the tensor is allocated.
    const auto options = at::TensorOptions().dtype(scalarType(*dtype));
    if (isInt4(*dtype))
        out.packedType = *dtype;
    if (raw) {
        if (static_cast<std::uint64_t>(byteCount) != raw->payload.size())
            return badInput(label + " has " + std::to_string(raw->payload.size()) +
                                " bytes of raw_data, expected " + std::to_string(byteCount) +
                                shapeAndType,
                            raw->payloadOffset);
        out.tensor = at::empty(dims, options);
        if (isInt4(*dtype))
            unpackInt4Codes(raw->payload.data(), count, *dtype == ir::DType::Int4,
                            static_cast<std::uint8_t*>(out.tensor.data_ptr()));
        else if (byteCount > 0)
            std::memcpy(out.tensor.data_ptr(), raw->payload.data(),
                        static_cast<std::size_t>(byteCount));
        return out;
    }

    std::size_t present = 0;
    std::string source;
    switch (*dtype) {
    case ir::DType::Float32:
        present = floatData.size();
        source = "float_data";
        break;
    case ir::DType::Float64:
        present = doubleData.size();
        source = "double_data";
        break;
    case ir::DType::Int64:
        present = hasInt64 ? intData.size() : 0;
        source = "int64_data";
        break;
    default:
        // int32, int8, uint8, bool, float16/bfloat16 and float8 (as bit patterns) all live in
        // int32_data, one element per entry; int4 / uint4 one byte (two values) per entry.
        present = hasInt32 ? intData.size() : 0;
        source = "int32_data";
        break;
    }
    if (isInt4(*dtype)) {
        if (present != static_cast<std::uint64_t>(byteCount))
            return badInput(label + " has " + std::to_string(present) + " values in " + source +
                                ", expected " + std::to_string(byteCount) + " (two 4-bit " +
                                "values each)" + shapeAndType,
                            out.offset);
        std::vector<std::uint8_t> packed(intData.size());
        for (std::size_t i = 0; i < intData.size(); ++i)
            packed[i] = static_cast<std::uint8_t>(intData[i]);
        out.tensor = at::empty(dims, options);
        unpackInt4Codes(packed.data(), count, *dtype == ir::DType::Int4,
                        static_cast<std::uint8_t*>(out.tensor.data_ptr()));
        return out;
    }
    if (present != static_cast<std::uint64_t>(count)) {
        if (present == 0 && count > 0)
            return badInput(label + " has no data" + shapeAndType, out.offset);
        return badInput(label + " has " + std::to_string(present) + " values in " + source +
                            ", expected " + std::to_string(count) + shapeAndType,
                        out.offset);
    }
    out.tensor = at::empty(dims, options);
    if (count == 0)
        return out;  // nothing to copy (and an empty tensor's data pointer may be null)
    auto* dst = static_cast<std::uint8_t*>(out.tensor.data_ptr());
    switch (*dtype) {
    case ir::DType::Float32:
        std::memcpy(dst, floatData.data(), floatData.size() * sizeof(float));
        break;
    case ir::DType::Float64:
        std::memcpy(dst, doubleData.data(), doubleData.size() * sizeof(double));
        break;
    case ir::DType::Int64:
        std::memcpy(dst, intData.data(), intData.size() * sizeof(std::int64_t));
        break;
    case ir::DType::Bool:
        for (std::size_t i = 0; i < intData.size(); ++i)
            dst[i] = intData[i] != 0 ? 1 : 0;
        break;
    default:
        // Keep the low `elemSize` bytes of each entry: -5 as int8 is 0xFB, float16 1.0 is
        // 0x3C00 stored as the int32 15360.
        for (std::size_t i = 0; i < intData.size(); ++i) {
            const auto bits = static_cast<std::uint64_t>(intData[i]);
            std::memcpy(dst + i * static_cast<std::size_t>(elemSize), &bits,
                        static_cast<std::size_t>(elemSize));
        }
        break;
    }
    return out;
}

Result<ir::ValueInfo> OnnxReader::convertValueInfo(const RawValueInfo& info,
                                                   std::string_view role)
{
    const std::string label = std::string(role) + " " + inQuotes(info.name);
    if (info.name.empty())
        return badInput("a " + std::string(role) + " has no name", info.offset);
    if (info.hasType && !info.isTensor)
        return unsupported(label + " is not a tensor (sequence, map or optional types are not " +
                           "supported)");
    // A graph input is what the caller feeds: without an element type (0, UNDEFINED) nothing
    // says what to feed it, and onnxruntime refuses the file.
    if (role == "graph input" && info.isTensor && info.elemType == 0)
        return badInput(label + " has no element type (elem_type 0, UNDEFINED)", info.offset);
    ir::ValueInfo value;
    value.name = info.name;
    value.shape = info.shape;
    if (info.elemType != 0) {
        const auto dtype = dtypeFromOnnx(info.elemType);
        if (!dtype)
            return unsupported(label + " has element type " + onnxTypeName(info.elemType) +
                               ", which BitLens does not support");
        value.dtype = *dtype;
    }
    return value;
}

Result<void> OnnxReader::addConstant(const RawNode& raw, ir::Graph& graph)
{
    const std::string label = "Constant node " + inQuotes(raw.name);
    if (raw.outputs.size() != 1 || raw.outputs[0].empty())
        return badInput(label + " must have exactly one output", raw.offset);
    const std::string& name = raw.outputs[0];
    if (raw.attributes.size() != 1)
        return badInput(label + " must have exactly one value attribute", raw.offset);
    const RawAttribute& attr = raw.attributes[0];
    at::Tensor value;
    if (attr.name == "value" && attr.t) {
        // Depth 4 at the top level: ModelProto > GraphProto > NodeProto > AttributeProto >
        // TensorProto (deeper in an If branch).
        auto sub = pb::Reader(attr.t->payload, m_path, "TensorProto", attr.t->payloadOffset,
                              attr.depth);
        auto tensor = decodeTensor(sub, name);
        if (!tensor)
            return tensor.error();
        value = std::move(tensor->tensor);
        if (tensor->packedType)
            graph.initializerTypes[name] = *tensor->packedType;
    } else if (attr.name == "value_float" && attr.hasF) {
        value = at::scalar_tensor(attr.f, at::TensorOptions().dtype(at::kFloat));
    } else if (attr.name == "value_int" && attr.hasI) {
        value = at::scalar_tensor(attr.i, at::TensorOptions().dtype(at::kLong));
    } else if (attr.name == "value_floats") {
        value = at::tensor(at::ArrayRef<float>(attr.floats), at::TensorOptions().dtype(at::kFloat))
                    .clone();
    } else if (attr.name == "value_ints") {
        value = at::tensor(at::ArrayRef<std::int64_t>(attr.ints),
                           at::TensorOptions().dtype(at::kLong))
                    .clone();
    } else {
        return unsupported(label + " has a " + inQuotes(attr.name) + " attribute, which BitLens " +
                           "does not support");
    }
    if (!graph.initializers.emplace(name, std::move(value)).second)
        return badInput(label + " defines " + inQuotes(name) + ", which is already an initializer",
                        raw.offset);
    return {};
}

/// ConstantOfShape (opset 9+): a tensor of the shape input's value filled with `value` (a
/// one-element tensor attribute, default float32 0), read as Expand of that value as a
/// scalar initializer "<node>.value", which gives the same shape, type and values.
Result<void> OnnxReader::addConstantOfShape(const RawNode& raw, ir::Graph& graph,
                                            std::set<std::string>& nodeNames)
{
    ir::Node node;
    node.name = uniqueNodeName(raw, nodeNames);
    const std::string label = "ConstantOfShape node " + inQuotes(node.name);
    if (raw.inputs.size() != 1 || raw.inputs[0].empty() || raw.outputs.size() != 1 ||
        raw.outputs[0].empty())
        return badInput(label + " must have one input (the shape) and one output", raw.offset);
    at::Tensor value = at::scalar_tensor(0.0, at::TensorOptions().dtype(at::kFloat));
    for (const RawAttribute& attr : raw.attributes) {
        if (attr.name != "value")
            return unsupported(label + " has a " + inQuotes(attr.name) + " attribute, which " +
                               "BitLens does not support");
        if (!attr.t)
            return badInput(label + ": its value attribute is not a tensor", attr.offset);
        auto sub = pb::Reader(attr.t->payload, m_path, "TensorProto", attr.t->payloadOffset,
                              attr.depth);
        auto tensor = decodeTensor(sub, raw.outputs[0]);
        if (!tensor)
            return tensor.error();
        if (tensor->tensor.numel() != 1 || tensor->packedType)
            return badInput(label + ": its value holds " +
                                std::to_string(tensor->tensor.numel()) +
                                " elements, expected one",
                            attr.offset);
        value = tensor->tensor.reshape({});
    }
    const std::string valueName = m_valueNames.fresh(node.name + ".value");
    graph.initializers.emplace(valueName, std::move(value));
    node.op = ir::OpKind::Expand;
    node.inputs = {valueName, raw.inputs[0]};
    node.outputs = raw.outputs;
    graph.nodes.push_back(std::move(node));
    return {};
}

std::string OnnxReader::resolve(const std::string& value) const
{
    for (auto scope = m_scopes.rbegin(); scope != m_scopes.rend(); ++scope)
        if (const auto it = scope->find(value); it != scope->end())
            return it->second;
    return value;
}

/// The value of `value` when it is known before any input is: an initializer (Constant nodes
/// are initializers), or a small op of such values (what exporters put in front of an If:
/// Not, Cast, Equal, Less, Greater, And, Or, Xor, and shape-only Identity / Squeeze /
/// Unsqueeze / Reshape of a one-element condition).
std::optional<at::Tensor> OnnxReader::constantValue(const std::string& value,
                                                    const ir::Graph& graph, int depth) const
{
    if (const at::Tensor* init = graph.initializer(value))
        return *init;
    if (depth > 16)
        return std::nullopt;
    const auto producer = graph.producerOf(value);
    if (!producer)
        return std::nullopt;
    const ir::Node& node = graph.nodes[*producer];
    std::vector<at::Tensor> in;
    for (const auto& name : node.inputs) {
        if (name.empty())
            return std::nullopt;
        auto t = constantValue(name, graph, depth + 1);
        if (!t)
            return std::nullopt;
        in.push_back(t->to(at::kCPU));
    }
    if (in.empty() || node.outputs.size() != 1)
        return std::nullopt;
    using ir::OpKind;
    switch (node.op) {
    case OpKind::Identity:
    case OpKind::Squeeze:
    case OpKind::Unsqueeze:
    case OpKind::Reshape:
        if (in[0].numel() != 1)
            return std::nullopt;
        return in[0].reshape({});
    case OpKind::Not: return at::logical_not(in[0]);
    case OpKind::Cast: {
        const auto to = dtypeFromOnnx(node.attrs.getInt("to", 0));
        if (!to || isInt4(*to))
            return std::nullopt;
        return in[0].to(scalarType(*to));
    }
    default: break;
    }
    if (in.size() != 2)
        return std::nullopt;
    switch (node.op) {
    case OpKind::Equal: return at::eq(in[0], in[1]);
    case OpKind::Less: return at::lt(in[0], in[1]);
    case OpKind::Greater: return at::gt(in[0], in[1]);
    case OpKind::And: return at::logical_and(in[0], in[1]);
    case OpKind::Or: return at::logical_or(in[0], in[1]);
    case OpKind::Xor: return at::logical_xor(in[0], in[1]);
    default: return std::nullopt;
    }
}

/// If whose condition is known at import: the branch it takes is read in its place (its
/// nodes named "<if>/then/..." or "<if>/else/...", its values renamed where they clash with
/// the graph's), and Identity nodes give the If's outputs. A condition only known at run time
/// is Unsupported, naming the node.
Result<void> OnnxReader::foldIf(const RawNode& raw, ir::Graph& graph,
                                std::set<std::string>& nodeNames)
{
    const std::string name = uniqueNodeName(raw, nodeNames);
    const std::string label = "If node " + inQuotes(name);
    if (raw.inputs.size() != 1 || raw.inputs[0].empty())
        return badInput(label + " must have one input, the condition", raw.offset);
    const RawAttribute* branches[2] = {nullptr, nullptr};
    for (const RawAttribute& attr : raw.attributes) {
        if (attr.name == "then_branch" && attr.g)
            branches[0] = &attr;
        else if (attr.name == "else_branch" && attr.g)
            branches[1] = &attr;
    }
    if (!branches[0] || !branches[1])
        return badInput(label + " needs then_branch and else_branch graphs", raw.offset);
    const std::string condName = resolve(raw.inputs[0]);
    const auto cond = constantValue(condName, graph, 0);
    if (!cond)
        return unsupported("unsupported op 'If' (opset " + std::to_string(m_fileOpset) +
                           ") in node " + inQuotes(name) + ": its condition " +
                           inQuotes(raw.inputs[0]) + " is only known at run time (BitLens " +
                           "reads an If whose condition is a constant)");
    if (cond->numel() != 1)
        return badInput(label + ": its condition holds " + std::to_string(cond->numel()) +
                            " elements, expected one",
                        raw.offset);
    const bool taken = cond->to(at::kCPU).to(at::kBool).reshape({-1})[0].item<bool>();
    const RawAttribute& branch = *branches[taken ? 0 : 1];
    const std::string which = taken ? "then" : "else";
    auto reader =
        pb::Reader(branch.g->payload, m_path, "GraphProto", branch.g->payloadOffset, branch.depth);
    RawGraph body;
    if (auto r = decodeGraph(reader, body); !r)
        return r;
    if (body.outputs.size() != raw.outputs.size())
        return badInput(label + ": its " + which + " branch has " +
                            std::to_string(body.outputs.size()) + " outputs, the node " +
                            std::to_string(raw.outputs.size()),
                        raw.offset);

    m_scopes.emplace_back();
    const auto define = [&](const std::string& value) {
        if (value.empty())
            return value;
        std::string fresh = m_valueNames.fresh(value);
        if (fresh != value)
            m_scopes.back()[value] = fresh;
        return fresh;
    };
    auto done = [&](Result<void> r) {
        m_scopes.pop_back();
        return r;
    };
    for (auto& init : body.initializers) {
        const std::string value = define(init.name);
        if (init.packedType)
            graph.initializerTypes[value] = *init.packedType;
        graph.initializers.emplace(value, std::move(init.tensor));
    }
    for (std::size_t i = 0; i < body.nodes.size(); ++i) {
        RawNode inner = std::move(body.nodes[i]);
        for (auto& in : inner.inputs)
            if (!in.empty())
                in = resolve(in);
        for (auto& out : inner.outputs)
            out = define(out);
        std::string innerName = name + "/" + which + "/" +
                                (inner.name.empty() ? inner.opType + "_" + std::to_string(i)
                                                    : inner.name);
        for (int n = 1; nodeNames.count(innerName) != 0; ++n)
            innerName += "_" + std::to_string(n);
        nodeNames.insert(innerName);
        inner.name = innerName;
        if (auto r = convertNode(inner, graph, nodeNames); !r)
            return done(r);
    }
    for (std::size_t k = 0; k < raw.outputs.size(); ++k) {
        if (raw.outputs[k].empty())
            continue;
        ir::Node out;
        out.name = k == 0 ? name : name + "/output_" + std::to_string(k);
        for (int n = 1; k != 0 && nodeNames.count(out.name) != 0; ++n)
            out.name += "_" + std::to_string(n);
        nodeNames.insert(out.name);
        out.op = ir::OpKind::Identity;
        out.inputs = {resolve(body.outputs[k].name)};
        out.outputs = {raw.outputs[k]};
        graph.nodes.push_back(std::move(out));
    }
    return done({});
}

Result<void> OnnxReader::convertNode(RawNode& raw, ir::Graph& graph,
                                     std::set<std::string>& nodeNames)
{
    const std::string label = "node " + inQuotes(raw.name);
    if (!isDefaultDomain(raw.domain))
        return unsupported("unsupported op " + inQuotes(raw.opType) + " from domain " +
                           inQuotes(raw.domain) + " in " + label);
    if (raw.opType == "Constant")
        return addConstant(raw, graph);
    if (raw.opType == "ConstantOfShape")
        return addConstantOfShape(raw, graph, nodeNames);
    if (raw.opType == "If")
        return foldIf(raw, graph, nodeNames);
    // Upsample (deprecated in opset 10) is read as the Resize it became; ImageScaler (an
    // experimental op of old exporters, still run by onnxruntime) as the Mul + Add it is.
    const auto op = raw.opType == "Upsample"      ? std::optional(ir::OpKind::Resize)
                    : raw.opType == "ImageScaler" ? std::optional(ir::OpKind::Mul)
                                                  : ir::opKindFromName(raw.opType);
    if (!op)
        return unsupported("unsupported op " + inQuotes(raw.opType) + " (opset " +
                           std::to_string(m_fileOpset) + ") in " + label);

    ir::Node node;
    node.op = *op;
    node.inputs = std::move(raw.inputs);
    node.outputs = std::move(raw.outputs);
    // Nodes without a name (allowed by ONNX) get "<op_type>_<n>", unique within the graph.
    node.name = uniqueNodeName(raw, nodeNames);
    for (const RawAttribute& attr : raw.attributes) {
        const std::string what = "attribute " + inQuotes(attr.name) + " of " + label;
        switch (attr.type) {
        case AttrType::Float: node.attrs.set(attr.name, widenFloat(attr.f)); break;
        case AttrType::Int: node.attrs.set(attr.name, attr.i); break;
        case AttrType::String: node.attrs.set(attr.name, attr.s); break;
        case AttrType::Floats: {
            std::vector<double> values;
            values.reserve(attr.floats.size());
            for (const float f : attr.floats)
                values.push_back(widenFloat(f));
            node.attrs.set(attr.name, std::move(values));
            break;
        }
        case AttrType::Ints: node.attrs.set(attr.name, attr.ints); break;
        case AttrType::Strings: node.attrs.set(attr.name, attr.strings); break;
        case AttrType::Undefined:
            if (attr.hasOther)
                return unsupported(what + " has a type BitLens does not support");
            return badInput(what + " has no value", attr.offset);
        default:
            return unsupported(what + " has type " + attrTypeName(attr.type) +
                               ", which BitLens does not support");
        }
    }
    // A QuantizeLinear whose zero point is an int4 / uint4 constant outputs int4 / uint4, but
    // in memory its zero point is an int8 / uint8 tensor: say so with output_dtype (opset 21).
    if (node.op == ir::OpKind::QuantizeLinear && !node.attrs.has("output_dtype") &&
        node.inputs.size() > 2) {
        const auto packed = graph.initializerTypes.find(node.inputs[2]);
        if (packed != graph.initializerTypes.end())
            node.attrs.set("output_dtype", static_cast<std::int64_t>(packed->second));
    }
    return onnx_import::appendImported(std::move(node), raw.opType, m_fileOpset, graph,
                                       m_valueNames, m_path);
}

// ---- Writing ----------------------------------------------------------------------------------

class OnnxWriter {
public:
    explicit OnnxWriter(const ir::Graph& graph) : m_graph(graph) {}

    Result<std::vector<std::uint8_t>> write();

private:
    Result<void> writeGraph();
    void writeNode(const std::string& name, std::string_view opType,
                   const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                   const ir::Attributes& attrs);
    void writeAttribute(const std::string& name, const ir::AttrValue& value);
    Result<void> writeTensor(const std::string& name, const at::Tensor& tensor);
    void writeValueInfo(std::uint32_t field, const ir::ValueInfo& info);
    std::string freshValueName(const std::string& base);
    void inferMissingOutputShapes();

    const ir::Graph& m_graph;
    pb::Writer m_out;
    std::set<std::string> m_valueNames;
    std::map<std::string, std::vector<std::int64_t>> m_outputShapes; ///< for shapeless outputs
};

void OnnxWriter::inferMissingOutputShapes()
{
    // onnx.checker requires a shape on every graph output, and shape inference in other tools
    // rejects a wrong rank, but graphs built in code often leave output shapes empty. Take
    // them from shape inference for one sample (batch 1, ir/shape_inference.h); dimension 0
    // stays dynamic when the first input's is. Graphs with other dynamic dimensions, and
    // outputs that inference cannot derive, keep no shape.
    const bool noneMissing = std::none_of(m_graph.outputs.begin(), m_graph.outputs.end(),
                                          [](const ir::ValueInfo& v) { return v.shape.empty(); });
    if (noneMissing)
        return;
    const auto shapes = ir::inferShapes(m_graph);
    if (!shapes)
        return;
    const bool dynamicBatch = !m_graph.inputs.empty() && !m_graph.inputs[0].shape.empty() &&
                              m_graph.inputs[0].shape[0] < 0;
    for (const auto& info : m_graph.outputs) {
        const auto it = shapes->find(info.name);
        if (!info.shape.empty() || it == shapes->end())
            continue;
        std::vector<std::int64_t> shape = it->second;
        if (dynamicBatch && !shape.empty() && shape[0] == 1)
            shape[0] = -1;
        m_outputShapes[info.name] = std::move(shape);
    }
}

Result<std::vector<std::uint8_t>> OnnxWriter::write()
{
    // Protobuf messages are limited to 2 GiB; bigger models need ONNX external data.
    constexpr std::int64_t kMaxBytes = (std::int64_t{1} << 31) - (std::int64_t{1} << 24);
    const std::int64_t weightBytes = m_graph.parameterBytes();
    if (weightBytes > kMaxBytes)
        return Error::unsupported({}, "the model's weights take " + std::to_string(weightBytes) +
                                          " bytes; ONNX files over 2 GiB need external data, " +
                                          "which BitLens does not write");
    m_out.reserve(static_cast<std::size_t>(weightBytes) + (std::size_t{1} << 16));

    const std::int64_t opset = writtenOpset(m_graph);
    // The IR version that introduced the types and opset used: 9 brought float8 (and opset
    // 19), 10 brought int4 / uint4 (and opset 21); onnx.checker rejects older pairings.
    // Opset 23 (RMSNormalization, RotaryEmbedding) came with IR version 11.
    const std::int64_t irVersion = opset >= 23                                  ? 11
                                   : opset >= kBlockedQdqOpset                  ? 10
                                   : opset >= kFloat8Opset || hasFloat8(m_graph) ? 9
                                                                                 : kWriteIrVersion;

    inferMissingOutputShapes();

    m_out.writeInt64(ModelProto::kIrVersion, irVersion);
    m_out.writeString(ModelProto::kProducerName, "BitLens");
    m_out.writeString(ModelProto::kProducerVersion, BITLENS_VERSION);
    const auto graphMarker = m_out.beginMessage(ModelProto::kGraph);
    if (auto r = writeGraph(); !r)
        return r.error();
    m_out.endMessage(graphMarker);
    const auto opsetMarker = m_out.beginMessage(ModelProto::kOpsetImport);
    m_out.writeString(OperatorSetIdProto::kDomain, "");
    m_out.writeInt64(OperatorSetIdProto::kVersion, opset);
    m_out.endMessage(opsetMarker);
    for (const auto& [key, value] : m_graph.metadata) {
        const auto marker = m_out.beginMessage(ModelProto::kMetadataProps);
        m_out.writeString(StringStringEntryProto::kKey, key);
        m_out.writeString(StringStringEntryProto::kValue, value);
        m_out.endMessage(marker);
    }
    return m_out.take();
}

std::string OnnxWriter::freshValueName(const std::string& base)
{
    std::string name = base;
    for (int n = 1; m_valueNames.count(name) != 0; ++n)
        name = base + "_" + std::to_string(n);
    m_valueNames.insert(name);
    return name;
}

Result<void> OnnxWriter::writeGraph()
{
    for (const auto& info : m_graph.inputs)
        m_valueNames.insert(info.name);
    for (const auto& [name, tensor] : m_graph.initializers)
        m_valueNames.insert(name);
    for (const auto& node : m_graph.nodes)
        m_valueNames.insert(node.outputs.begin(), node.outputs.end());

    for (const auto& node : m_graph.nodes) {
        if (node.op == ir::OpKind::Silu) {
            // ONNX has no SiLU: x * sigmoid(x) as Sigmoid "<node>/sigmoid" and Mul "<node>".
            if (node.inputs.size() != 1 || node.outputs.size() != 1)
                return Error::badInput({}, "Silu node " + inQuotes(node.name) +
                                               " must have one input and one output");
            const std::string gate = freshValueName(node.outputs[0] + "/sigmoid");
            writeNode(node.name + "/sigmoid", "Sigmoid", node.inputs, {gate}, {});
            writeNode(node.name, "Mul", {node.inputs[0], gate}, node.outputs, {});
            continue;
        }
        writeNode(node.name, ir::opKindName(node.op), node.inputs, node.outputs, node.attrs);
    }
    m_out.writeString(GraphProto::kName, m_graph.name.empty() ? "bitlens" : m_graph.name);
    for (const auto& [name, tensor] : m_graph.initializers)
        if (auto r = writeTensor(name, tensor); !r)
            return r;
    for (const auto& info : m_graph.inputs)
        writeValueInfo(GraphProto::kInput, info);
    for (const auto& info : m_graph.outputs) {
        const auto inferred = m_outputShapes.find(info.name);
        if (inferred == m_outputShapes.end()) {
            writeValueInfo(GraphProto::kOutput, info);
            continue;
        }
        ir::ValueInfo completed = info;
        completed.shape = inferred->second;
        writeValueInfo(GraphProto::kOutput, completed);
    }
    return {};
}

void OnnxWriter::writeNode(const std::string& name, std::string_view opType,
                           const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const ir::Attributes& attrs)
{
    const auto marker = m_out.beginMessage(GraphProto::kNode);
    for (const auto& in : inputs)
        m_out.writeString(NodeProto::kInput, in);
    for (const auto& out : outputs)
        m_out.writeString(NodeProto::kOutput, out);
    m_out.writeString(NodeProto::kName, name);
    m_out.writeString(NodeProto::kOpType, opType);
    for (const auto& [attrName, value] : attrs.all())
        writeAttribute(attrName, value);
    m_out.endMessage(marker);
}

void OnnxWriter::writeAttribute(const std::string& name, const ir::AttrValue& value)
{
    const auto marker = m_out.beginMessage(NodeProto::kAttribute);
    m_out.writeString(AttributeProto::kName, name);
    AttrType type = AttrType::Undefined;
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
        m_out.writeInt64(AttributeProto::kI, *i);
        type = AttrType::Int;
    } else if (const auto* f = std::get_if<double>(&value)) {
        m_out.writeFloat(AttributeProto::kF, static_cast<float>(*f));
        type = AttrType::Float;
    } else if (const auto* s = std::get_if<std::string>(&value)) {
        m_out.writeString(AttributeProto::kS, *s);
        type = AttrType::String;
    } else if (const auto* ints = std::get_if<std::vector<std::int64_t>>(&value)) {
        // proto2 repeated scalars without [packed = true] are written one tag per element.
        for (const std::int64_t v : *ints)
            m_out.writeInt64(AttributeProto::kInts, v);
        type = AttrType::Ints;
    } else if (const auto* floats = std::get_if<std::vector<double>>(&value)) {
        for (const double v : *floats)
            m_out.writeFloat(AttributeProto::kFloats, static_cast<float>(v));
        type = AttrType::Floats;
    } else if (const auto* strings = std::get_if<std::vector<std::string>>(&value)) {
        for (const auto& v : *strings)
            m_out.writeString(AttributeProto::kStrings, v);
        type = AttrType::Strings;
    }
    m_out.writeInt64(AttributeProto::kType, static_cast<std::int64_t>(type));
    m_out.endMessage(marker);
}

Result<void> OnnxWriter::writeTensor(const std::string& name, const at::Tensor& tensor)
{
    if (!tensor.defined())
        return Error::badInput({}, "initializer " + inQuotes(name) + " holds no tensor");
    const auto dtype = dtypeFromScalar(tensor.scalar_type());
    if (!dtype)
        return Error::unsupported({}, "initializer " + inQuotes(name) + " has dtype " +
                                          std::string(c10::toString(tensor.scalar_type())) +
                                          ", which BitLens cannot write to ONNX");
    const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    const auto packed = m_graph.initializerTypes.find(name);
    std::vector<std::uint8_t> nibbles;
    ir::DType fileType = *dtype;
    if (packed != m_graph.initializerTypes.end() && isInt4(packed->second)) {
        // Int4 / UInt4 codes are held one per int8 / uint8 element; the file packs two per
        // byte, element 2k in the low nibble: codes {1, -2, 3} -> bytes {0xE1, 0x03}.
        fileType = packed->second;
        const bool isSigned = fileType == ir::DType::Int4;
        if (cpu.scalar_type() != (isSigned ? at::kChar : at::kByte))
            return Error::badInput({}, "initializer " + inQuotes(name) + " is declared " +
                                           std::string(ir::dtypeName(fileType)) + " but holds " +
                                           std::string(c10::toString(cpu.scalar_type())));
        const std::int64_t count = cpu.numel();
        const auto* src = static_cast<const std::uint8_t*>(cpu.data_ptr());
        nibbles.assign(static_cast<std::size_t>((count + 1) / 2), 0);
        for (std::int64_t i = 0; i < count; ++i) {
            const int value = isSigned ? static_cast<int>(static_cast<std::int8_t>(src[i]))
                                       : static_cast<int>(src[i]);
            if (value < (isSigned ? -8 : 0) || value > (isSigned ? 7 : 15))
                return Error::badInput({}, "initializer " + inQuotes(name) + " holds " +
                                               std::to_string(value) + ", which is not a " +
                                               std::string(ir::dtypeName(fileType)) + " code");
            nibbles[static_cast<std::size_t>(i / 2)] |=
                static_cast<std::uint8_t>((value & 0x0F) << ((i % 2) * 4));
        }
    }
    const auto marker = m_out.beginMessage(GraphProto::kInitializer);
    for (const std::int64_t d : cpu.sizes())
        m_out.writeInt64(TensorProto::kDims, d);
    m_out.writeInt64(TensorProto::kDataType, static_cast<std::int64_t>(fileType));
    m_out.writeString(TensorProto::kName, name);
    if (isInt4(fileType))
        m_out.writeBytes(TensorProto::kRawData, nibbles.data(), nibbles.size());
    else
        m_out.writeBytes(TensorProto::kRawData, cpu.data_ptr(), cpu.nbytes());
    m_out.endMessage(marker);
    return {};
}

void OnnxWriter::writeValueInfo(std::uint32_t field, const ir::ValueInfo& info)
{
    const auto marker = m_out.beginMessage(field);
    m_out.writeString(ValueInfoProto::kName, info.name);
    const auto typeMarker = m_out.beginMessage(ValueInfoProto::kType);
    const auto tensorMarker = m_out.beginMessage(TypeProto::kTensorType);
    m_out.writeInt64(TypeProto::Tensor::kElemType, static_cast<std::int64_t>(info.dtype));
    // An empty shape means "unknown" in BitLens; ONNX says that by leaving the shape out. Scalar
    // outputs found by inferMissingOutputShapes() get an empty shape message.
    const auto inferred = m_outputShapes.find(info.name);
    if (!info.shape.empty() || inferred != m_outputShapes.end()) {
        const auto shapeMarker = m_out.beginMessage(TypeProto::Tensor::kShape);
        for (std::size_t i = 0; i < info.shape.size(); ++i) {
            const auto dimMarker = m_out.beginMessage(TensorShapeProto::kDim);
            const std::int64_t size = info.shape[i];
            if (size >= 0)
                m_out.writeInt64(TensorShapeProto::Dimension::kDimValue, size);
            else
                m_out.writeString(TensorShapeProto::Dimension::kDimParam,
                                  i == 0 ? std::string("N") : "N" + std::to_string(i));
            m_out.endMessage(dimMarker);
        }
        m_out.endMessage(shapeMarker);
    }
    m_out.endMessage(tensorMarker);
    m_out.endMessage(typeMarker);
    m_out.endMessage(marker);
}

} // namespace

Result<ir::Graph> readOnnx(const std::vector<std::uint8_t>& bytes, const std::string& path)
{
    // A LibTorch error while reading is bad input (the file's data does not fit).
    return guarded<ir::Graph>(Boundary{.path = path, .library = ErrorCode::BadInput},
                              [&] { return OnnxReader(path).read(bytes); });
}

Result<ir::Graph> readOnnxFile(const std::string& path)
{
    auto bytes = readFileBytes(path);
    if (!bytes)
        return bytes.error();
    return readOnnx(bytes.value(), path);
}

Result<std::vector<std::uint8_t>> writeOnnx(const ir::Graph& graph)
{
    return guarded<std::vector<std::uint8_t>>(Boundary{},
                                              [&] { return OnnxWriter(graph).write(); });
}

std::int64_t writtenOpset(const ir::Graph& graph)
{
    std::int64_t opset = std::max(graph.opsetVersion, kMinWriteOpset);
    for (const auto& node : graph.nodes) {
        if (node.op == ir::OpKind::Gelu)
            opset = std::max(opset, kGeluOpset);
        else if (node.op == ir::OpKind::HardSwish)
            opset = std::max<std::int64_t>(opset, 14);
        else if (node.op == ir::OpKind::LayerNorm)
            opset = std::max<std::int64_t>(opset, 17);
        else if (node.op == ir::OpKind::Trilu)
            opset = std::max<std::int64_t>(opset, 14);
        else if (node.op == ir::OpKind::Mish)
            opset = std::max<std::int64_t>(opset, 18);
        else if (node.op == ir::OpKind::GroupNorm)
            opset = std::max<std::int64_t>(opset, 21);
        else if (node.op == ir::OpKind::ScatterND && node.attrs.has("reduction"))
            opset = std::max<std::int64_t>(
                opset, node.attrs.getString("reduction", "none") == "max" ||
                               node.attrs.getString("reduction", "none") == "min"
                           ? 18
                           : 16);
        else if (node.op == ir::OpKind::RMSNorm || node.op == ir::OpKind::RotaryEmbedding)
            opset = std::max<std::int64_t>(opset, 23);
        if (node.attrs.getInt("block_size", 0) != 0 || node.attrs.has("output_dtype"))
            opset = std::max(opset, kBlockedQdqOpset);
    }
    for (const auto& [name, dtype] : graph.initializerTypes)
        if (isInt4(dtype) && graph.initializers.count(name) != 0)
            opset = std::max(opset, kBlockedQdqOpset);
    // QuantizeLinear / DequantizeLinear take float8 from opset 19 on; a float8 initializer
    // alone needs only IR version 9 (see write()).
    const bool hasQdq = std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const auto& n) {
        return n.op == ir::OpKind::QuantizeLinear || n.op == ir::OpKind::DequantizeLinear;
    });
    if (hasQdq && hasFloat8(graph))
        opset = std::max(opset, kFloat8Opset);
    return opset;
}

Result<void> writeOnnxFile(const ir::Graph& graph, const std::string& path)
{
    auto bytes = writeOnnx(graph);
    if (!bytes) {
        Error error = bytes.error();
        error.path = path;
        return error;
    }
    return writeFileAtomic(path, bytes.value());
}

} // namespace bitlens::io

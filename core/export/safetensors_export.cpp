#include "export/safetensors_export.h"

#include "export/folder_export.h"
#include "io/file_util.h"
#include "io/safetensors.h"
#include "quant/engine.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

namespace bitlens::exporting {

namespace fs = std::filesystem;
using json = nlohmann::json;
using quant::Granularity;
using quant::QuantType;

namespace {

const std::string kLayoutsKey = "bitlens.layouts";
const std::string kConfigKey = "quantization_config";

/// The module name of a layer: its weight's name without ".weight", else the layer's name.
std::string moduleName(const ir::Node& node)
{
    const std::string suffix = ".weight";
    const std::string& w = node.inputs.size() > 1 ? node.inputs[1] : node.name;
    if (w.size() > suffix.size() && w.compare(w.size() - suffix.size(), suffix.size(), suffix) == 0)
        return w.substr(0, w.size() - suffix.size());
    return node.name;
}

std::string strategyOf(const Granularity& g)
{
    switch (g.kind) {
    case Granularity::Kind::PerTensor: return "tensor";
    case Granularity::Kind::PerChannel: return "channel";
    case Granularity::Kind::PerGroup: return "group";
    case Granularity::Kind::PerToken: return "token";
    }
    return "tensor";
}

/// Scale as compressed-tensors shapes it: [1] per tensor, [out, 1] per channel, [out, groups].
at::Tensor scaleTensor(const at::Tensor& scale, const Granularity& g)
{
    at::Tensor s = scale.to(at::kFloat).contiguous();
    if (g.kind == Granularity::Kind::PerTensor)
        return s.reshape({1});
    if (g.kind == Granularity::Kind::PerChannel)
        return s.reshape({-1, 1});
    return s;
}

/// Packs signed codes [rows, cols] (int32, in [-2^(bits-1), 2^(bits-1))) along `dim` into int32
/// words: value k * perWord + i of a row lands in bits bits*i .. of word k, stored unsigned.
at::Tensor packInt32(const at::Tensor& codes, int bits, int dim)
{
    const std::int64_t perWord = 32 / bits;
    at::Tensor u = (codes.to(at::kLong) + (1 << (bits - 1))).contiguous();
    if (dim == 0)
        u = u.t().contiguous();
    const std::int64_t rows = u.size(0);
    const std::int64_t cols = u.size(1);
    const std::int64_t words = (cols + perWord - 1) / perWord;
    u = at::constant_pad_nd(u, {0, words * perWord - cols}).reshape({rows, words, perWord});
    at::Tensor shifts = at::arange(perWord, at::kLong) * bits;
    at::Tensor packed = at::bitwise_left_shift(u, shifts).sum(-1);  // disjoint bits: the sum is a bitwise or
    // Bits 31.. wrap into the int32 sign as the reference stores uint32 viewed as int32.
    packed = packed.to(at::kInt);
    return dim == 0 ? packed.t().contiguous() : packed.contiguous();
}

/// Inverse of packInt32: `count` signed codes along `dim`.
at::Tensor unpackInt32(const at::Tensor& packed, int bits, int dim, std::int64_t count)
{
    const std::int64_t perWord = 32 / bits;
    at::Tensor p = packed.to(at::kLong) & 0xffffffffLL;
    if (dim == 0)
        p = p.t().contiguous();
    at::Tensor shifts = at::arange(perWord, at::kLong) * bits;
    at::Tensor u = at::bitwise_right_shift(p.unsqueeze(-1), shifts) & ((1 << bits) - 1);
    u = u.reshape({p.size(0), -1}).slice(1, 0, count) - (1 << (bits - 1));
    return dim == 0 ? u.t().contiguous() : u.contiguous();
}

/// One layer's tensors and its config-group description.
struct LayerOut {
    std::string format;  // empty: dense (fp16 / bf16)
    json weights;
    json inputActivations;
};

/// Two E2M1 codes per byte along each row, the even column in the low nibble (compressed-
/// tensors' pack_fp4_to_uint8).
at::Tensor packFp4(const at::Tensor& codes)
{
    const at::Tensor c = codes.to(at::kByte).contiguous();
    const at::Tensor lo = c.slice(1, 0, c.size(1), 2);
    const at::Tensor hi = c.slice(1, 1, c.size(1), 2);
    return at::bitwise_or(lo, at::bitwise_left_shift(hi, 4)).contiguous();
}

/// Inverse of packFp4: [rows, 2 * bytes] E2M1 codes.
at::Tensor unpackFp4(const at::Tensor& packed)
{
    const at::Tensor p = packed.to(at::kByte);
    const at::Tensor lo = at::bitwise_and(p, 0x0F);
    const at::Tensor hi = at::bitwise_right_shift(p, 4);
    return at::stack({lo, hi}, -1).reshape({p.size(0), 2 * p.size(1)});
}

/// A layer in an MX or NVFP4 format, as llm-compressor writes NVFP4A16 / MXFP4A16 / MXFP8A16:
/// the element codes (E2M1 packed two per byte, or float8 E4M3), the block scales (E4M3, or E8M0
/// as uint8 exponents), and for NVFP4 weight_global_scale, the reciprocal of BitLens's per-tensor
/// scale (dequantized weight = element * weight_scale / weight_global_scale). Weight-only: the
/// activations' block scales are computed by the loader's own rule (compressed-tensors rounds
/// MX amax to a power of two, and NVFP4 takes a calibrated global activation scale), not the
/// one BitLens measured.
Result<LayerOut> exportBlockFormatLayer(const quant::LayerQuant& lq,
                                        const std::string& module, const at::Tensor& view,
                                        std::map<std::string, at::Tensor>& out)
{
    const auto& w = lq.weight;
    const auto& traits = quant::traits(w.type);
    const std::string where = "layer '" + lq.layer + "'";
    const std::string format = compressedTensorsBlockFormat(w.type);
    if (format.empty())
        return Error::unsupported({}, where + " has " + std::string(traits.name) +
                                          " weights: compressed-tensors' block layouts hold "
                                          "nvfp4, mxfp4 and mxfp8_e4m3");
    if (lq.config.actMode != quant::ActMode::Float)
        return Error::unsupported(
            {}, where + " quantizes its inputs to " + std::string(quant::traits(lq.config.actType).name) +
                    ": compressed-tensors computes activation block scales by its own rule, not "
                    "the one BitLens measured; export the weight-only scheme (" +
                    std::string(traits.name) + " weights, the -w preset)");
    if (view.size(1) % traits.blockSize != 0)
        return Error::unsupported({}, where + " has " + std::to_string(view.size(1)) +
                                          " inputs, not a multiple of the " +
                                          std::to_string(traits.blockSize) + "-element block");
    const at::Tensor codes = quant::quantize(view, w);
    LayerOut lo;
    lo.format = format;
    const bool nv = w.type == QuantType::NVFP4;
    if (w.type == QuantType::MXFP8E4M3)
        out[module + ".weight"] = codes.contiguous();
    else
        out[module + ".weight_packed"] = packFp4(codes);
    out[module + ".weight_scale"] = w.blockScale.contiguous();  // E4M3 or uint8, [out, blocks]
    if (nv)
        out[module + ".weight_global_scale"] =
            at::full({1}, 1.0f / w.tensorScale, at::TensorOptions().dtype(at::kFloat));
    const std::string scaleDtype = nv ? "torch.float8_e4m3fn" : "torch.uint8";
    lo.weights = {{"num_bits", traits.bits},
                  {"type", "float"},
                  {"symmetric", true},
                  {"group_size", traits.blockSize},
                  {"strategy", nv ? "tensor_group" : "group"},
                  {"dynamic", false},
                  {"scale_dtype", scaleDtype}};
    return lo;
}

Result<LayerOut> exportLayer(const ir::Node& node,
                             const quant::LayerQuant& lq, const std::string& module,
                             std::map<std::string, at::Tensor>& out, std::string& note)
{
    const auto& w = lq.weight;
    const auto& traits = quant::traits(w.type);
    const std::string where = "layer '" + lq.layer + "'";
    if (lq.smooth.defined())
        return Error::unsupported({}, where +
                                          (lq.method == "awq" ? " uses AWQ" : " uses SmoothQuant") +
                                          ": its per-channel input divisor has no place in the "
                                          "compressed-tensors layout (export it to ONNX instead)");
    LayerOut lo;
    if (!quant::codeSource(lq).defined())
        return Error::runtime(where + " holds no weight to export");
    const at::Tensor view =
        quant::weightView(node, quant::codeSource(lq)).to(at::kFloat).contiguous();
    if (w.type == QuantType::FP16 || w.type == QuantType::BF16) {
        out[module + ".weight"] = view.to(w.type == QuantType::FP16 ? at::kHalf : at::kBFloat16);
        return lo;
    }
    if (quant::isBlockFormat(traits))
        return exportBlockFormatLayer(lq, module, view, out);
    if (w.type == QuantType::NF4 || w.type == QuantType::FP4E2M1 || w.type == QuantType::FP8E5M2)
        return Error::unsupported({}, where + " has " + std::string(traits.name) +
                                          " weights, which compressed-tensors has no layout for");
    const Granularity& g = w.granularity;
    out[module + ".weight_scale"] = scaleTensor(w.scale, g);
    lo.weights = {{"num_bits", traits.bits},
                  {"strategy", strategyOf(g)},
                  {"group_size", g.kind == Granularity::Kind::PerGroup ? json(g.groupSize) : json()},
                  {"dynamic", false},
                  {"actorder", nullptr},
                  {"block_structure", nullptr},
                  {"observer", "minmax"}};
    if (g.kind == Granularity::Kind::PerGroup && view.size(1) % g.groupSize != 0)
        note = where + ": the last group of each row is shorter (" +
               std::to_string(view.size(1) % g.groupSize) + " of " + std::to_string(g.groupSize) +
               "); loaders that assume equal groups may reject it";
    const at::Tensor codes = quant::quantize(view, w);
    if (w.type == QuantType::FP8E4M3) {
        lo.format = "float-quantized";
        lo.weights["type"] = "float";
        lo.weights["symmetric"] = true;
        out[module + ".weight"] = codes.contiguous();
    } else {
        // Integer codes, shifted to the signed range when the type is unsigned.
        const std::int64_t shift = traits.isSigned ? 0 : (std::int64_t{1} << (traits.bits - 1));
        const at::Tensor q = codes.to(at::kInt) - static_cast<std::int32_t>(shift);
        const at::Tensor zp = w.zeroPoint.to(at::kInt).reshape(out[module + ".weight_scale"].sizes()) -
                              static_cast<std::int32_t>(shift);
        const bool zeroIsZero = at::all(zp == 0).item<bool>();
        lo.weights["type"] = "int";
        lo.weights["symmetric"] = zeroIsZero;
        if (traits.bits == 8) {
            lo.format = "int-quantized";
            out[module + ".weight"] = q.to(at::kChar);
            if (!zeroIsZero)
                out[module + ".weight_zero_point"] = zp.to(at::kChar).contiguous();
        } else {
            lo.format = "pack-quantized";
            out[module + ".weight_packed"] = packInt32(q, traits.bits, 1);
            out[module + ".weight_shape"] =
                at::tensor(std::vector<std::int32_t>{static_cast<std::int32_t>(view.size(0)),
                                                     static_cast<std::int32_t>(view.size(1))});
            if (!zeroIsZero) {
                out[module + ".weight_zero_point"] =
                    g.kind == Granularity::Kind::PerTensor ? zp.to(at::kChar).contiguous()
                                                           : packInt32(zp, traits.bits, 0);
            }
        }
    }
    if (lq.act && (lq.config.actMode == quant::ActMode::Static)) {
        const auto& a = *lq.act;
        const auto& actTraits = quant::traits(a.type);
        const bool isFloat = a.type == QuantType::FP8E4M3 || a.type == QuantType::FP8E5M2;
        const std::int64_t shift =
            (!isFloat && !actTraits.isSigned) ? (std::int64_t{1} << (actTraits.bits - 1)) : 0;
        out[module + ".input_scale"] = a.scale.to(at::kFloat).reshape({-1}).contiguous();
        const at::Tensor zp = a.zeroPoint.to(at::kInt).reshape({-1}) - static_cast<std::int32_t>(shift);
        const bool zeroIsZero = at::all(zp == 0).item<bool>();
        if (!isFloat && !zeroIsZero)
            out[module + ".input_zero_point"] = zp.to(at::kChar).contiguous();
        lo.inputActivations = {{"num_bits", actTraits.bits},
                               {"type", isFloat ? "float" : "int"},
                               {"symmetric", zeroIsZero},
                               {"strategy", strategyOf(a.granularity)},
                               {"dynamic", false}};
    } else if (lq.config.actMode == quant::ActMode::Dynamic) {
        const auto& actTraits = quant::traits(lq.config.actType);
        const bool isFloat = actTraits.family == quant::TypeFamily::Float;
        lo.inputActivations = {{"num_bits", actTraits.bits},
                               {"type", isFloat ? "float" : "int"},
                               {"symmetric", lq.config.actSymmetric || isFloat},
                               {"strategy", strategyOf(lq.config.actGranularity)},
                               {"dynamic", true}};
    }
    return lo;
}

/// Dequantizes one module's tensors: (q - zero_point) * scale with scales broadcast per
/// tensor, per row, or per group of columns (the last group may be shorter).
at::Tensor dequantizeModule(const at::Tensor& q, const at::Tensor& scale, const at::Tensor& zp,
                            std::int64_t groupSize)
{
    at::Tensor s = scale.to(at::kFloat);
    at::Tensor z = zp.defined() ? zp.to(at::kFloat) : at::Tensor();
    const std::int64_t cols = q.size(1);
    if (s.dim() == 2 && s.size(1) > 1) {
        if (groupSize <= 0)
            groupSize = (cols + s.size(1) - 1) / s.size(1);
        s = s.repeat_interleave(groupSize, 1).slice(1, 0, cols);
        if (z.defined())
            z = z.repeat_interleave(groupSize, 1).slice(1, 0, cols);
    }
    at::Tensor qf = q.to(at::kFloat);
    if (z.defined())
        qf = qf - z;
    return qf * s;
}

} // namespace

std::string compressedTensorsBlockFormat(QuantType type)
{
    switch (type) {
    case QuantType::NVFP4: return "nvfp4-pack-quantized";
    case QuantType::MXFP4: return "mxfp4-pack-quantized";
    case QuantType::MXFP8E4M3: return "mxfp8-quantized";
    default: return {};
    }
}

fs::path hfSourceFolder(const std::string& modelPath)
{
    if (modelPath.empty())
        return {};
    std::error_code ec;
    const fs::path p(modelPath);
    const fs::path dir = fs::is_directory(p, ec) ? p : p.parent_path();
    if (dir.empty() || !fs::is_regular_file(dir / "config.json", ec))
        return {};
    if (!fs::is_directory(p, ec)) {
        const std::string ext = p.extension().string();
        if (ext != ".safetensors" && ext != ".json")
            return {};
    }
    return dir;
}

const std::vector<std::string>& hfCompanionFiles()
{
    static const std::vector<std::string> names = {
        "tokenizer.json",         "tokenizer_config.json", "special_tokens_map.json",
        "vocab.txt",              "vocab.json",            "merges.txt",
        "tokenizer.model",        "added_tokens.json",     "generation_config.json",
        "preprocessor_config.json", "chat_template.jinja"};
    return names;
}

Result<CompressedTensorsSummary> writeCompressedTensors(const quant::QuantizedModel& model,
                                                        const std::string& path,
                                                        const std::string& sourceModelPath)
{
    try {
        c10::InferenceMode guard;
        CompressedTensorsSummary summary;
        summary.path = path;
        std::map<std::string, at::Tensor> tensors;
        std::set<std::string> consumed;  // initializers replaced by quantized tensors
        json layouts = json::object();
        // Config groups: one per distinct (format, weights, input activations).
        std::vector<std::pair<json, std::vector<std::string>>> groups;
        std::vector<std::string> ignored;
        std::set<std::string> formats;
        bool packedZeroPointNoted = false;
        for (const ir::Node& node : model.graph.nodes) {
            auto it = model.layers.find(node.name);
            // A layer kept in float32 (an override, or a language model's head under the LLM
            // presets) is listed in "ignore", its weight written as it is; a MatMul's, stored
            // [in, out] in the graph, as the [out, in] of a Linear (recorded in the layouts, so
            // BitLens reads it back in the graph's form).
            if (it == model.layers.end() || it->second.config.keepFloat) {
                if (!quant::isQuantizable(model.graph, node))
                    continue;
                const std::string module = moduleName(node);
                ignored.push_back(module);
                const at::Tensor* w =
                    node.inputs.size() > 1 ? model.graph.initializer(node.inputs[1]) : nullptr;
                const bool transposed =
                    node.op == ir::OpKind::MatMul ||
                    (node.op == ir::OpKind::Gemm && node.attrs.getInt("transB", 0) == 0);
                if (w && w->dim() == 2 && transposed && !layouts.contains(module)) {
                    tensors[module + ".weight"] = w->detach().to(at::kCPU, at::kFloat).t().contiguous();
                    layouts[module] = {{"weight", node.inputs[1]},
                                       {"layout", "transpose"},
                                       {"shape", w->sizes().vec()}};
                    consumed.insert(node.inputs[1]);
                }
                continue;
            }
            const quant::LayerQuant& lq = it->second;
            const std::string module = moduleName(node);
            if (node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU)
                return Error::unsupported(path, "layer '" + node.name + "' is an " +
                                                    std::string(ir::opKindName(node.op)) +
                                                    ": compressed-tensors has no layout for "
                                                    "its two weights and quantized recurrence");
            if (layouts.contains(module))
                return Error::unsupported(path, "layers share the module name '" + module + "'");
            std::string note;
            auto lo = exportLayer(node, lq, module, tensors, note);
            if (!lo)
                return Error::unsupported(path, lo.error().message);
            if (!note.empty())
                summary.notes.push_back(note);
            if (lo->format == "pack-quantized" && tensors.count(module + ".weight_zero_point") &&
                !packedZeroPointNoted) {
                // Measured with the pinned loaders: transformers 5.23 shapes the zero-point
                // parameter unpacked ([out, groups]) while compressed-tensors 0.20 packs it
                // along the rows, so it refuses the folder (size MISMATCH) it would decompress.
                summary.notes.push_back(
                    "asymmetric packed int" + std::to_string(quant::traits(lq.weight.type).bits) +
                    " (zero points packed along the rows, as compressed-tensors packs them): "
                    "transformers 5.23 with compressed-tensors 0.20 refuses such folders "
                    "(zero-point size mismatch); export with sym=true for it (no zero points)");
                packedZeroPointNoted = true;
            }
            const std::string& weightName = node.inputs[1];
            consumed.insert(weightName);
            const at::Tensor* original = model.graph.initializer(weightName);
            // How the stored 2-D [out, in] view maps back to the layer's own weight layout.
            const bool transposed = node.op == ir::OpKind::MatMul ||
                                    (node.op == ir::OpKind::Gemm && node.attrs.getInt("transB", 0) == 0);
            const std::string layout = node.op == ir::OpKind::Conv ? "reshape"
                                       : transposed                ? "transpose"
                                                                   : "as-is";
            layouts[module] = {{"weight", weightName},
                               {"layout", layout},
                               {"shape", original->sizes().vec()}};
            ++summary.quantizedLayers;
            if (lo->format.empty())
                continue;  // fp16 / bf16: a plain dense tensor
            formats.insert(lo->format);
            json group = {{"format", lo->format},
                          {"weights", lo->weights},
                          {"input_activations", lo->inputActivations},
                          {"output_activations", nullptr}};
            bool placed = false;
            for (auto& [g, targets] : groups) {
                if (g == group) {
                    targets.push_back(module);
                    placed = true;
                    break;
                }
            }
            if (!placed)
                groups.push_back({group, {module}});
        }
        // Exported from a Hugging Face folder, the file keeps that folder's tensor names: the
        // executor's own constants ("const.*") stay out, and source tensors the graph does not
        // use (a BERT pooler, position ids) are carried over as they are, so from_pretrained
        // finds every parameter it expects.
        // Tensors of the graph that are not the source's (rotary tables, a tied head's copy)
        // stay out too: transformers would report them as unexpected. They are listed in
        // bitlens.omitted, so --verify takes them from the model.
        const fs::path hfSource = hfSourceFolder(sourceModelPath);
        std::optional<io::SafetensorsFile> original;
        if (!hfSource.empty()) {
            if (auto read = io::readSafetensors(hfSource.string()))
                original = std::move(*read);
        }
        json omitted = json::array();
        for (const auto& [name, value] : model.graph.initializers) {
            if (consumed.count(name))
                continue;
            if (!hfSource.empty() &&
                (name.rfind("const.", 0) == 0 || (original && !original->tensors.count(name)))) {
                omitted.push_back(name);
                continue;
            }
            if (tensors.count(name))
                return Error::unsupported(path, "initializer '" + name +
                                                    "' collides with a quantized tensor name");
            at::Tensor t = value.detach().to(at::kCPU);
            tensors[name] = at::isFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t;
        }

        if (original) {
            for (const auto& [name, value] : original->tensors)
                if (!tensors.count(name) && !consumed.count(name) &&
                    !model.graph.initializer(name))
                    tensors[name] = value;
        }

        json configGroups = json::object();
        for (std::size_t i = 0; i < groups.size(); ++i) {
            json g = groups[i].first;
            g["targets"] = groups[i].second;
            configGroups["group_" + std::to_string(i)] = g;
        }
        summary.format = formats.empty()        ? "dense"
                         : formats.size() == 1 ? *formats.begin()
                                               : "mixed-precision";
        const json config = {{"quant_method", "compressed-tensors"},
                             {"format", summary.format},
                             {"quantization_status", "compressed"},
                             {"config_groups", configGroups},
                             {"ignore", ignored},
                             {"kv_cache_scheme", nullptr},
                             {"global_compression_ratio", nullptr},
                             {"producer", "bitlens " BITLENS_VERSION}};
        summary.quantizationConfig = config.dump();
        std::map<std::string, std::string> metadata = {
            {"format", "pt"},
            {kConfigKey, summary.quantizationConfig},
            {kLayoutsKey, layouts.dump()},
            {kOmittedTensorsKey, omitted.dump()}};
        summary.tensors = static_cast<std::int64_t>(tensors.size());
        auto written = io::writeSafetensors(tensors, metadata, path);
        if (!written)
            return written.error();
        if (auto fault = folderExportFault(); !fault) {
            Error e = fault.error();
            e.path = path;
            return e;
        }

        // A Hugging Face model folder: the source model's config.json with quantization_config
        // merged in (else what a folder already has there), and its tokenizer and generation
        // files, so transformers' from_pretrained and vLLM load the folder as it is.
        const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : ".";
        summary.configPath = (dir / "config.json").string();
        const fs::path source = hfSourceFolder(sourceModelPath);
        std::error_code ec;
        const bool sameFolder = !source.empty() && fs::equivalent(source, dir, ec);
        json cfg = json::object();
        for (const fs::path& candidate :
             {source.empty() ? fs::path() : source / "config.json", dir / "config.json"}) {
            if (candidate.empty())
                continue;
            std::ifstream in(candidate);
            if (!in)
                continue;
            json existing = json::parse(in, nullptr, false);
            if (!existing.is_discarded() && existing.is_object()) {
                cfg = std::move(existing);
                break;
            }
        }
        cfg[kConfigKey] = config;
        const std::string text = cfg.dump(2) + "\n";
        auto cfgWritten = io::writeFileAtomic(summary.configPath, text.data(), text.size());
        if (!cfgWritten)
            return cfgWritten.error();
        summary.folderFiles.push_back(summary.configPath);
        if (!source.empty() && !sameFolder) {
            for (const std::string& name : hfCompanionFiles()) {
                if (!fs::is_regular_file(source / name, ec))
                    continue;
                auto bytes = io::readFileBytes((source / name).string());
                if (!bytes)
                    return bytes.error();
                const std::string target = (dir / name).string();
                if (auto w = io::writeFileAtomic(target, *bytes); !w)
                    return w.error();
                summary.folderFiles.push_back(target);
            }
        }
        if (fs::path(path).filename() != "model.safetensors")
            summary.notes.push_back("transformers loads a folder's weights from model.safetensors: "
                                    "name the file so (or give --out a folder) to load " +
                                    dir.string() + " with from_pretrained");
        return summary;
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("export failed: ") + e.what_without_backtrace(), path);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory while exporting", path);
    } catch (const nlohmann::json::exception& e) {
        return Error::runtime(std::string("export failed: ") + e.what(), path);
    }
}

namespace {

/// The quantization_config of a file: its metadata, else config.json beside it.
Result<json> loadConfig(const std::string& path, const std::map<std::string, std::string>& metadata)
{
    auto it = metadata.find(kConfigKey);
    if (it != metadata.end()) {
        json config = json::parse(it->second, nullptr, false);
        if (config.is_discarded() || !config.is_object())
            return Error::badInput(path, "__metadata__ quantization_config is not a JSON object");
        return config;
    }
    const fs::path cfgPath = fs::path(path).parent_path() / "config.json";
    std::ifstream in(cfgPath);
    if (!in)
        return Error::badInput(path, "no quantization_config in the file's metadata and no "
                                     "config.json beside it");
    json cfg = json::parse(in, nullptr, false);
    if (cfg.is_discarded() || !cfg.is_object() || !cfg.contains(kConfigKey) ||
        !cfg[kConfigKey].is_object())
        return Error::badInput(cfgPath.string(), "has no quantization_config object");
    return cfg[kConfigKey];
}

/// The config group that covers `module`: the one naming it in "targets", else the only group.
const json* groupFor(const json& config, const std::string& module)
{
    auto groups = config.find("config_groups");
    if (groups == config.end() || !groups->is_object())
        return nullptr;
    for (const auto& [name, group] : groups->items()) {
        auto targets = group.find("targets");
        if (targets != group.end() && targets->is_array())
            for (const json& t : *targets)
                if (t.is_string() && t.get<std::string>() == module)
                    return &group;
    }
    return groups->size() == 1 ? &groups->begin().value() : nullptr;
}

/// True for the MX / NVFP4 layouts (format names of compressed-tensors' CompressionFormat).
bool isBlockFormatLayout(const std::string& format)
{
    for (const quant::QuantTypeTraits& t : quant::allQuantTypes())
        if (!format.empty() && compressedTensorsBlockFormat(t.type) == format)
            return true;
    return false;
}

/// One MX / NVFP4 module as compressed-tensors decompresses it: E2M1 (packed) or float8 E4M3
/// elements times their block scale (uint8 E8M0 exponents 2^(e - 127), or E4M3 divided by
/// weight_global_scale).
Result<at::Tensor> dequantizeBlockModule(const std::string& path, const std::string& where,
                                         const std::string& format, const json& args,
                                         const at::Tensor& scale, const at::Tensor& packed,
                                         const at::Tensor& dense, const at::Tensor& globalScale)
{
    const std::int64_t block = args.value("group_size", std::int64_t{0});
    at::Tensor values;
    if (format == "mxfp8-quantized") {
        if (!dense.defined() || dense.dim() != 2 || dense.scalar_type() != at::kFloat8_e4m3fn)
            return Error::badInput(path, where + ": mxfp8-quantized needs a float8_e4m3fn weight");
        values = dense.to(at::kFloat);
    } else {
        if (!packed.defined() || packed.dim() != 2 || packed.scalar_type() != at::kByte)
            return Error::badInput(path, where + ": " + format + " needs a uint8 weight_packed");
        const auto& fp4 = quant::traits(QuantType::FP4E2M1).codes;  // by E2M1 bit pattern
        const at::Tensor table =
            at::tensor(std::vector<float>(fp4.begin(), fp4.end()), at::kFloat);
        values = table.index({unpackFp4(packed).to(at::kLong)});
    }
    const std::int64_t rows = values.size(0);
    const std::int64_t cols = values.size(1);
    if (block <= 0 || cols % block != 0 || scale.dim() != 2 || scale.size(0) != rows ||
        scale.size(1) != cols / block)
        return Error::badInput(path, where + ": weight_scale " + c10::str(scale.sizes()) +
                                         " does not give one scale per " +
                                         std::to_string(block) + " of " + std::to_string(cols) +
                                         " columns");
    at::Tensor s;
    if (format == "nvfp4-pack-quantized") {
        if (scale.scalar_type() != at::kFloat8_e4m3fn || !globalScale.defined() ||
            globalScale.numel() != 1)
            return Error::badInput(path, where + ": nvfp4-pack-quantized needs float8_e4m3fn "
                                                 "weight_scale and one weight_global_scale");
        s = scale.to(at::kFloat) / globalScale.to(at::kFloat).reshape({});
    } else {
        if (scale.scalar_type() != at::kByte)
            return Error::badInput(path, where + ": " + format +
                                             " needs uint8 (E8M0) weight_scale exponents");
        s = quant::e8m0Value(scale);
    }
    return values * s.repeat_interleave(block, 1);
}

} // namespace

Result<std::map<std::string, at::Tensor>> readCompressedTensors(const std::string& path)
{
    auto file = io::readSafetensors(path);
    if (!file)
        return file.error();
    try {
        c10::InferenceMode guard;
        auto config = loadConfig(path, file->metadata);
        if (!config)
            return config.error();
        json layouts = json::object();
        if (auto it = file->metadata.find(kLayoutsKey); it != file->metadata.end()) {
            layouts = json::parse(it->second, nullptr, false);
            if (layouts.is_discarded() || !layouts.is_object())
                return Error::badInput(path, "__metadata__ " + kLayoutsKey + " is not a JSON object");
        }
        const auto& all = file->tensors;
        auto get = [&](const std::string& name) {
            auto it = all.find(name);
            return it == all.end() ? at::Tensor() : it->second;
        };
        // Modules are the prefixes of "<module>.weight_scale".
        const std::string scaleSuffix = ".weight_scale";
        std::map<std::string, at::Tensor> out;
        std::set<std::string> consumed;
        for (const auto& [name, tensor] : all) {
            if (name.size() <= scaleSuffix.size() ||
                name.compare(name.size() - scaleSuffix.size(), scaleSuffix.size(), scaleSuffix) != 0)
                continue;
            const std::string module = name.substr(0, name.size() - scaleSuffix.size());
            const std::string where = "module '" + module + "'";
            const json* group = groupFor(*config, module);
            if (!group || !group->contains("weights") || !(*group)["weights"].is_object())
                return Error::badInput(path, where + " has a weight_scale but no config group");
            const json& args = (*group)["weights"];
            at::Tensor w;
            const std::string groupFormat =
                group->value("format", config->value("format", std::string()));
            if (isBlockFormatLayout(groupFormat)) {
                auto decoded = dequantizeBlockModule(path, where, groupFormat, args, tensor,
                                                     get(module + ".weight_packed"),
                                                     get(module + ".weight"),
                                                     get(module + ".weight_global_scale"));
                if (!decoded)
                    return decoded.error();
                w = *decoded;
                consumed.insert({module + ".weight_packed", module + ".weight",
                                 module + ".weight_global_scale"});
            } else {
                const int bits = args.value("num_bits", 8);
                const at::Tensor scale = tensor;
                at::Tensor zp = get(module + ".weight_zero_point");
                at::Tensor q;
                if (at::Tensor packed = get(module + ".weight_packed"); packed.defined()) {
                    const at::Tensor shape = get(module + ".weight_shape");
                    if (bits < 1 || bits > 8 || 32 % bits != 0)
                        return Error::badInput(path, where + ": num_bits " + std::to_string(bits) +
                                                         " cannot be packed into int32");
                    if (!shape.defined() || shape.numel() != 2 || packed.dim() != 2 ||
                        packed.scalar_type() != at::kInt)
                        return Error::badInput(path, where + ": weight_packed needs int32 [rows, words] "
                                                             "and a weight_shape of two values");
                    const auto rows = shape[0].item<std::int64_t>();
                    const auto cols = shape[1].item<std::int64_t>();
                    const std::int64_t perWord = 32 / bits;
                    if (rows != packed.size(0) || cols < 0 || (cols + perWord - 1) / perWord != packed.size(1))
                        return Error::badInput(path, where + ": weight_shape does not match weight_packed");
                    q = unpackInt32(packed, bits, 1, cols);
                    if (zp.defined() && zp.scalar_type() == at::kInt)
                        zp = unpackInt32(zp, bits, 0, rows);
                    consumed.insert({module + ".weight_packed", module + ".weight_shape"});
                } else {
                    q = get(module + ".weight");
                    if (!q.defined())
                        return Error::badInput(path, where + " has a weight_scale but no weight");
                    if (q.dim() != 2)
                        q = q.reshape({q.size(0), -1});
                    consumed.insert(module + ".weight");
                }
                if (zp.defined() && zp.dim() == 2 && zp.size(0) != q.size(0))
                    return Error::badInput(path, where + ": weight_zero_point rows do not match the weight");
                const std::int64_t groups = scale.dim() == 2 ? scale.size(1) : 1;
                if ((scale.dim() == 2 && scale.size(0) != q.size(0)) || groups > std::max<std::int64_t>(q.size(1), 1))
                    return Error::badInput(path, where + ": weight_scale shape does not fit the weight");
                const std::int64_t groupSize =
                    args.contains("group_size") && args["group_size"].is_number_integer()
                        ? args["group_size"].get<std::int64_t>()
                        : 0;
                if (groups > 1 && (groupSize <= 0 ? false : (q.size(1) + groupSize - 1) / groupSize != groups))
                    return Error::badInput(path, where + ": " + std::to_string(groups) +
                                                     " scale groups do not cover " +
                                                     std::to_string(q.size(1)) + " columns in groups of " +
                                                     std::to_string(groupSize));
                w = dequantizeModule(q, scale, zp, groupSize);
            }
            consumed.insert({name, module + ".weight_zero_point", module + ".input_scale",
                             module + ".input_zero_point"});
            std::string outName = module + ".weight";
            if (layouts.contains(module)) {
                const json& l = layouts[module];
                outName = l.value("weight", outName);
                const auto shape = l.value("shape", std::vector<std::int64_t>{});
                const std::string layout = l.value("layout", "as-is");
                std::int64_t n = 1;
                for (std::int64_t d : shape)
                    n *= d;
                if (n != w.numel())
                    return Error::badInput(path, where + ": recorded shape does not match the weight");
                w = layout == "transpose" ? w.t().reshape(shape) : w.reshape(shape);
            }
            out[outName] = w.contiguous();
        }
        for (const auto& [module, l] : layouts.items()) {
            // fp16 / bf16 layers: a dense tensor under "<module>.weight", back to their layout.
            const std::string dense = module + ".weight";
            if (consumed.count(dense) || !all.count(dense))
                continue;
            const auto shape = l.value("shape", std::vector<std::int64_t>{});
            at::Tensor w = all.at(dense).to(at::kFloat);
            if (l.value("layout", "as-is") == "transpose")
                w = w.t();
            out[l.value("weight", dense)] = w.reshape(shape).contiguous();
            consumed.insert(dense);
        }
        for (const auto& [name, tensor] : all) {
            if (consumed.count(name) || out.count(name))
                continue;
            out[name] = at::isFloatingType(tensor.scalar_type()) ? tensor.to(at::kFloat) : tensor;
        }
        return out;
    } catch (const c10::Error& e) {
        return Error::badInput(path, std::string("cannot decode: ") + e.what_without_backtrace());
    } catch (const nlohmann::json::exception& e) {
        return Error::badInput(path, std::string("bad quantization_config: ") + e.what());
    }
}

} // namespace bitlens::exporting

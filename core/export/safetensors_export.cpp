#include "export/safetensors_export.h"

#include "export/folder_export.h"
#include "io/compressed_tensors.h"
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

/// One layer's tensors and its config-group description.
struct LayerOut {
    std::string format;  // empty: dense (fp16 / bf16)
    json weights;
    json inputActivations;
    /// int8 weights: the codes they may take ([-128, 127], or [-127, 127] with wrange=127,
    /// [-64, 64] with reduce-range); null otherwise.
    json weightCodes;
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
    // compressed-tensors 0.20 raises on a row its group size does not divide: the export front
    // (exporting::checkPartialGroups) refuses such a model before any writer runs. Called
    // directly, the writer still writes it, with the last group shorter, and says so.
    if (g.kind == Granularity::Kind::PerGroup && view.size(1) % g.groupSize != 0)
        note = where + ": the last group of each row is shorter (" +
               std::to_string(view.size(1) % g.groupSize) + " of " + std::to_string(g.groupSize) +
               "); compressed-tensors refuses to dequantize such a weight";
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
            if (w.type == QuantType::Int8) {
                const auto [qmin, qmax] = quant::codeRange(w.type, w.range);
                lo.weightCodes = {qmin, qmax};
            }
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
        json weightCodes = json::object();
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
                // Measured with the pinned loaders: compressed-tensors 0.20's
                // PackedQuantizationCompressor packs zero points along the rows in compress and
                // unpacks them so in decompress (its own decompressor reads this file to BitLens's
                // weights, test_export_safetensors.sh), but its compress of the meta-device
                // model transformers 5.23 builds before loading leaves them [out, groups], so
                // transformers refuses the folder (size MISMATCH): a limitation of theirs.
                summary.notes.push_back(
                    "asymmetric packed int" + std::to_string(quant::traits(lq.weight.type).bits) +
                    " (zero points packed along the rows, as compressed-tensors' own compressor "
                    "packs them): transformers 5.23 with compressed-tensors 0.20 refuses such "
                    "folders (zero-point size mismatch: its meta-device compress leaves the "
                    "zero points unpacked), so --verify fails there; export with sym=true for it "
                    "(no zero points)");
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
            if (!lo->weightCodes.is_null())
                weightCodes[module] = lo->weightCodes;
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
        json config = {{"quant_method", "compressed-tensors"},
                       {"format", summary.format},
                       {"quantization_status", "compressed"},
                       {"config_groups", configGroups},
                       {"ignore", ignored},
                       {"kv_cache_scheme", nullptr},
                       {"global_compression_ratio", nullptr},
                       {"producer", "bitlens " BITLENS_VERSION}};
        // compressed-tensors' QuantizationArgs has no field for the int8 code range (its
        // calculate_range is always [-128, 127]; extra fields are forbidden there) and loading
        // needs none: weight = code * scale for any code. The range the codes were picked in
        // (wrange=127: [-127, 127]) is declared beside the groups, where QuantizationConfig
        // ignores unknown keys, module -> [qmin, qmax].
        if (!weightCodes.empty())
            config["weight_code_range"] = weightCodes;
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

Result<std::map<std::string, at::Tensor>> readCompressedTensors(const std::string& path)
{
    return io::readCompressedTensors(path);
}

} // namespace bitlens::exporting

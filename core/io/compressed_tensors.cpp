// Reading compressed-tensors safetensors files back to float32 (moved here from
// export/safetensors_export.cpp so that opening a model folder, below quant and export, can
// read BitLens's own exports: issue #49 item 5).

#include "io/compressed_tensors.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

namespace bitlens::io {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kLayoutsKey = "bitlens.layouts";
const std::string kConfigKey = "quantization_config";

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

/// Inverse of packFp4: [rows, 2 * bytes] E2M1 codes.
at::Tensor unpackFp4(const at::Tensor& packed)
{
    const at::Tensor p = packed.to(at::kByte);
    const at::Tensor lo = at::bitwise_and(p, 0x0F);
    const at::Tensor hi = at::bitwise_right_shift(p, 4);
    return at::stack({lo, hi}, -1).reshape({p.size(0), 2 * p.size(1)});
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

/// E8M0 exponents as float: 2^(e - 127), 255 NaN (as quant::e8m0Value).
at::Tensor e8m0Value(const at::Tensor& e)
{
    const at::Tensor ei = e.to(at::kInt);
    const at::Tensor normal = at::bitwise_left_shift(ei, 23).view(at::kFloat);
    const at::Tensor value =
        at::where(at::eq(ei, 0), at::full({}, 0x1p-127f, normal.options()), normal);
    return at::where(at::eq(ei, 255),
                     at::full({}, std::numeric_limits<float>::quiet_NaN(), normal.options()),
                     value);
}

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
    return format == "nvfp4-pack-quantized" || format == "mxfp4-pack-quantized" ||
           format == "mxfp8-quantized";
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
        // E2M1 values by bit pattern.
        const at::Tensor table = at::tensor(std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f, 2.0f,
                                                               3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                                               -1.0f, -1.5f, -2.0f, -3.0f, -4.0f,
                                                               -6.0f},
                                            at::kFloat);
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
        s = e8m0Value(scale);
    }
    return values * s.repeat_interleave(block, 1);
}

} // namespace

bool isCompressedTensorsConfig(const nlohmann::json& config)
{
    if (!config.is_object())
        return false;
    const auto it = config.find(kConfigKey);
    return it != config.end() && it->is_object() &&
           it->contains("quant_method") && (*it)["quant_method"] == "compressed-tensors";
}

Result<std::map<std::string, at::Tensor>> readCompressedTensors(const std::string& path)
{
    auto file = readSafetensors(path);
    if (!file)
        return file.error();
    return decodeCompressedTensors(*file, path);
}

Result<std::map<std::string, at::Tensor>> decodeCompressedTensors(const SafetensorsFile& file_,
                                                                  const std::string& path,
                                                                  bool recordedLayouts)
{
    const SafetensorsFile* file = &file_;
    try {
        c10::InferenceMode guard;
        auto config = loadConfig(path, file->metadata);
        if (!config)
            return config.error();
        json layouts = json::object();
        if (auto it = file->metadata.find(kLayoutsKey);
            recordedLayouts && it != file->metadata.end()) {
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
} // namespace bitlens::io

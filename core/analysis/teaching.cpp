#include "analysis/teaching.h"

#include "ir/graph.h"
#include "kernels/nf4_codes.h"
#include "model/model.h"
#include "quant/quant_type.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>

namespace bitlens::analysis {

namespace {

/// FP4 E2M1 magnitudes; the largest is 6.
constexpr std::array<double, 8> kFp4Magnitudes = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

/// Non-negative finite values of an FP8 format with `mantissaBits` and `bias`, up to
/// `maxValue`: 0, the subnormals m / 2^M * 2^(1 - bias), then (1 + m / 2^M) * 2^(e - bias).
std::vector<double> fp8Magnitudes(int mantissaBits, int bias, double maxValue)
{
    std::vector<double> out{0.0};
    const int steps = 1 << mantissaBits;
    for (int m = 1; m < steps; ++m)
        out.push_back(std::ldexp(double(m) / steps, 1 - bias));
    for (int e = 1;; ++e)
        for (int m = 0; m < steps; ++m) {
            const double value = std::ldexp(1.0 + double(m) / steps, e - bias);
            if (value > maxValue)
                return out;
            out.push_back(value);
        }
}

/// ± every magnitude times `scale`, ascending, with one 0.
std::vector<double> mirrored(const std::vector<double>& magnitudes, double scale)
{
    std::vector<double> out;
    for (const double m : magnitudes) {
        out.push_back(m * scale);
        if (m != 0.0)
            out.push_back(-m * scale);
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// The block-format QuantType called `format`, or nullopt.
std::optional<quant::QuantType> blockType(std::string_view format)
{
    const auto t = quant::quantTypeFromName(format);
    if (!t || !quant::isBlockFormat(quant::traits(*t)))
        return std::nullopt;
    return t;
}

/// The unscaled values a block format's elements take, ascending (integers: the codes).
std::vector<double> elementValues(const quant::QuantTypeTraits& t)
{
    std::vector<double> out;
    switch (t.family) {
    case quant::TypeFamily::Integer:
        for (std::int64_t k = t.qmin; k <= t.qmax; ++k)
            out.push_back(double(k));
        return out;
    case quant::TypeFamily::CodeTable:
        for (const float c : t.codes)
            out.push_back(double(c));
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());  // +0 and -0
        return out;
    case quant::TypeFamily::Float:
        return t.maxValue > 1000.0f ? mirrored(fp8Magnitudes(2, 15, t.maxValue), 1.0)
                                    : mirrored(fp8Magnitudes(3, 7, t.maxValue), 1.0);
    }
    return out;
}

/// Elements [begin, end) of `values` quantized in block format `type` as they are within the
/// whole vector: the slice (zero-padded to whole blocks, which changes no block's max |w|) is
/// followed by one block holding the vector's max |w|, so NVFP4's per-tensor scale is the
/// vector's, then core's chooseQParams / quantize / dequantize run over [1, blocks]. The
/// result keeps the slice's blocks only. O(end - begin) after the O(n) max scan.
struct BlockQuantized {
    quant::QParams qparams;
    at::Tensor dequantized;  ///< [end - begin], float64
    std::int64_t blocks = 0;
};

BlockQuantized quantizeBlocks(const std::vector<float>& values, std::int64_t begin,
                              std::int64_t end, quant::QuantType type)
{
    const std::int64_t size = quant::traits(type).blockSize;
    float amax = 0.0f;
    for (const float v : values)
        if (std::isfinite(v))
            amax = std::max(amax, std::abs(v));
    const std::int64_t blocks = (end - begin + size - 1) / size;
    std::vector<float> padded(static_cast<std::size_t>((blocks + 1) * size), 0.0f);
    std::copy(values.begin() + begin, values.begin() + end, padded.begin());
    padded[static_cast<std::size_t>(blocks * size)] = amax;
    const at::Tensor x =
        at::from_blob(padded.data(), {1, static_cast<std::int64_t>(padded.size())}, at::kFloat);
    const quant::Granularity g = quant::Granularity::perGroup(1, size);
    const auto [lo, hi] = quant::blockMinMax(x, g);
    BlockQuantized out;
    out.blocks = blocks;
    out.qparams = quant::chooseQParams(lo, hi, type, true, g);
    out.dequantized = quant::dequantize(quant::quantize(x, out.qparams), out.qparams)
                          .reshape({-1})
                          .narrow(0, 0, end - begin)
                          .to(at::kDouble)
                          .contiguous();
    return out;
}

} // namespace

std::vector<float> layerWeightValues(const Model& model, const std::string& layer)
{
    try {
        const ir::Graph& graph = model.graph();
        for (const ir::Node& node : graph.nodes) {
            if (node.name != layer)
                continue;
            for (const std::string& input : node.inputs) {
                const at::Tensor* tensor = input.empty() ? nullptr : graph.initializer(input);
                if (!tensor || !tensor->defined() || !tensor->is_floating_point() ||
                    tensor->numel() == 0)
                    continue;
                c10::InferenceMode guard;
                const at::Tensor flat =
                    tensor->detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
                const float* data = flat.data_ptr<float>();
                return {data, data + flat.numel()};
            }
            return {};
        }
    } catch (const std::exception&) {
        return {};
    }
    return {};
}

bool isIntegerFormat(std::string_view format) { return format.starts_with("int"); }

QuantErrorStats quantizationError(const std::vector<float>& values,
                                  const TeachingSettings& settings)
{
    QuantErrorStats out;
    if (values.empty())
        return out;
    const bool integer = isIntegerFormat(settings.format);
    const int bits = std::clamp(settings.bits, 2, 8);
    quant::QuantType type = quant::QuantType::Int8;
    if (integer) {
        type = bits == 4 ? quant::QuantType::Int4
               : bits == 2 ? quant::QuantType::Int2
                           : quant::QuantType::Int8;
    } else {
        const auto named = quant::quantTypeFromName(settings.format);
        if (!named)
            return out;
        type = *named;
    }
    try {
        c10::InferenceMode guard;
        const auto n = static_cast<std::int64_t>(values.size());
        // The vector is one weight row [1, n]; groups run along it (axis 1), as core groups the
        // input dimension of a weight.
        const at::Tensor x =
            at::from_blob(const_cast<float*>(values.data()), {1, n}, at::kFloat);
        // A block format's group is its block (32 or 16), whatever groupSize says.
        const std::int64_t blockSize = quant::traits(type).blockSize;
        const quant::Granularity granularity =
            blockSize > 0             ? quant::Granularity::perGroup(1, blockSize)
            : settings.groupSize > 0 ? quant::Granularity::perGroup(1, settings.groupSize)
                                     : quant::Granularity::perTensor();
        const auto [lo, hi] = quant::blockMinMax(x, granularity);
        const double fraction = std::clamp(settings.clipFraction, 0.05, 1.0);
        const at::Tensor clip = at::maximum(lo.abs(), hi.abs()) * fraction;
        quant::QParams qparams = quant::chooseQParams(-clip, clip, type, true, granularity);
        at::Tensor src = x;
        if (integer && bits != 8 && bits != 4 && bits != 2) {
            // No core type has 3, 5, 6 or 7 bits: take int8's qparams for the same clip range
            // (scale = clip / 127.5), widen the scale to the b-bit rule clip / ((2^b - 1) / 2)
            // and clamp x to the b-bit codes [-2^(b-1), 2^(b-1) - 1] first, so int8's wider
            // clamp inside fakeQuantize never acts. Example, 5 bits, clip 1: scale 1 / 15.5,
            // x = 0.99 -> 15.3 -> code 15 (the largest) -> 0.968.
            qparams.scale = qparams.scale * (255.0 / double((1 << bits) - 1));
            at::Tensor scale = qparams.scale;
            if (settings.groupSize > 0)
                scale = scale.repeat_interleave(settings.groupSize, 1).narrow(1, 0, n);
            const double qmax = double((1 << (bits - 1)) - 1);
            src = at::clamp(x, -(qmax + 1.0) * scale, qmax * scale);
        }
        const at::Tensor q = quant::fakeQuantize(src, qparams);
        const at::Tensor xd = x.to(at::kDouble);
        const at::Tensor err = xd - q.to(at::kDouble);
        const double noise = err.pow(2).sum().item<double>();
        const double signal = xd.pow(2).sum().item<double>();
        out.mse = noise / double(n);
        out.maxAbsError = err.abs().max().item<double>();
        out.sqnrDb = noise > 0.0 ? 10.0 * std::log10(signal / noise)
                                 : std::numeric_limits<double>::infinity();
        out.valid = std::isfinite(out.mse) && std::isfinite(out.maxAbsError);
    } catch (const std::exception&) {
        out.valid = false;
    }
    return out;
}

ValueHistogram valueHistogram(const std::vector<float>& values, int bins)
{
    ValueHistogram out;
    double lo = std::numeric_limits<double>::infinity();
    double hi = -lo;
    for (const float v : values)
        if (std::isfinite(v)) {
            lo = std::min(lo, double(v));
            hi = std::max(hi, double(v));
        }
    if (bins <= 0 || lo > hi)
        return out;
    if (hi == lo) {
        lo -= 0.5;
        hi += 0.5;
    }
    out.absMax = std::max(std::abs(lo), std::abs(hi));
    out.lo = lo;
    out.hi = hi;
    out.counts.assign(static_cast<std::size_t>(bins), 0.0);
    const double width = (hi - lo) / bins;
    for (const float v : values) {
        if (!std::isfinite(v))
            continue;
        const int bin = std::min(bins - 1, static_cast<int>((double(v) - lo) / width));
        out.counts[static_cast<std::size_t>(bin)] += 1.0;
    }
    out.size = values.size();
    return out;
}

std::vector<double> codePoints(std::string_view weightType, bool symmetric, double lo, double hi)
{
    if (!(std::isfinite(lo) && std::isfinite(hi)) || hi < lo)
        return {};
    const double absMax = std::max(std::abs(lo), std::abs(hi));
    if (absMax == 0.0)
        return {};
    int bits = 0;
    if (weightType == "int8" || weightType == "uint8")
        bits = 8;
    else if (weightType == "int4" || weightType == "uint4")
        bits = 4;
    else if (weightType == "int2")
        bits = 2;
    std::vector<double> values;
    if (bits > 0) {
        if (symmetric) {
            // int8 symmetric: scale = max|w| / 127, values k * scale for k in [-127, 127].
            const int steps = (1 << (bits - 1)) - 1;
            for (int k = -steps; k <= steps; ++k)
                values.push_back(absMax * k / steps);
        } else {
            // Asymmetric: 2^bits - 1 steps from lo to hi (the zero point makes 0 exact in
            // core; the per-tensor view draws the even spacing).
            const int steps = (1 << bits) - 1;
            for (int k = 0; k <= steps; ++k)
                values.push_back(lo + (hi - lo) * k / steps);
        }
        return values;
    }
    if (weightType == "nf4") {
        for (const float code : kernels::kNf4Codes)  // the quantizer's own float32 table
            values.push_back(static_cast<double>(code) * absMax);
        return values;
    }
    if (weightType == "fp4_e2m1" || weightType == "fp4")
        return mirrored({kFp4Magnitudes.begin(), kFp4Magnitudes.end()}, absMax / 6.0);
    if (weightType == "fp8_e4m3")
        return mirrored(fp8Magnitudes(3, 7, 448.0), absMax / 448.0);
    if (weightType == "fp8_e5m2")
        return mirrored(fp8Magnitudes(2, 15, 57344.0), absMax / 57344.0);
    if (const std::int64_t size = blockSizeOf(weightType); size > 0) {
        // The block that holds max|w|: its grid, within [lo, hi].
        std::vector<float> block(static_cast<std::size_t>(size), 0.0f);
        block[0] = static_cast<float>(absMax);
        const BlockView view = blockView(block, weightType, 0);
        // (a relative 1e-6 of slack keeps NVFP4's largest code, amax to a float32 rounding)
        const double slack = 1e-6 * absMax;
        for (const double v : view.grid)
            if (v >= lo - slack && v <= hi + slack)
                values.push_back(v);
        return values;
    }
    return {};  // float types: the grid is finer than any histogram bin
}

std::vector<double> teachingCodePoints(const TeachingSettings& settings, double clip)
{
    if (!isIntegerFormat(settings.format))
        return codePoints(settings.format, true, -clip, clip);
    const int bits = std::clamp(settings.bits, 2, 8);
    if (bits == 8 || bits == 4 || bits == 2)
        return codePoints("int" + std::to_string(bits), true, -clip, clip);
    if (!std::isfinite(clip) || clip <= 0.0)
        return {};
    std::vector<double> values;
    const int steps = (1 << (bits - 1)) - 1;
    for (int k = -steps; k <= steps; ++k)
        values.push_back(clip * k / steps);
    return values;
}

std::vector<double> float8PositiveValues(std::string_view format)
{
    at::ScalarType type = at::kFloat8_e4m3fn;
    if (format == "fp8_e5m2")
        type = at::kFloat8_e5m2;
    else if (format != "fp8_e4m3")
        return {};
    c10::InferenceMode guard;
    const at::Tensor bytes = at::arange(256, at::kShort).to(at::kByte);
    const at::Tensor values = bytes.view(type).to(at::kDouble);
    std::vector<double> out;
    const double* data = values.data_ptr<double>();
    for (int i = 0; i < 256; ++i)
        if (std::isfinite(data[i]) && data[i] > 0.0)
            out.push_back(data[i]);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

bool isBlockFormatName(std::string_view format) { return blockType(format).has_value(); }

std::int64_t blockSizeOf(std::string_view format)
{
    const auto t = blockType(format);
    return t ? quant::traits(*t).blockSize : 0;
}

std::vector<std::string> blockFormatNames()
{
    std::vector<std::string> names;
    for (const quant::QuantTypeTraits& t : quant::allQuantTypes())
        if (quant::isBlockFormat(t))
            names.emplace_back(t.name);
    return names;
}

double blockElementMax(std::string_view format)
{
    const auto type = blockType(format);
    if (!type)
        return 0.0;
    const std::vector<double> elements = elementValues(quant::traits(*type));
    return std::max(std::abs(elements.front()), std::abs(elements.back()));
}

BlockView blockView(const std::vector<float>& values, std::string_view format,
                    std::int64_t block)
{
    BlockView out;
    out.format = std::string(format);
    out.block = block;
    const auto type = blockType(format);
    if (!type || values.empty())
        return out;
    const quant::QuantTypeTraits& t = quant::traits(*type);
    const auto n = static_cast<std::int64_t>(values.size());
    out.blockSize = t.blockSize;
    out.blocks = (n + t.blockSize - 1) / t.blockSize;
    if (block < 0 || block >= out.blocks)
        return out;
    try {
        c10::InferenceMode guard;
        const std::int64_t begin = block * t.blockSize;
        const std::int64_t end = std::min(n, begin + t.blockSize);
        const BlockQuantized q = quantizeBlocks(values, begin, end, *type);
        const double* d = q.dequantized.data_ptr<double>();
        double signal = 0.0;
        double noise = 0.0;
        for (std::int64_t i = begin; i < end; ++i) {
            const double v = values[static_cast<std::size_t>(i)];
            const double r = d[i - begin];
            out.values.push_back(v);
            out.quantized.push_back(r);
            out.amax = std::max(out.amax, std::abs(v));
            signal += v * v;
            noise += (v - r) * (v - r);
        }
        out.sqnrDb = noise > 0.0 ? 10.0 * std::log10(signal / noise)
                                 : std::numeric_limits<double>::infinity();
        out.scale = q.qparams.scale.reshape({-1})[0].item<double>();
        const at::Tensor stored = q.qparams.blockScale.reshape({-1})[0];
        if (t.blockScale == quant::BlockScale::E4M3) {
            out.e4m3 = stored.to(at::kFloat).item<double>();
            out.scaleByte = stored.view(at::kByte).item<int>();
            out.tensorScale = q.qparams.tensorScale;
        } else {
            out.scaleByte = stored.to(at::kInt).item<int>();
        }
        const std::vector<double> elements = elementValues(t);
        out.elementMax = blockElementMax(format);
        for (const double e : elements)
            out.grid.push_back(e * out.scale);
        out.valid = std::isfinite(out.scale) && out.scale > 0.0;
    } catch (const std::exception&) {
        out.valid = false;
    }
    return out;
}

std::vector<double> blockScales(const std::vector<float>& values, std::string_view format,
                                std::int64_t maxBlocks)
{
    const auto type = blockType(format);
    if (!type || values.empty() || maxBlocks <= 0)
        return {};
    try {
        c10::InferenceMode guard;
        const auto n = static_cast<std::int64_t>(values.size());
        const std::int64_t end = std::min(n, maxBlocks * quant::traits(*type).blockSize);
        const BlockQuantized q = quantizeBlocks(values, 0, end, *type);
        const at::Tensor s =
            q.qparams.scale.to(at::kDouble).contiguous().reshape({-1}).narrow(0, 0, q.blocks);
        const double* d = s.data_ptr<double>();
        return {d, d + s.numel()};
    } catch (const std::exception&) {
        return {};
    }
}

} // namespace bitlens::analysis

// Shared data of the quantization property tests (test_quant_type.cpp's QuantProperty and
// test_mx_formats.cpp's block-format properties): the float formats' precision and one weight
// with the awkward values every type must handle.
#pragma once

#include "quant/quant_type.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bitlens::test {

/// Mantissa bits and smallest subnormal of a float format: the scalar float types (FP8, FP16,
/// BF16) and the float elements of the block formats (a new one must be added here).
struct FloatFormat {
    int mantissaBits;
    double minSubnormal;
};

inline FloatFormat floatFormat(quant::QuantType type)
{
    using quant::QuantType;
    switch (type) {
    case QuantType::MXFP4:
    case QuantType::NVFP4:
        return {1, 0.5};  // E2M1
    case QuantType::MXFP6E2M3:
        return {3, 0.125};
    case QuantType::MXFP6E3M2:
        return {2, 0.0625};
    case QuantType::FP8E4M3:
    case QuantType::MXFP8E4M3:
        return {3, std::ldexp(1.0, -9)};
    case QuantType::FP8E5M2:
    case QuantType::MXFP8E5M2:
        return {2, std::ldexp(1.0, -16)};
    case QuantType::FP16:
        return {10, std::ldexp(1.0, -24)};
    case QuantType::BF16:
        return {7, std::ldexp(1.0, -133)};
    default:
        throw std::logic_error("no float format for " + std::string(quant::traits(type).name));
    }
}

/// An [8, 256] weight with rows of very different magnitude (1e-3 to 30), exact zeros of both
/// signs and a constant run (columns 64-127 of row 3): each row spans several groups or blocks
/// of 16, 32 or 64.
inline at::Tensor propertyWeight(std::uint64_t seed)
{
    const at::Generator gen = at::detail::createCPUGenerator(seed);
    at::Tensor w = at::randn({8, 256}, gen) *
                   at::tensor(std::vector<float>{1.0f, 0.01f, 30.0f, 1.0f, 0.5f, 2.0f, 1e-3f, 7.0f})
                       .reshape({8, 1});
    w.index_put_({at::indexing::Slice(), 0}, 0.0f);
    w.index_put_({2, 5}, -0.0f);
    w.index_put_({3, at::indexing::Slice(64, 128)}, 0.25f);
    return w;
}

} // namespace bitlens::test

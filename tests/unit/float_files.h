#pragma once
// Raw float32 files exchanged with the Python reference scripts (tests/data/*/…_reference.py),
// and bit-for-bit comparison of float tensors.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace bitlens::test {

/// Writes `t` as float32, row-major, no header.
inline void writeFloats(const std::string& path, const at::Tensor& t)
{
    const at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(c.data_ptr<float>()),
              static_cast<std::streamsize>(c.numel() * sizeof(float)));
}

/// Reads a float32 file of `shape` (a short file fails the test, naming it).
inline at::Tensor readFloats(const std::string& path, std::vector<std::int64_t> shape)
{
    at::Tensor t = at::empty(shape, at::kFloat);
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(t.data_ptr<float>()),
            static_cast<std::streamsize>(t.numel() * sizeof(float)));
    EXPECT_TRUE(in.good()) << path;
    return t;
}

/// Elements of two float32 tensors of one shape whose bits differ.
inline std::int64_t bitsDiffer(const at::Tensor& a, const at::Tensor& b)
{
    return at::ne(a.contiguous().view(at::kInt), b.contiguous().view(at::kInt))
        .sum()
        .item<std::int64_t>();
}

/// True when `a` and `b` have one shape and the same bits.
inline bool sameBits(const at::Tensor& a, const at::Tensor& b)
{
    return a.sizes() == b.sizes() && bitsDiffer(a, b) == 0;
}

} // namespace bitlens::test

#pragma once
// Real low-bit execution: runs quantized layers with LibTorch's own low-bit kernels (int8 GEMM,
// FP8 GEMM, int4 / int8 weight-only GEMM, 16-bit GEMM and convolution) where one exists for the
// layer, its scheme and the device, so BitLens can measure the speed of real kernels and say per
// layer which kernel ran. Everything else stays simulated (fake quantization in float32).
//
// What runs for real (anything not listed stays simulated):
//
//   scheme (LayerConfig)                       ops                 CPU  CUDA    kernel
//   W8A8 int8: int8 symmetric per-channel or   Gemm, MatMul        yes  yes     at::_int_mm
//     per-tensor weights; int8 / uint8 acts,
//     static or dynamic, per-tensor or per-
//     token (dynamic-int8, static-int8,
//     smoothquant-int8, llm-int8)
//   FP8 W8A8: fp8 weights and activations,     Gemm, MatMul        yes* sm_89+  at::_scaled_mm
//     per-tensor scales, not both E5M2
//     (fp8-e4m3)
//   fp16 / bf16 mixed precision (fp16, bf16)   Gemm, MatMul, Conv  yes  yes     at::linear,
//                                                                               at::matmul,
//                                                                               at::convolution
//   weight-only int4 (also uint4 / int2        Gemm, MatMul        yes  sm_80+  at::_weight_
//     codes), any granularity whose blocks                                      int4pack_mm
//     are a multiple of 32 (w4-int4)                                            (_for_cpu)
//   weight-only int8, symmetric per-channel    Gemm, MatMul        yes  no      at::_weight_
//     or per-tensor (weight=int8, act Float)                                    int8pack_mm
//
// BitLens's own CPU kernels (kernels/lowbit.h) take over where the CPU has their ISA, unless
// the hook is made with KernelSource::LibTorch:
//
//   W8A8 int8 (as above)                       Gemm, MatMul        AVX512-VNNI  bitlens avx512-vnni
//                                                                               int8 gemm (vpdpbusd,
//                                                                               fused quantize and
//                                                                               dequant + bias)
//   W8A8 int8 (as above), 2-D, group 1, any    Conv                AVX2 and up  bitlens <row> int8
//     stride / padding / dilation; per-tensor                                   conv (im2col u8 x s8
//     activation scales                                                         -> s32, fused dequant)
//   weight-only int4 / uint4 / int2, per-      Gemm, MatMul        AVX512-VNNI  bitlens avx512-vnni
//     group (multiple of 32), per-channel or                                    <type> gemv g<group>
//     per-tensor scales                                                         (int8 activations
//                                                                               per group, vpdpbusd)
//   weight-only NF4 / FP4 (and the integer     Gemm, MatMul        AVX-512      bitlens avx512
//     codes without VNNI), same granularities                                   <type> gemv g<group>
//                                                                               (float32 accumulate)
//
// * LibTorch's CPU _scaled_mm is a slow path (measured, torch 2.13, 2 cores: ~110 ms for a
//   4096 x 4096 weight at M = 1 or 64, 10-90x slower than float32): real, and reported as such.
//
// Not handled, stay simulated: Conv in int4 / FP8, and int8 Conv with KernelSource::LibTorch,
// on CUDA, grouped / depthwise, 1-D / 3-D or at ISA level scalar (LibTorch has no such kernel
// without its deprecated quantized dtypes; the own scalar row is slower than float32, so it is
// never picked: kernelsRun() gives the reason after "simulated (fake-quant, float32): "), NF4 / FP4 without AVX-512 or on CUDA (no LibTorch kernel), W4A8 (no kernel), per-group
// int8 weights, asymmetric int8 weights, Gemm with transA = 1 or alpha / beta != 1, MatMul with
// a weight of rank > 2, K > 65535 for int8 (the int32 accumulator could overflow).
//
// Numerics (tests/unit/test_real_kernels.cpp checks each):
//  - int8: the int32 accumulator is exact (equal to an int64 matmul of the codes); the output
//    acc * (s_x * s_w[n]) + bias matches the simulated float32 result to float rounding.
//  - LLM.int8(): the int8 part as above; the outlier columns (|x| above the threshold anywhere
//    in the batch) as a float32 GEMM of fp16-rounded values, as the simulated path does.
//  - FP8: the same products as the simulated path, accumulated in float32 (CPU: to float
//    rounding; CUDA: cuBLASLt's fp32 accumulation).
//  - fp16 / bf16: inputs, weights and bias cast as autocast does, output rounded to 16 bits:
//    within a few units of 16-bit rounding of the simulated result (fp16: 2^-11, float32
//    accumulation; bf16: 2^-8, and LibTorch's CPU bf16 GEMM also rounds partial sums over K).
//  - int4 / int8 weight-only: activations, scales and zeros in bfloat16 (LibTorch's fast CPU
//    path: its float32 path is 20-60x slower than float and float16 is not faster either), so
//    the result is within bf16 tolerance of the simulated one (the test states the bound).
//  - BitLens's int8 GEMM: the same exact int32 accumulator; activation codes equal quantize()'s
//    bit for bit; y = float(acc) * (s_x * s_w[n]) + bias[n].
//  - BitLens's int8 conv: the same GEMM over im2col rows of the codes, padding taking the zero
//    point's code (exactly 0, as the float conv pads the fake-quantized input): matches the
//    simulated conv to float rounding. Its output is NCHW in channels-last memory (no copy).
//  - BitLens's 4-bit kernel: float32 activations and scales (no bf16 rounding): within float32
//    rounding of the simulated result (sum_g s * sum table[u] x + offset * sum x per group).
//  - BitLens's VNNI int4 kernel (integer codes): the activations rounded to int8 per weight
//    group (d_g = max |x| / 127 over the group), so |real - simulated| <= sum_g |s| d_g / 2
//    sum_{k in g} u (kernels/lowbit.h) plus float32 rounding: the simulated path stays the
//    reference for analysis, this one is the measured speed (and its own error is reported).
//  - Integer kernels have no NaN: a NaN activation becomes the code of 0 (the simulated path
//    keeps NaN).
//
// Shape rules: operands are zero-padded where a kernel needs it (int8: K and N to multiples of
// 8, and M to at least 17 on CUDA, as cuBLASLt's int8 GEMM wants; FP8: K and N to multiples of
// 16; int4: N to a multiple of 16 and K to a multiple of the kernel group; int8 weight-only: K
// to a multiple of 16, without which the CPU bf16 kernel reads past the row). Zero codes in
// padded columns add nothing, so padding never changes a result. Except for int8's M (which
// would cost 5x at M = 1 on CPU) the rules are the same on every device, so CPU tests exercise
// the padding CUDA needs.

#include "exec/executor.h"
#include "ir/graph.h"
#include "quant/engine.h"

#include <c10/core/Device.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace bitlens::quant {

/// Whose kernels the hook may use.
enum class KernelSource {
    Best,      ///< BitLens's own CPU kernels where the CPU has their ISA, else LibTorch's
    LibTorch,  ///< LibTorch's kernels only (the table below), e.g. to compare the two
};

/// What will run `node` for real on `device`, e.g. "at::_int_mm (int8 x int8 -> int32)", or
/// nullopt when LibTorch has no kernel for this layer, scheme and device (the layer then stays
/// simulated). Layers kept in float32 give nullopt. CUDA answers assume a recent GPU (FP8 needs
/// sm_89+, int4 sm_80+); the hook finds out at the first run and falls back (kernelsRun()).
std::optional<std::string> realKernelFor(const ir::Node& node, const LayerQuant& layer,
                                         c10::Device device,
                                         KernelSource source = KernelSource::Best);

/// A hook that runs a quantized model with real low-bit kernels where realKernelFor() names
/// one, and simulates the rest. Use it INSTEAD of makeQuantHook()'s hook, not beside it.
///
/// Design: it owns a simulated QuantHook (makeQuantHook(model)) and splits the work per layer.
///  - Layers realKernelFor(node, layer, device) accepts ("handled"): beforeNode leaves the
///    inputs in float32 and computeNode computes the layer with the real kernel from weight
///    codes quantized and packed once, at construction (for `device`) or at the first batch on
///    another device. Activations are quantized inside computeNode exactly as the simulated
///    hook quantizes them (static qparams, or per batch / per token from the batch itself).
///  - Other quantized layers: beforeNode forwards to the simulated hook (fake-quantized inputs)
///    and computeNode returns false, so the executor's float op runs, as with makeQuantHook.
///  - A handled layer that cannot run for real on a given batch (the input lives on a device
///    the kernel lacks, the input needs autograd, a kernel error such as an unsupported GPU)
///    is simulated inside computeNode on a copy of its inputs; kernelsRun() says why. A kernel
///    error disables the real kernel of that layer for the rest of the hook's life.
/// Other hooks attached to the same executor see float inputs for handled layers (the
/// quantization happens inside computeNode) and the real outputs. Inference only: the kernels
/// have no gradients. `model` must outlive the hook. One executor, one thread at a time.
class RealKernelHook : public exec::NodeHook {
public:
    /// Plans every layer for `device` and packs the weights of the handled ones.
    RealKernelHook(const QuantizedModel& model, c10::Device device,
                   KernelSource source = KernelSource::Best);
    ~RealKernelHook() override;

    /// Simulated layers: fake-quantizes their inputs. Handled layers: leaves them float.
    void beforeNode(const ir::Node& node, std::vector<at::Tensor>& inputs) override;
    /// Does nothing (the outputs are final).
    void afterNode(const ir::Node& node, std::vector<at::Tensor>& outputs) override;
    /// Handled layers: computes the output (real kernel, or the simulated fallback); returns
    /// false for every other node.
    bool computeNode(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                     std::vector<at::Tensor>& outputs) override;

    /// Layer name -> kernel that realKernelFor() chose for the construction device.
    const std::map<std::string, std::string>& plannedKernels() const;
    /// Layer name -> what computed it last, for every quantized or kept-float layer the hook
    /// saw: a realKernelFor() name, "simulated (fake-quant, float32)", "simulated (fake-quant,
    /// float32): <why the real kernel did not run>", or "float32 (kept float)".
    const std::map<std::string, std::string>& kernelsRun() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

/// Makes a RealKernelHook for `model` on `device` (see the class for the design). Attach it
/// alone, in place of makeQuantHook(model): executor.addHook(makeRealKernelHook(model, dev)).
std::shared_ptr<RealKernelHook> makeRealKernelHook(const QuantizedModel& model,
                                                   c10::Device device,
                                                   KernelSource source = KernelSource::Best);

/// The int8 GEMM at the heart of the W8A8 kernels, exposed for tests:
/// acc[m, n] = sum_k (xCodes[m, k] - xZeroPoint[m]) * wCodes[n, k], exact in int32, computed
/// by at::_int_mm on int8 operands. xCodes: uint8 or int8 [M, K]; xZeroPoint: int64, a scalar
/// (per-tensor), [M] (per-token) or undefined (0); wCodes: int8 [N, K], symmetric (zero point
/// 0). Returns int32 [M, N]. Pads as the header describes. K must be at most 65535 so that no
/// partial sum overflows int32.
at::Tensor int8MatmulAccumulate(const at::Tensor& xCodes, const at::Tensor& xZeroPoint,
                                const at::Tensor& wCodes);

} // namespace bitlens::quant

#include "quant/real_kernels.h"

#include "kernels/lowbit.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace bitlens::quant {

namespace {

/// The kernel families of the header's table.
enum class KernelKind {
    Int8,
    Fp8,
    Cast,
    Int4WeightOnly,
    Int8WeightOnly,
    Nibble4WeightOnly,
    Float16WeightOnly
};

/// What realKernelFor() decided for one layer on one device.
struct KernelPlan {
    KernelKind kind = KernelKind::Int8;
    std::string name;
    at::ScalarType castType = at::kFloat;  ///< Cast: the 16-bit type
    std::int64_t kernelGroup = 0;          ///< Int4WeightOnly: the kernel's group size
    bool outliers = false;                 ///< Int8: LLM.int8() outlier columns
    bool own = false;                      ///< Int8: BitLens's AVX512-VNNI GEMM, not _int_mm
    bool conv = false;                     ///< Int8 with own: a 2-D Conv as im2col + the GEMM
    /// Nibble4WeightOnly with integer codes: the VNNI GEMV on int8 activations per group.
    bool vnni = false;
};

/// The name of BitLens's own int8 GEMM (the LLM.int8() suffix is added to it as to _int_mm's).
/// The own int8 GEMM's name with the ISA row that runs it (kernels::int8GemmKernel()).
/// `reduced`: the weights are on 7 bits (reduce-range), which the AVX2 row multiplies with
/// vpmaddubsw (kernels::int8UsesMaddubs); the name says so there.
std::string ownInt8Name(bool reduced)
{
    const kernels::KernelRow row = kernels::int8GemmKernel();
    const bool maddubs = reduced && row.level == kernels::IsaLevel::Avx2;
    return std::string("bitlens ") + row.name + " int8 gemm (u8 x s8 -> s32" +
           (maddubs ? " with vpmaddubsw, 7-bit weights" : "") + ", fused dequant)";
}

/// The own int8 convolution's name with the ISA row of the GEMM that runs it.
std::string ownInt8ConvName(bool reduced)
{
    const kernels::KernelRow row = kernels::int8GemmKernel();
    const bool maddubs = reduced && row.level == kernels::IsaLevel::Avx2;
    return std::string("bitlens ") + row.name + " int8 conv (im2col u8 x s8 -> s32" +
           (maddubs ? " with vpmaddubsw, 7-bit weights" : "") + ", fused dequant)";
}

/// The int32 accumulator of a K-term int8 dot product cannot overflow up to this K: every term
/// is at most 255 * 128 in magnitude once the zero point is folded in (see int8Accumulate), and
/// 65535 * 255 * 128 < 2^31.
constexpr std::int64_t kMaxInt8K = 65535;
/// cuBLASLt's int8 GEMM (at::_int_mm on CUDA) wants M > 16 and K, N multiples of 8. K and N
/// are padded on every device (a no-op for the usual multiples of 8), M on CUDA only.
constexpr std::int64_t kInt8MinRows = 17;
constexpr std::int64_t kInt8Multiple = 8;
/// at::_scaled_mm wants K and N multiples of 16.
constexpr std::int64_t kFp8Multiple = 16;
/// The int4 CPU packer wants N a multiple of 16 (CUDA 8).
constexpr std::int64_t kInt4NMultiple = 16;
/// The bf16 CPU path of at::_weight_int8pack_mm reads K in steps of 16 (past the row otherwise:
/// it crashed on K = 7 and gave NaN on K = 33 with torch 2.13).
constexpr std::int64_t kInt8WeightOnlyKMultiple = 16;
/// Group sizes the int4 kernels support, largest first.
constexpr std::array<std::int64_t, 4> kInt4Groups = {256, 128, 64, 32};

std::int64_t roundUp(std::int64_t v, std::int64_t multiple)
{
    return (v + multiple - 1) / multiple * multiple;
}

bool isInt4Codes(QuantType t)
{
    return t == QuantType::Int4 || t == QuantType::UInt4 || t == QuantType::Int2;
}

bool isFp8(QuantType t) { return t == QuantType::FP8E4M3 || t == QuantType::FP8E5M2; }

std::string_view fp8Name(QuantType t)
{
    return t == QuantType::FP8E4M3 ? "float8_e4m3fn" : "float8_e5m2";
}

/// Gemm with transA = 0 and alpha = beta = 1, or MatMul with a 2-D weight: y = x W^T (+ bias)
/// with the weight view [N, K] of weightView().
bool linearShaped(const ir::Node& node, const LayerQuant& lq)
{
    if (node.op == ir::OpKind::Gemm)
        return node.attrs.getInt("transA", 0) == 0 && node.attrs.getFloat("alpha", 1.0) == 1.0 &&
               node.attrs.getFloat("beta", 1.0) == 1.0;
    return node.op == ir::OpKind::MatMul && lq.weightFloat.dim() == 2;
}

bool perChannelOrTensor(const Granularity& g)
{
    return g.kind == Granularity::Kind::PerChannel || g.kind == Granularity::Kind::PerTensor;
}

/// The int4 kernels' group size for a layer: one that divides our blocks, so that each kernel
/// group lies inside one of our scale blocks (per-group 96 runs as kernel groups of 32 sharing
/// scales three by three; per-channel runs as groups of the largest size dividing K).
std::optional<std::int64_t> int4KernelGroup(const Granularity& g, std::int64_t k)
{
    for (std::int64_t kg : kInt4Groups) {
        if (g.kind == Granularity::Kind::PerGroup ? g.groupSize % kg == 0 : k % kg == 0)
            return kg;
    }
    if (g.kind == Granularity::Kind::PerGroup)
        return std::nullopt;
    return kInt4Groups.back();  // K is padded to a multiple of 32
}

/// BitLens's own 4-bit kernel's group for a layer: the scale block itself when it is a whole
/// number of 32-element chunks (per-group), one group over the padded row (per-channel), or
/// nothing (per-tensor scales are expanded per row, so they are per-channel here).
std::optional<std::int64_t> nibble4Group(const Granularity& g)
{
    if (g.kind == Granularity::Kind::PerGroup)
        return g.groupSize % kernels::kNibbleGroupMultiple == 0
                   ? std::optional<std::int64_t>(g.groupSize)
                                                        : std::nullopt;
    return perChannelOrTensor(g) ? std::optional<std::int64_t>(0) : std::nullopt;
}

bool isNibble4Type(QuantType t)
{
    return isInt4Codes(t) || t == QuantType::NF4 || t == QuantType::FP4E2M1;
}

/// W8A8 int8 as the int8 kernels take it: symmetric per-channel or per-tensor int8 weights,
/// int8 / uint8 activations, static (calibrated) or dynamic.
bool isW8A8Int8(const LayerQuant& lq)
{
    const LayerConfig& c = lq.config;
    const bool staticOk = c.actMode == ActMode::Static && lq.act.has_value();
    return c.weightType == QuantType::Int8 && c.weightSymmetric &&
           perChannelOrTensor(lq.weightGranularity) &&
           (staticOk || c.actMode == ActMode::Dynamic) &&
           (c.actType == QuantType::Int8 || c.actType == QuantType::UInt8);
}

/// Why BitLens's int8 conv cannot run a W8A8 Conv layer at the ISA level in force, or "" when
/// it can. The scalar GEMM row is exact but several times slower than LibTorch's float conv,
/// so it is never picked for speed: the layer stays simulated and the report says so.
std::string ownConvBlocker(const ir::Node& node, const LayerQuant& lq)
{
    const at::Tensor& w = lq.weightFloat;
    if (w.dim() != 4)
        return "the int8 conv kernel is 2-D only (weight of rank " + std::to_string(w.dim()) +
               ")";
    const std::int64_t groups = node.attrs.getInt("group", 1);
    if (groups != 1)
        return "grouped / depthwise conv (group " + std::to_string(groups) +
               ") has no int8 conv kernel";
    if (w.size(1) * w.size(2) * w.size(3) > kMaxInt8K)
        return "K = C * kh * kw above " + std::to_string(kMaxInt8K) +
               " could overflow the int32 accumulator";
    if (lq.config.actMode == ActMode::Static && lq.act && lq.act->scale.numel() != 1)
        return "the int8 conv kernel takes per-tensor activation scales only";
    if (kernels::int8GemmKernel().isReference())
        return std::string("no vector int8 row at ISA level ") +
               kernels::isaName(kernels::isaLevel()) +
               " (the scalar row is slower than float32)";
    return {};
}

/// Why a float16 / bfloat16 cast layer runs simulated on the CPU (see planKernel).
std::string castOnCpuWhy(QuantType type)
{
    return std::string("LibTorch's ") + (type == QuantType::BF16 ? "bfloat16" : "float16") +
           " CPU kernels are slower than float32 (fashion-cnn's block2.conv in float16 28x "
           "slower on an AVX2 CPU), so the float32 simulation runs";
}

std::optional<KernelPlan> planKernel(const ir::Node& node, const LayerQuant& lq,
                                     c10::Device device, KernelSource source)
{
    const bool own = source == KernelSource::Best && device.is_cpu();
    const LayerConfig& c = lq.config;
    // 16-bit float weights need no scale (a GGUF F16 layer's round trip leaves none).
    const bool sixteenBit = c.weightType == QuantType::FP16 || c.weightType == QuantType::BF16;
    if (c.keepFloat || !lq.weightFloat.defined() ||
        (!lq.weight.scale.defined() && !(sixteenBit && lq.weightFq.defined())))
        return std::nullopt;
    // LSTM / GRU run simulated: their recurrence has no LibTorch or BitLens low-bit kernel.
    if (node.op == ir::OpKind::LSTM || node.op == ir::OpKind::GRU)
        return std::nullopt;
    if (!device.is_cpu() && !device.is_cuda())
        return std::nullopt;
    const bool cuda = device.is_cuda();
    const QuantType wt = c.weightType;
    KernelPlan plan;

    if (c.actMode == ActMode::Cast) {
        if ((wt != QuantType::FP16 && wt != QuantType::BF16) || c.actType != wt)
            return std::nullopt;
        // LibTorch's 16-bit CPU convolution and matmul measured far slower than float32 on every
        // CPU benchmarked (bench/RESULTS.md: fashion-cnn block2.conv 184 ms against 6.6 ms per
        // batch in float16 on an AVX2 AMD EPYC; 0.56-0.60x for bf16 at::linear with
        // AVX512-BF16), so where the best kernel is asked for the layer runs simulated there and
        // says why (castOnCpuWhy); KernelSource::LibTorch still runs it.
        if (own && !cuda)
            return std::nullopt;
        plan.kind = KernelKind::Cast;
        plan.castType = wt == QuantType::BF16 ? at::kBFloat16 : at::kHalf;
        std::string op = "at::matmul";
        if (node.op == ir::OpKind::Conv)
            op = "at::convolution";
        else if (node.op == ir::OpKind::Gemm && linearShaped(node, lq) &&
                 node.attrs.getInt("transB", 0) != 0)
            op = "at::linear";
        plan.name = op + (wt == QuantType::BF16 ? " (bfloat16)" : " (float16)");
        return plan;
    }

    if (node.op == ir::OpKind::Conv) {
        // LibTorch has no int8 / int4 / FP8 conv kernel; BitLens's int8 conv needs a vector
        // int8 GEMM row and a plain 2-D conv (ownConvBlocker() says why not, for the report).
        if (!own || !isW8A8Int8(lq) || !ownConvBlocker(node, lq).empty())
            return std::nullopt;
        plan.kind = KernelKind::Int8;
        plan.own = true;
        plan.conv = true;
        plan.name = ownInt8ConvName(lq.config.reduceRange);
        return plan;
    }
    if (!linearShaped(node, lq))
        return std::nullopt;
    const at::Tensor view = weightView(node, codeSource(lq));
    const std::int64_t k = view.size(1);
    const Granularity& wg = lq.weightGranularity;

    const bool staticOk = c.actMode == ActMode::Static && lq.act.has_value();
    if (wt == QuantType::Int8 && c.weightSymmetric && perChannelOrTensor(wg) &&
        (staticOk || c.actMode == ActMode::Dynamic) &&
        (c.actType == QuantType::Int8 || c.actType == QuantType::UInt8) && k <= kMaxInt8K) {
        plan.kind = KernelKind::Int8;
        plan.outliers = c.actMode == ActMode::Dynamic && c.outlierThreshold > 0.0;
        // Measured (bench/RESULTS.md): on every benchmarked shape the VNNI GEMM with its fused
        // epilogue beats _int_mm plus the separate scaling, so it runs wherever the CPU has it.
        // The scalar reference row is exact but far slower than _int_mm: never chosen for speed.
        plan.own = own && !kernels::int8GemmKernel().isReference();
        plan.name = plan.own ? ownInt8Name(lq.config.reduceRange)
                              : "at::_int_mm (int8 x int8 -> int32)";
        if (plan.outliers)
            plan.name += " + float32 GEMM of the fp16 outlier columns (LLM.int8)";
        return plan;
    }

    // On the CPU at::_scaled_mm is a reference loop: fashion-cnn's fc1 took 4.3 s per batch of
    // 256 against 1.5 ms float32 (2026-12-02, Xeon). Where the best kernel is asked for, FP8
    // runs simulated there and says why (fp8OnCpuWhy); KernelSource::LibTorch still runs it.
    if (isFp8(wt) && isFp8(c.actType) && !(own && !cuda) &&
        !(wt == QuantType::FP8E5M2 && c.actType == QuantType::FP8E5M2) &&
        wg.kind == Granularity::Kind::PerTensor &&
        (staticOk ||
         (c.actMode == ActMode::Dynamic &&
          c.actGranularity.kind == Granularity::Kind::PerTensor))) {
        plan.kind = KernelKind::Fp8;
        plan.name = "at::_scaled_mm (" + std::string(fp8Name(c.actType)) + " x " +
                    std::string(fp8Name(wt)) + " -> float32)";
        return plan;
    }

    if (c.actMode != ActMode::Float)
        return std::nullopt;
    if (own && (wt == QuantType::FP16 || wt == QuantType::BF16) &&
        !kernels::float16GemmKernel().isReference()) {
        // 16-bit weights, float32 activations and sums: half the bytes of the float32 GEMV.
        plan.kind = KernelKind::Float16WeightOnly;
        const std::string type(traits(wt).name);
        plan.name = std::string("bitlens ") + kernels::float16GemmKernel().name + " " + type +
                    " weight-only gemm (float32 x " + type + " -> float32)";
        return plan;
    }
    if (own && !kernels::nibble4GemmKernel().isReference() && isNibble4Type(wt)) {
        if (const auto group = nibble4Group(wg)) {
            plan.kind = KernelKind::Nibble4WeightOnly;
            plan.kernelGroup = *group;
            const std::string type(traits(wt).name);
            // Integer codes (identity table): the VNNI kernel, with the activations rounded to
            // int8 per group (kernels/lowbit.h gives the error bound); code tables keep the
            // float-activation kernel.
            // Per-channel scales make one group of the whole (padded) row.
            const std::int64_t vnniGroup =
                *group ? *group : roundUp(k, kernels::kNibbleVnniKMultiple);
            plan.vnni = isInt4Codes(wt) && !kernels::nibble4GemvQ8Kernel().isReference() &&
                        vnniGroup <= kernels::kNibbleVnniMaxGroup;
            if (plan.vnni) {
                plan.name = std::string("bitlens ") + kernels::nibble4GemvQ8Kernel().name + " " +
                            type + " gemv " +
                            (*group ? "g" + std::to_string(*group) : std::string("per-channel")) +
                            " (float32 -> int8 per group x " + type + " -> float32)";
                return plan;
            }
            plan.name = std::string("bitlens ") + kernels::nibble4GemmKernel().name + " " + type +
                        " gemv " +
                        (*group ? "g" + std::to_string(*group) : std::string("per-channel")) +
                        " (float32 x " + type + " -> float32)";
            return plan;
        }
    }
    if (isInt4Codes(wt)) {
        const auto kg = int4KernelGroup(wg, k);
        if (!kg)
            return std::nullopt;
        plan.kind = KernelKind::Int4WeightOnly;
        plan.kernelGroup = *kg;
        plan.name = cuda ? "at::_weight_int4pack_mm" : "at::_weight_int4pack_mm_for_cpu";
        plan.name += " (bfloat16 x int4, group " + std::to_string(*kg) + ")";
        return plan;
    }
    if (wt == QuantType::Int8 && c.weightSymmetric && perChannelOrTensor(wg) && !cuda) {
        plan.kind = KernelKind::Int8WeightOnly;
        plan.name = "at::_weight_int8pack_mm (bfloat16 x int8)";
        return plan;
    }
    return std::nullopt;
}

/// `t` [rows, cols] zero-padded to [rows', cols'].
at::Tensor padTo(const at::Tensor& t, std::int64_t rows, std::int64_t cols, double value = 0.0)
{
    if (t.size(0) == rows && t.size(1) == cols)
        return t;
    return at::constant_pad_nd(t, {0, cols - t.size(1), 0, rows - t.size(0)}, value);
}

/// Weight codes of the int8 GEMM, padded to cuBLASLt's multiples, and their row sums (for the
/// zero-point correction).
struct Int8Weight {
    at::Tensor codes;   ///< int8 [N', K'], contiguous: at::_int_mm reads its transpose
    at::Tensor rowSum;  ///< int32 [N']: sum_k codes[n, k]
};

Int8Weight packInt8Weight(const at::Tensor& wCodes)
{
    Int8Weight w;
    w.codes = padTo(wCodes.to(at::kChar), roundUp(wCodes.size(0), kInt8Multiple),
                    roundUp(wCodes.size(1), kInt8Multiple))
                  .contiguous();
    w.rowSum = w.codes.sum(1, false, at::kInt);
    return w;
}

/// acc[m, n] = sum_k (x[m, k] - zp[m]) * w[n, k] in int32, for n < `n`.
///
/// at::_int_mm multiplies int8 by int8 only, so uint8 activation codes are shifted into int8
/// by flipping their top bit (u ^ 0x80 read as int8 is u - 128), and the shift and the zero
/// point are folded into one exact correction per row:
///   sum_k (x - zp) w = sum_k (x - 128) w + (128 - zp) * rowSum(w).
/// Worked example: x = [200, 3], zp = 3, w = [2, -1]. Wanted (200 - 3) * 2 + (3 - 3) * -1 = 394.
/// Shifted x - 128 = [72, -125]: 72 * 2 + (-125) * (-1) = 269; rowSum(w) = 1, (128 - 3) * 1 =
/// 125; 269 + 125 = 394. int8 codes need no shift (the correction is -zp * rowSum, and nothing at
/// all when zp is 0, as for symmetric activations: pass an undefined `xZeroPoint`). Every term
/// stays within int32 for K <= kMaxInt8K.
at::Tensor int8Accumulate(const at::Tensor& xCodes, const at::Tensor& xZeroPoint,
                          const Int8Weight& w, std::int64_t n)
{
    const bool unsignedCodes = xCodes.scalar_type() == at::kByte;
    const at::Tensor shifted =
        unsignedCodes ? at::bitwise_xor(xCodes, 0x80).view(at::kChar) : xCodes;
    const std::int64_t m = shifted.size(0);
    // Only CUDA needs the extra rows: on CPU they would cost 5x at M = 1 (0.33 -> 1.67 ms for
    // K = N = 4096).
    const std::int64_t rows = shifted.is_cuda() ? std::max(m, kInt8MinRows) : m;
    const at::Tensor a = padTo(shifted, rows, w.codes.size(1)).contiguous();
    at::Tensor acc = at::_int_mm(a, w.codes.t()).narrow(0, 0, m).narrow(1, 0, n);
    const std::int64_t shift = unsignedCodes ? 128 : 0;
    if (!xZeroPoint.defined() && shift == 0)
        return acc;
    const at::Tensor offset =
        xZeroPoint.defined() ? (shift - xZeroPoint.to(acc.device(), at::kLong)).to(at::kInt)
                             : at::full({}, shift, acc.options());
    const at::Tensor rowSum = w.rowSum.narrow(0, 0, n);
    return offset.dim() == 0 ? acc + offset * rowSum
                             : acc + offset.reshape({-1, 1}) * rowSum.unsqueeze(0);
}

/// Weights of one layer prepared for one kernel on one device.
/// Activation quantization as the own int8 kernels take it: plain arrays, built once for a
/// static scale, or per call from a dynamic range (no small tensor ops on the hot path).
struct ActQuant {
    std::vector<float> scale;          ///< [1] or [M]
    std::vector<float> inv;            ///< float32 reciprocal of each scale (as quantize())
    std::vector<std::int32_t> zeroPoint;  ///< codes, as the type counts them
    std::vector<std::int32_t> zeroU8;  ///< zeroPoint + shift (the GEMM's u8 zero points)
    bool perRow = false;
    std::int32_t qmin = 0, qmax = 255, shift = 0;
};

/// ActQuant of `type` codes in `range` with these scales and zero points;
/// the reciprocals, the code range, the u8 shift and the shifted zero points follow from them.
ActQuant makeActQuant(QuantType type, CodeRange range, std::vector<float> scale,
                      std::vector<std::int32_t> zeroPoint)
{
    ActQuant a;
    a.scale = std::move(scale);
    a.zeroPoint = std::move(zeroPoint);
    a.perRow = a.scale.size() != 1;
    const auto [qmin, qmax] = codeRange(type, range);
    a.qmin = static_cast<std::int32_t>(qmin);
    a.qmax = static_cast<std::int32_t>(qmax);
    // int8 codes go in as u = q + 128 with zero point zp + 128 (see kernels/lowbit.h).
    a.shift = type == QuantType::Int8 ? 128 : 0;
    for (float s : a.scale)
        a.inv.push_back(1.0f / s);  // at::reciprocal's float32 division
    for (std::int32_t z : a.zeroPoint)
        a.zeroU8.push_back(z + a.shift);
    return a;
}

/// ActQuant of a QParams (any device; read back to the CPU).
ActQuant actQuantOf(const QParams& qp)
{
    const at::Tensor scale = qp.scale.to(at::kCPU, at::kFloat).reshape({-1}).contiguous();
    const at::Tensor zp = (qp.zeroPoint.defined() ? qp.zeroPoint.reshape({-1})
                                                  : at::zeros({1}, at::kLong))
                              .to(at::kCPU, at::kInt)
                              .contiguous();
    return makeActQuant(
        qp.type, qp.range,
        std::vector<float>(scale.data_ptr<float>(), scale.data_ptr<float>() + scale.numel()),
        std::vector<std::int32_t>(zp.data_ptr<std::int32_t>(),
                                  zp.data_ptr<std::int32_t>() + zp.numel()));
}

struct Prepared {
    KernelPlan plan;
    std::int64_t n = 0;           ///< output features
    std::int64_t k = 0;           ///< input features
    std::int64_t kPadded = 0;     ///< K as the kernel reads it
    std::int64_t convC = 0;       ///< Int8 conv: input channels
    std::int64_t convKh = 0;      ///< Int8 conv: kernel height
    std::int64_t convKw = 0;      ///< Int8 conv: kernel width
    Int8Weight int8;              ///< Int8
    at::Tensor weight;            ///< Fp8: fp8 [N', K']; Cast: 16-bit, layer layout; Int4: packed;
                                  ///< Int8WeightOnly: int8 [N, K']
    at::Tensor scale;             ///< Int8: float32 [N]; Fp8: float32 scalar; Int8WO: bf16 [N]
    at::Tensor scaleAndZeros;     ///< Int4: bf16 [K' / group, N', 2]
    at::Tensor weightHalf;        ///< Int8 with outliers: fp16-rounded float32 view [N, K]
    at::Tensor smooth;            ///< SmoothQuant divisor per input channel (undefined: off)
    std::optional<QParams> act;   ///< static activation qparams, on the device
    std::optional<ActQuant> actQuant;  ///< Int8 with plan.own: `act` as the kernel takes it
    /// Int8 with plan.own: the weights packed for the VNNI GEMM (shared: Prepared is copied).
    std::shared_ptr<const kernels::Int8PackedWeight> own8;
    /// Nibble4WeightOnly: codes, group scales and offsets packed for the AVX-512 kernel.
    std::shared_ptr<const kernels::Nibble4PackedWeight> nibble4;
    /// Nibble4WeightOnly with plan.vnni: the same codes packed for the VNNI GEMV.
    std::shared_ptr<const kernels::Nibble4VnniPackedWeight> nibble4Vnni;
};

/// Per-output-channel scale of a per-channel or per-tensor weight, as a float32 [N] vector.
at::Tensor channelScale(const QParams& qp, std::int64_t n)
{
    const at::Tensor s = qp.scale.to(at::kFloat);
    return s.dim() == 0 ? s.expand({n}).contiguous() : s.reshape({n});
}

QParams onDevice(const QParams& qp, c10::Device device)
{
    QParams out = qp;
    out.scale = qp.scale.to(device);
    out.zeroPoint = qp.zeroPoint.defined() ? qp.zeroPoint.to(device) : qp.zeroPoint;
    return out;
}

/// Int4 weight-only: our codes q with zero point z mean w = (q - z) * s; the kernels read
/// unsigned nibbles u in [0, 15] and compute w = (u - 8) * scale + zero. With u = q + offset
/// (offset 8 for int4 / int2 codes, 0 for uint4): zero = (8 - offset - z) * s.
/// Worked example: int4, s = 0.1, z = -3, q = 2: w = (2 + 3) * 0.1 = 0.5. The kernel gets
/// u = 10 and zero = (8 - 8 + 3) * 0.1 = 0.3: (10 - 8) * 0.1 + 0.3 = 0.5. (torchao writes the
/// same convention as zero = min + 8 * scale.) Scales and zeros are stored in bfloat16, as the
/// kernels want.
void prepareInt4(Prepared& p, const at::Tensor& view, const LayerQuant& lq, c10::Device device)
{
    const std::int64_t kg = p.plan.kernelGroup;
    p.kPadded = roundUp(p.k, kg);
    const std::int64_t nPadded = roundUp(p.n, kInt4NMultiple);
    const std::int64_t offset = lq.config.weightType == QuantType::UInt4 ? 0 : 8;
    const at::Tensor u = padTo(quantize(view, lq.weight).to(at::kInt) + offset, nPadded,
                               p.kPadded, 8.0)
                             .contiguous();

    // Our scale blocks, [N, blocks], then one column per kernel group.
    const Granularity& g = lq.weightGranularity;
    at::Tensor s = lq.weight.scale.to(at::kFloat);
    at::Tensor z = lq.weight.zeroPoint.defined() ? lq.weight.zeroPoint.to(at::kFloat)
                                                 : at::zeros_like(s);
    if (s.dim() == 0) {
        s = s.expand({p.n, 1});
        z = z.expand({p.n, 1});
    }
    s = s.reshape({p.n, -1});
    z = z.reshape({p.n, -1});
    const std::int64_t blocks = s.size(1);
    const std::int64_t groups = p.kPadded / kg;
    std::vector<std::int64_t> blockOf(static_cast<std::size_t>(groups));
    for (std::int64_t j = 0; j < groups; ++j)
        blockOf[static_cast<std::size_t>(j)] =
            g.kind == Granularity::Kind::PerGroup ? std::min(j * kg / g.groupSize, blocks - 1)
                                                  : 0;
    const at::Tensor index = at::tensor(blockOf, at::kLong);
    const at::Tensor sg = s.index_select(1, index);
    const at::Tensor zero = (8.0 - static_cast<double>(offset) - z.index_select(1, index)) * sg;
    // Padded output channels: scale 1, zero 0 (their outputs are dropped anyway).
    const at::Tensor sPadded = padTo(sg, nPadded, groups, 1.0);
    const at::Tensor zPadded = padTo(zero, nPadded, groups, 0.0);
    p.scaleAndZeros =
        at::stack({sPadded.t(), zPadded.t()}, 2).to(device, at::kBFloat16).contiguous();

    // 8 inner k-tiles (16-byte loads) where K allows, as torchao's default.
    const std::int64_t innerKTiles = p.kPadded % 128 == 0 ? 8 : (p.kPadded % 64 == 0 ? 4 : 2);
    if (device.is_cuda()) {
        // The CUDA packer reads bytes [N, K / 2], element 2k in the HIGH nibble (torchao's
        // `(w[:, ::2] << 4) | w[:, 1::2]`), the opposite of ONNX / packInt4().
        const at::Tensor bytes =
            (u.slice(1, 0, p.kPadded, 2) * 16 + u.slice(1, 1, p.kPadded, 2)).to(at::kByte);
        p.weight = at::_convert_weight_to_int4pack(bytes.to(device).contiguous(), innerKTiles);
    } else {
        p.weight = at::_convert_weight_to_int4pack_for_cpu(u, innerKTiles);
    }
}

/// BitLens's 4-bit kernel: codes u in [0, 15] with w = table[u] * s + offset per group.
/// Integer codes q with zero point z: u = q - qmin, table = {0..15}, offset = (qmin - z) * s,
/// so table[u] * s + offset = (q - z) * s. Worked example, int4 (qmin -8), s = 0.1, z = -3,
/// q = 2: u = 10, offset = (-8 + 3) * 0.1 = -0.5, 10 * 0.1 - 0.5 = 0.5 = (2 + 3) * 0.1. Code
/// tables (NF4, FP4): u = q, table = the type's values, no offset.
void prepareNibble4(Prepared& p, const at::Tensor& view, const LayerQuant& lq)
{
    const QuantTypeTraits& t = traits(lq.config.weightType);
    const bool integer = t.family == TypeFamily::Integer;
    at::Tensor codes = quantize(view, lq.weight).to(at::kInt);  // [N, K]
    if (integer)
        codes = codes - static_cast<std::int64_t>(t.qmin);
    const at::Tensor u = codes.to(at::kByte).contiguous();
    at::Tensor s = lq.weight.scale.to(at::kFloat);
    at::Tensor z = lq.weight.zeroPoint.defined() ? lq.weight.zeroPoint.to(at::kFloat)
                                                 : at::zeros_like(s);
    if (s.dim() == 0) {
        s = s.expand({p.n, 1});
        z = z.expand({p.n, 1});
    }
    s = s.reshape({p.n, -1}).contiguous();
    const at::Tensor offset =
        integer ? ((static_cast<double>(t.qmin) - z.reshape({p.n, -1})) * s).contiguous()
                : at::Tensor();
    const std::int64_t kPadded = roundUp(p.k, kernels::kNibbleChunk);
    const std::int64_t group = p.plan.kernelGroup ? p.plan.kernelGroup : kPadded;
    TORCH_CHECK(s.size(1) == (p.k + group - 1) / group, "4-bit kernel: ", s.size(1),
                " scale blocks for K = ", p.k, " in groups of ", group);
    // Integer types have no code table in their traits: theirs is the identity.
    std::vector<float> table(16);
    for (std::size_t i = 0; i < table.size(); ++i)
        table[i] = integer ? static_cast<float>(i) : t.codes[i];
    p.kPadded = kPadded;
    if (p.plan.vnni) {
        // The VNNI layout pads K to 32 only; a per-channel group covers that padded row.
        const std::int64_t vnniGroup =
            p.plan.kernelGroup ? group : roundUp(p.k, kernels::kNibbleVnniKMultiple);
        p.nibble4Vnni = std::make_shared<const kernels::Nibble4VnniPackedWeight>(
            kernels::packNibble4Vnni(u.data_ptr<std::uint8_t>(), p.n, p.k, p.k, vnniGroup,
                                     s.data_ptr<float>(),
                                     offset.defined() ? offset.data_ptr<float>() : nullptr));
        return;
    }
    p.nibble4 = std::make_shared<const kernels::Nibble4PackedWeight>(kernels::packNibble4Weight(
        u.data_ptr<std::uint8_t>(), p.n, p.k, p.k, group, s.data_ptr<float>(),
        offset.defined() ? offset.data_ptr<float>() : nullptr, table.data(), 0));
}

Prepared prepareWeights(const ir::Node& node, const LayerQuant& lq, const KernelPlan& plan,
                        c10::Device device)
{
    c10::InferenceMode guard;
    Prepared p;
    p.plan = plan;
    if (lq.smooth.defined())
        p.smooth = lq.smooth.to(device, at::kFloat);
    if (lq.act)
        p.act = onDevice(*lq.act, device);
    if (plan.kind == KernelKind::Cast) {
        p.weight = lq.weightFloat.to(device, plan.castType).contiguous();
        return p;
    }
    const at::Tensor view = weightView(node, codeSource(lq)).to(at::kFloat);  // [N, K]
    p.n = view.size(0);
    p.k = view.size(1);
    switch (plan.kind) {
    case KernelKind::Int8: {
        p.scale = channelScale(lq.weight, p.n).to(device).contiguous();
        if (plan.outliers)
            p.weightHalf = view.to(at::kHalf).to(at::kFloat).to(device);
        if (plan.own) {
            at::Tensor codes = quantize(view, lq.weight).to(at::kChar);
            if (plan.conv) {
                // im2col reads channels-last patches: K runs over (kh, kw, c), so the weight
                // rows [C, kh, kw] are reordered to [kh, kw, C] to match (see runInt8Conv).
                const at::Tensor& wf = lq.weightFloat;
                p.convC = wf.size(1);
                p.convKh = wf.size(2);
                p.convKw = wf.size(3);
                codes = codes.reshape({p.n, p.convC, p.convKh, p.convKw})
                            .permute({0, 2, 3, 1})
                            .reshape({p.n, p.k});
            }
            codes = codes.contiguous();
            p.own8 = std::make_shared<const kernels::Int8PackedWeight>(
                kernels::packInt8Weight(codes.data_ptr<std::int8_t>(), p.n, p.k, p.k));
            p.kPadded = p.own8->kPadded;
            if (p.act)
                p.actQuant = actQuantOf(*p.act);
            break;
        }
        const Int8Weight w = packInt8Weight(quantize(view, lq.weight));
        p.int8 = {w.codes.to(device), w.rowSum.to(device)};
        p.kPadded = w.codes.size(1);
        break;
    }
    case KernelKind::Fp8: {
        // Zeros quantize to zero codes, so padding the float view pads the codes.
        p.kPadded = roundUp(p.k, kFp8Multiple);
        const at::Tensor padded = padTo(view, roundUp(p.n, kFp8Multiple), p.kPadded);
        p.weight = quantize(padded, lq.weight).to(device).contiguous();
        p.scale = lq.weight.scale.to(device, at::kFloat).reshape({});
        break;
    }
    case KernelKind::Int4WeightOnly: prepareInt4(p, view, lq, device); break;
    case KernelKind::Nibble4WeightOnly: prepareNibble4(p, view, lq); break;
    case KernelKind::Float16WeightOnly:
        // The simulated layer's weights are 16-bit values (a cast, or GGUF F16's round trip),
        // so the cast back to 16 bits is exact.
        p.weight = weightView(node, lq.weightFq)
                       .to(at::kCPU, lq.config.weightType == QuantType::FP16 ? at::kHalf
                                                                              : at::kBFloat16)
                       .contiguous();
        break;
    case KernelKind::Int8WeightOnly:
        p.kPadded = roundUp(p.k, kInt8WeightOnlyKMultiple);
        p.weight = padTo(quantize(view, lq.weight), p.n, p.kPadded).to(device).contiguous();
        p.scale = channelScale(lq.weight, p.n).to(device, at::kBFloat16);
        break;
    case KernelKind::Cast: break;
    }
    return p;
}

/// y[m, n] = acc[m, n] * s_x[m] * s_w[n] (s_x a scalar or per row).
at::Tensor scaleAccumulator(const at::Tensor& acc, const at::Tensor& xScale,
                            const at::Tensor& wScale)
{
    at::Tensor y = acc.to(at::kFloat);
    if (xScale.dim() == 0)
        return y.mul_(xScale * wScale);
    return y.mul_(xScale.reshape({-1, 1})).mul_(wScale);
}

/// BitLens's int8 path: the rows quantized with `qp` exactly as quantize() does (fused in one
/// pass), the VNNI GEMM, and the scaling (and `bias`, when defined) fused into its epilogue.
at::Tensor ownInt8(const at::Tensor& rows, const ActQuant& a, const Prepared& p,
                   const at::Tensor& bias)
{
    const at::Tensor x = rows.to(at::kFloat).contiguous();
    const std::int64_t m = x.size(0);
    // Per-tensor: one scale; per-token: one per row (the same thing when M = 1).
    TORCH_CHECK(!a.perRow || static_cast<std::int64_t>(a.scale.size()) == m, "int8 kernel: ",
                a.scale.size(), " scales for ", m, " rows");
    const kernels::Int8PackedWeight& w = *p.own8;
    at::Tensor u = at::empty({m, w.kPadded}, at::kByte);
    kernels::quantizeRowsU8(x.data_ptr<float>(), m, p.k, p.k, a.inv.data(), a.zeroPoint.data(),
                            a.perRow, a.qmin, a.qmax, a.shift, u.data_ptr<std::uint8_t>(),
                            w.kPadded);
    at::Tensor y = at::empty({m, p.n});
    const kernels::Int8Epilogue epilogue{a.scale.data(), a.perRow, p.scale.data_ptr<float>(),
                                         bias.defined() ? bias.data_ptr<float>() : nullptr};
    kernels::int8GemmF32({u.data_ptr<std::uint8_t>(), m, w.kPadded, a.zeroU8.data(), a.perRow},
                         w, epilogue, y.data_ptr<float>());
    return y;
}

/// The dynamic per-tensor activation quantization of x (float32, contiguous, CPU) for the
/// own kernel: min / max with the vector kernel and chooseQParamsScalar, bit for bit what
/// dynamicQParams gives.
ActQuant dynamicActQuant(const at::Tensor& x, const LayerConfig& c)
{
    float lo = 0.0f, hi = 0.0f;
    if (x.numel() > 0)
        kernels::minMaxF32(x.data_ptr<float>(), x.numel(), &lo, &hi);
    const ScalarQParams q = chooseQParamsScalar(lo, hi, c.actType, c.actSymmetric);
    return makeActQuant(c.actType, CodeRange::Full, {q.scale},
                        {static_cast<std::int32_t>(q.zeroPoint)});
}

/// The 2-D geometry of a Conv node on an input of H x W (ONNX pads / auto_pad resolved as the
/// executor resolves them; asymmetric pads allowed).
struct ConvGeometry {
    std::int64_t strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
    std::int64_t padTop = 0, padLeft = 0, outH = 0, outW = 0;
};

std::optional<ConvGeometry> convGeometry(const ir::Node& node, std::int64_t h, std::int64_t w,
                                         std::int64_t kh, std::int64_t kw, std::string& why)
{
    const auto strides = node.attrs.getInts("strides", {1, 1});
    const auto dilations = node.attrs.getInts("dilations", {1, 1});
    if (strides.size() != 2 || dilations.size() != 2) {
        why = "strides / dilations of the wrong length for a 2-D conv";
        return std::nullopt;
    }
    ConvGeometry g;
    g.strideH = strides[0];
    g.strideW = strides[1];
    g.dilationH = dilations[0];
    g.dilationW = dilations[1];
    const std::int64_t effH = (kh - 1) * g.dilationH + 1;
    const std::int64_t effW = (kw - 1) * g.dilationW + 1;
    std::int64_t padBottom = 0, padRight = 0;
    const std::string autoPad = node.attrs.getString("auto_pad", "NOTSET");
    if (autoPad == "NOTSET") {
        const auto pads = node.attrs.getInts("pads", {0, 0, 0, 0});
        if (pads.size() != 4) {
            why = "pads of the wrong length for a 2-D conv";
            return std::nullopt;
        }
        g.padTop = pads[0];
        g.padLeft = pads[1];
        padBottom = pads[2];
        padRight = pads[3];
    } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
        // SAME: out = ceil(in / stride); the odd pad goes to the end (UPPER) or begin (LOWER).
        const auto same = [&](std::int64_t in, std::int64_t stride, std::int64_t eff,
                              std::int64_t& begin, std::int64_t& end) {
            const std::int64_t out = (in + stride - 1) / stride;
            const std::int64_t total = std::max<std::int64_t>((out - 1) * stride + eff - in, 0);
            const std::int64_t small = total / 2;
            begin = autoPad == "SAME_UPPER" ? small : total - small;
            end = total - begin;
        };
        same(h, g.strideH, effH, g.padTop, padBottom);
        same(w, g.strideW, effW, g.padLeft, padRight);
    } else if (autoPad != "VALID") {
        why = "auto_pad '" + autoPad + "' is not supported";
        return std::nullopt;
    }
    if (g.strideH < 1 || g.strideW < 1 || g.dilationH < 1 || g.dilationW < 1 || g.padTop < 0 ||
        g.padLeft < 0 || padBottom < 0 || padRight < 0) {
        why = "strides, dilations or pads out of range";
        return std::nullopt;
    }
    g.outH = (h + g.padTop + padBottom - effH) / g.strideH + 1;
    g.outW = (w + g.padLeft + padRight - effW) / g.strideW + 1;
    if (h + g.padTop + padBottom < effH || w + g.padLeft + padRight < effW) {
        why = "the kernel is larger than the padded input";
        return std::nullopt;
    }
    return g;
}

/// BitLens's int8 convolution: the input quantized once to u8 codes (exactly as quantize()
/// does, per tensor), im2col on the codes, the int8 GEMM with scales and bias fused, NCHW out.
///
/// Layout: the codes are made channels-last (NHWC) so that a patch row is kh * kw runs of C
/// contiguous bytes: row m = (b, oh, ow), column (i * kw + j) * C + c holds the code of
/// x[b, c, oh * sh - padTop + i * dh, ow * sw - padLeft + j * dw], and the weight rows were
/// reordered to the same (kh, kw, C) order at packing. Positions in the padding get the zero
/// point's code, which means exactly 0, as the float conv pads the fake-quantized input with
/// 0. Worked example: C = 2, kh = kw = 3, pad 1, stride 1: the row of output (b, 0, 0) starts
/// with 2 * (3 + 1) bytes of zero-point code (patch row i = 0, then column j = 0 of row 1),
/// then x[b, 0, 0, 0], x[b, 1, 0, 0], x[b, 0, 0, 1], ...
at::Tensor runInt8Conv(const ir::Node& node, const LayerQuant& lq, const Prepared& p,
                       const at::Tensor& input, const at::Tensor& bias, std::string& why)
{
    if (input.dim() != 4 || input.size(1) != p.convC) {
        why = "input of shape " + c10::str(input.sizes()) + " does not fit the kernel";
        return {};
    }
    const std::int64_t batch = input.size(0), c = p.convC, h = input.size(2), w = input.size(3);
    const auto g = convGeometry(node, h, w, p.convKh, p.convKw, why);
    if (!g)
        return {};
    // Codes are made channels-last; an input already channels-last (the output of an earlier
    // int8 conv, through ReLU and pooling) is quantized in place, without a transpose.
    const at::Tensor xf = input.to(at::kFloat);
    const at::Tensor x = xf.permute({0, 2, 3, 1}).is_contiguous() ? xf : xf.contiguous();
    const QParams qp = lq.config.actMode == ActMode::Static ? *p.act
                                                            : dynamicQParams(x, lq.config);
    const at::Tensor scale = qp.scale.to(at::kFloat).reshape({-1}).contiguous();
    if (scale.numel() != 1) {
        why = "the int8 conv kernel takes per-tensor activation scales only";
        return {};
    }
    const at::Tensor inv = at::reciprocal(scale);  // the float32 reciprocal quantize() uses
    const at::Tensor zp = (qp.zeroPoint.defined() ? qp.zeroPoint.reshape({-1})
                                                  : at::zeros({1}, at::kLong))
                              .to(at::kInt)
                              .contiguous();
    const QuantTypeTraits& t = traits(qp.type);
    const std::int32_t shift = qp.type == QuantType::Int8 ? 128 : 0;
    const std::int32_t zx = zp.item<std::int32_t>() + shift;
    const auto padCode = static_cast<std::uint8_t>(zx);

    // One pass over the input in its memory order (per tensor, so any row split works), then,
    // for an NCHW input, a byte transpose to NHWC (a quarter of the float copy).
    const bool channelsLast = x.permute({0, 2, 3, 1}).is_contiguous();
    at::Tensor u = channelsLast ? at::empty({batch, h, w, c}, at::kByte)
                                : at::empty({batch, c, h, w}, at::kByte);
    kernels::quantizeRowsU8(x.data_ptr<float>(), batch * c, h * w, h * w, inv.data_ptr<float>(),
                            zp.data_ptr<std::int32_t>(), false, static_cast<std::int32_t>(t.qmin),
                            static_cast<std::int32_t>(t.qmax), shift, u.data_ptr<std::uint8_t>(),
                            h * w);
    const at::Tensor nhwc = channelsLast ? u : u.permute({0, 2, 3, 1}).contiguous();

    const kernels::Int8PackedWeight& pw = *p.own8;
    const std::int64_t m = batch * g->outH * g->outW;
    const std::int64_t ld = pw.kPadded;
    at::Tensor cols = at::empty({m, ld}, at::kByte);
    const std::uint8_t* src = nhwc.data_ptr<std::uint8_t>();
    std::uint8_t* dst = cols.data_ptr<std::uint8_t>();
    const std::int64_t kh = p.convKh, kw = p.convKw, outH = g->outH, outW = g->outW;
    const std::int64_t grain = std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, outW * ld));
    at::parallel_for(0, batch * outH, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t bo = begin; bo < end; ++bo) {
            const std::int64_t b = bo / outH, oh = bo % outH;
            for (std::int64_t ow = 0; ow < outW; ++ow) {
                std::uint8_t* row = dst + (bo * outW + ow) * ld;
                const std::int64_t iw0 = ow * g->strideW - g->padLeft;
                for (std::int64_t i = 0; i < kh; ++i) {
                    const std::int64_t ih = oh * g->strideH - g->padTop + i * g->dilationH;
                    if (g->dilationW == 1 && ih >= 0 && ih < h) {
                        // Undilated: the patch row is kw * C contiguous source bytes, less
                        // the columns in the padding (j < j0 or j >= j1).
                        const std::int64_t j0 = std::clamp<std::int64_t>(-iw0, 0, kw);
                        const std::int64_t j1 = std::clamp<std::int64_t>(w - iw0, j0, kw);
                        std::uint8_t* out = row + i * kw * c;
                        std::memset(out, padCode, static_cast<std::size_t>(j0 * c));
                        std::memcpy(out + j0 * c, src + ((b * h + ih) * w + iw0 + j0) * c,
                                    static_cast<std::size_t>((j1 - j0) * c));
                        std::memset(out + j1 * c, padCode,
                                    static_cast<std::size_t>((kw - j1) * c));
                        continue;
                    }
                    for (std::int64_t j = 0; j < kw; ++j) {
                        std::uint8_t* out = row + (i * kw + j) * c;
                        const std::int64_t iw = iw0 + j * g->dilationW;
                        if (ih < 0 || ih >= h || iw < 0 || iw >= w)
                            std::memset(out, padCode, static_cast<std::size_t>(c));
                        else
                            std::memcpy(out, src + ((b * h + ih) * w + iw) * c,
                                        static_cast<std::size_t>(c));
                    }
                }
                // Bytes [K, kPadded) multiply zero weights; keep them defined anyway.
                std::memset(row + p.k, padCode, static_cast<std::size_t>(ld - p.k));
            }
        }
    });

    at::Tensor y = at::empty({m, p.n});
    const kernels::Int8Epilogue epilogue{scale.data_ptr<float>(), false, p.scale.data_ptr<float>(),
                                         bias.defined() ? bias.data_ptr<float>() : nullptr};
    kernels::int8GemmF32({dst, m, ld, &zx, false}, pw, epilogue, y.data_ptr<float>());
    // [B * OH * OW, N] is NHWC: returned as an NCHW tensor in channels-last memory (no copy).
    // LibTorch's ReLU and pooling keep that layout, so the next int8 conv skips its transpose.
    return y.view({batch, outH, outW, p.n}).permute({0, 3, 1, 2});
}

/// The int8 path: activation codes exactly as the simulated hook makes them, then _int_mm or
/// BitLens's GEMM (which also adds `bias` when it is defined).
at::Tensor runInt8(const LayerQuant& lq, const Prepared& p, const at::Tensor& x,
                   const at::Tensor& x2d, const at::Tensor& bias)
{
    const LayerConfig& c = lq.config;
    const auto codesAndScale = [&](const at::Tensor& rows, const QParams& qp) {
        if (p.plan.own)
            return ownInt8(rows, actQuantOf(qp), p, bias);
        // Per-tensor qparams apply to any shape, per-token ones to the [tokens, K] rows.
        const at::Tensor codes = quantize(rows, qp);
        // Symmetric int8 codes have zero point 0: no correction (see int8Accumulate).
        const bool noZero = qp.type == QuantType::Int8 && qp.symmetric;
        const at::Tensor acc =
            int8Accumulate(codes, noZero ? at::Tensor() : qp.zeroPoint, p.int8, p.n);
        return scaleAccumulator(acc, qp.scale.to(acc.device(), at::kFloat), p.scale);
    };
    if (c.actMode == ActMode::Static)
        return p.actQuant ? ownInt8(x2d, *p.actQuant, p, bias) : codesAndScale(x2d, *p.act);
    // The hot path of dynamic-int8 on the CPU: the range and the qparams in scalars, not a
    // dozen small tensor operations (which cost more than the GEMM on small layers).
    if (!p.plan.outliers && p.plan.own && c.actGranularity.kind != Granularity::Kind::PerToken &&
        x.device().is_cpu() && x.scalar_type() == at::kFloat && x.is_contiguous())
        return ownInt8(x2d, dynamicActQuant(x, c), p, bias);
    if (!p.plan.outliers)
        return codesAndScale(x2d, dynamicQParams(x, c));

    // LLM.int8(): input columns with |x| above the threshold anywhere in the batch stay 16-bit.
    // The simulated hook computes fq(regular) @ Wfq^T + fp16(outliers) @ W16^T in one float32
    // GEMM; the int8 part here is exact, the outlier part the same float32 GEMM of
    // fp16-rounded values over the (few) outlier columns.
    std::vector<std::int64_t> dims;
    for (std::int64_t d = 0; d + 1 < x.dim(); ++d)
        dims.push_back(d);
    const at::Tensor outlier = x.abs().amax(dims).gt(c.outlierThreshold);  // [K]
    if (!outlier.any().item<bool>())
        return codesAndScale(x2d, dynamicQParams(x, c));
    const at::Tensor regular = x.masked_fill(outlier, 0.0);
    at::Tensor y = codesAndScale(regular.reshape({-1, p.k}), dynamicQParams(regular, c));
    const at::Tensor columns = outlier.nonzero().reshape({-1});
    const at::Tensor xo = x2d.index_select(1, columns).to(at::kHalf).to(at::kFloat);
    const at::Tensor wo = p.weightHalf.index_select(1, columns);
    return y.add_(at::matmul(xo, wo.t()));
}

at::Tensor runFp8(const LayerQuant& lq, const Prepared& p, const at::Tensor& x,
                  const at::Tensor& x2d)
{
    const QParams qp = lq.config.actMode == ActMode::Static ? *p.act
                                                            : dynamicQParams(x, lq.config);
    // Zeros quantize to zero codes: pad in float, then quantize.
    const at::Tensor codes = quantize(padTo(x2d, x2d.size(0), p.kPadded), qp).contiguous();
    const at::Tensor xScale = qp.scale.to(x.device(), at::kFloat).reshape({});
    const at::Tensor y = at::_scaled_mm(codes, p.weight.t(), xScale, p.scale, std::nullopt,
                                        std::nullopt, at::kFloat, false);
    return y.narrow(1, 0, p.n);
}

at::Tensor runInt4(const Prepared& p, const at::Tensor& x2d)
{
    const at::Tensor a = padTo(x2d, x2d.size(0), p.kPadded).to(at::kBFloat16).contiguous();
    const at::Tensor y =
        a.is_cuda()
            ? at::_weight_int4pack_mm(a, p.weight, p.plan.kernelGroup, p.scaleAndZeros)
            : at::_weight_int4pack_mm_for_cpu(a, p.weight, p.plan.kernelGroup, p.scaleAndZeros);
    return y.narrow(1, 0, p.n).to(at::kFloat);
}

at::Tensor runNibble4(const Prepared& p, const at::Tensor& x2d)
{
    if (p.nibble4Vnni) {
        const at::Tensor x = x2d.to(at::kFloat).contiguous();
        at::Tensor y = at::empty({x.size(0), p.n});
        kernels::nibble4GemvQ8(x.data_ptr<float>(), x.size(0), p.k, *p.nibble4Vnni,
                                 y.data_ptr<float>());
        return y;
    }
    const at::Tensor x = padTo(x2d, x2d.size(0), p.kPadded).to(at::kFloat).contiguous();
    at::Tensor y = at::empty({x.size(0), p.n});
    kernels::nibble4Gemm(x.data_ptr<float>(), x.size(0), p.kPadded, *p.nibble4,
                               y.data_ptr<float>());
    return y;
}

at::Tensor runFloat16(const Prepared& p, const at::Tensor& x2d, const at::Tensor& bias)
{
    const at::Tensor x = x2d.to(at::kFloat).contiguous();
    at::Tensor y = at::empty({x.size(0), p.n});
    const kernels::Float16Weight w{static_cast<const std::uint16_t*>(p.weight.data_ptr()), p.n,
                                   p.k, p.k,
                                   p.weight.scalar_type() == at::kHalf ? kernels::Float16Kind::Fp16
                                                                       : kernels::Float16Kind::Bf16};
    kernels::float16Gemm(x.data_ptr<float>(), x.size(0), p.k, w,
                         bias.defined() ? bias.data_ptr<float>() : nullptr, y.data_ptr<float>());
    return y;
}

at::Tensor runInt8WeightOnly(const Prepared& p, const at::Tensor& x2d)
{
    const at::Tensor a = padTo(x2d, x2d.size(0), p.kPadded).to(at::kBFloat16).contiguous();
    return at::_weight_int8pack_mm(a, p.weight, p.scale).to(at::kFloat);
}

/// Divides by the SmoothQuant factors, per input channel (axis 1 of a Conv input, the last
/// axis otherwise), as the simulated hook does.
at::Tensor unsmooth(const ir::Node& node, const at::Tensor& x, const at::Tensor& smooth)
{
    if (!smooth.defined())
        return x;
    if (node.op != ir::OpKind::Conv)
        return x / smooth;
    std::vector<std::int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
    shape[1] = -1;
    return x / smooth.reshape(shape);
}

/// Runs a handled layer for real. Returns an undefined tensor when this batch cannot run on
/// the kernel (the caller then simulates it).
at::Tensor runReal(const ir::Node& node, const LayerQuant& lq, const Prepared& p,
                   const std::vector<at::Tensor>& inputs, std::string& why)
{
    const at::Tensor x = unsmooth(node, inputs[0], p.smooth);
    const at::Tensor bias = inputs.size() > 2 ? inputs[2] : at::Tensor();
    if (p.plan.kind == KernelKind::Cast) {
        // As autocast: every floating input of the op in 16 bits, one rounding of the output.
        std::vector<at::Tensor> in16 = inputs;
        in16[0] = x.to(p.plan.castType);
        in16[1] = p.weight;
        for (std::size_t i = 2; i < in16.size(); ++i)
            if (in16[i].defined() && in16[i].is_floating_point())
                in16[i] = in16[i].to(p.plan.castType);
        return exec::runNode(node, in16, exec::ExecOptions{})[0].to(at::kFloat);
    }
    if (p.plan.conv) {
        // A Conv bias is one value per output channel (ONNX B [M]): fused into the epilogue.
        if (bias.defined() && (bias.dim() != 1 || bias.size(0) != p.n)) {
            why = "bias of shape " + c10::str(bias.sizes()) + " is not one per output channel";
            return {};
        }
        return runInt8Conv(node, lq, p, x,
                           bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor(), why);
    }
    const bool gemmShapeOk = node.op == ir::OpKind::Gemm ? x.dim() == 2 : x.dim() >= 1;
    if (!gemmShapeOk || x.size(-1) != p.k) {
        why = "input of shape " + c10::str(x.sizes()) + " does not fit the kernel";
        return {};
    }
    if (p.plan.outliers && x.dim() < 2) {
        why = "LLM.int8() needs a batch of rows";
        return {};
    }
    const at::Tensor x2d = x.reshape({-1, p.k}).to(at::kFloat);
    // BitLens's int8 GEMM adds a per-channel bias in its epilogue.
    at::Tensor fusedBias;
    const bool fuses = p.plan.own || p.plan.kind == KernelKind::Float16WeightOnly;
    if (fuses && bias.defined() && bias.dim() == 1 && bias.size(0) == p.n)
        fusedBias = bias.to(at::kFloat).contiguous();
    at::Tensor y2d;
    switch (p.plan.kind) {
    case KernelKind::Int8: y2d = runInt8(lq, p, x, x2d, fusedBias); break;
    case KernelKind::Nibble4WeightOnly: y2d = runNibble4(p, x2d); break;
    case KernelKind::Fp8: y2d = runFp8(lq, p, x, x2d); break;
    case KernelKind::Int4WeightOnly: y2d = runInt4(p, x2d); break;
    case KernelKind::Int8WeightOnly: y2d = runInt8WeightOnly(p, x2d); break;
    case KernelKind::Float16WeightOnly: y2d = runFloat16(p, x2d, fusedBias); break;
    case KernelKind::Cast: break;
    }
    std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
    shape.push_back(p.n);
    at::Tensor y = y2d.reshape(shape);
    if (bias.defined() && !fusedBias.defined())
        y = bias.dim() <= 1 ? y.add_(bias) : y + bias;
    return y;
}

std::string firstLine(const std::string& text)
{
    return text.substr(0, text.find('\n'));
}

} // namespace

struct RealKernelHook::Impl {
    Impl(const QuantizedModel& m, c10::Device d, KernelSource s) : model(m), device(d), source(s)
    {
    }

    const Prepared& prepared(const ir::Node& node, const LayerQuant& lq, const KernelPlan& plan,
                             c10::Device on)
    {
        const std::string key = node.name + "@" + on.str();
        auto it = cache.find(key);
        if (it == cache.end())
            it = cache.emplace(key, prepareWeights(node, lq, plan, on)).first;
        return it->second;
    }

    void simulate(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                  std::vector<at::Tensor>& outputs)
    {
        std::vector<at::Tensor> copy = inputs;
        simulated->beforeNode(node, copy);
        outputs = exec::runNode(node, copy, exec::ExecOptions{});
    }

    const QuantizedModel& model;
    c10::Device device;
    KernelSource source;
    std::shared_ptr<exec::NodeHook> simulated;
    std::map<std::string, std::string> planned;
    std::map<std::string, std::string> ran;
    std::map<std::string, std::string> disabled;  ///< layer -> kernel error
    /// Simulated layers that have a BitLens kernel in principle -> why it does not run here.
    std::map<std::string, std::string> whySimulated;
    std::map<std::string, Prepared> cache;        ///< "layer@device" -> weights
};

RealKernelHook::RealKernelHook(const QuantizedModel& model, c10::Device device,
                               KernelSource source)
    : m_impl(std::make_unique<Impl>(model, device, source))
{
    m_impl->simulated = makeQuantHook(model);
    for (const auto& node : model.graph.nodes) {
        auto it = model.layers.find(node.name);
        if (it == model.layers.end())
            continue;
        const auto plan = planKernel(node, it->second, device, source);
        if (!plan) {
            // Say why a layer stays simulated where the best kernels were asked for, so a report
            // never hides the choice (e.g. the scalar row, slower than float32).
            const LayerQuant& lq = it->second;
            if (source == KernelSource::Best && device.is_cpu() && !lq.config.keepFloat) {
                std::string why;
                if (node.op == ir::OpKind::Conv && isW8A8Int8(lq))
                    why = ownConvBlocker(node, lq);
                else if (node.op != ir::OpKind::Conv && isFp8(lq.config.weightType) &&
                         isFp8(lq.config.actType) &&
                         !(lq.config.weightType == QuantType::FP8E5M2 &&
                           lq.config.actType == QuantType::FP8E5M2))
                    why = "at::_scaled_mm on the CPU is a reference loop, about 1000x slower "
                          "than float32 (fashion-cnn fc1: 4.3 s against 1.5 ms per batch)";
                else if (lq.config.actMode == ActMode::Cast &&
                         (lq.config.weightType == QuantType::FP16 ||
                          lq.config.weightType == QuantType::BF16) &&
                         lq.config.actType == lq.config.weightType)
                    why = castOnCpuWhy(lq.config.weightType);
                if (why.empty())
                    why = "no real CPU kernel for " + lq.config.describe() + " on a " +
                          std::string(ir::opKindName(node.op));
                m_impl->whySimulated[node.name] = std::move(why);
            }
            continue;
        }
        m_impl->planned[node.name] = plan->name;
        // Pack the weights now, so that timed runs measure the kernels alone.
        try {
            m_impl->prepared(node, it->second, *plan, device);
        } catch (const c10::Error& e) {
            m_impl->disabled[node.name] = firstLine(e.what_without_backtrace());
        }
    }
}

RealKernelHook::~RealKernelHook() = default;

void RealKernelHook::beforeNode(const ir::Node& node, std::vector<at::Tensor>& inputs)
{
    auto it = m_impl->model.layers.find(node.name);
    if (it == m_impl->model.layers.end() || m_impl->planned.count(node.name))
        return;
    if (it->second.config.keepFloat) {
        m_impl->ran[node.name] = "float32 (kept float)";
        return;
    }
    m_impl->simulated->beforeNode(node, inputs);
    const auto why = m_impl->whySimulated.find(node.name);
    m_impl->ran[node.name] = why == m_impl->whySimulated.end()
                                 ? "simulated (fake-quant, float32)"
                                 : "simulated (fake-quant, float32): " + why->second;
}

void RealKernelHook::afterNode(const ir::Node&, std::vector<at::Tensor>&) {}

bool RealKernelHook::computeNode(const ir::Node& node, const std::vector<at::Tensor>& inputs,
                                 std::vector<at::Tensor>& outputs)
{
    if (!m_impl->planned.count(node.name) || inputs.empty() || !inputs[0].defined())
        return m_impl->simulated->computeNode(node, inputs, outputs);  // LSTM / GRU recurrence
    const LayerQuant& lq = m_impl->model.layers.at(node.name);
    const at::Tensor& x = inputs[0];
    std::string why;
    if (auto d = m_impl->disabled.find(node.name); d != m_impl->disabled.end()) {
        why = d->second;
    } else if (x.requires_grad() && at::GradMode::is_enabled()) {
        why = "the input needs gradients, which the low-bit kernels do not have";
    } else if (const auto plan = planKernel(node, lq, x.device(), m_impl->source); !plan) {
        why = "no real kernel for this layer on " + x.device().str();
    } else {
        try {
            const Prepared& p = m_impl->prepared(node, lq, *plan, x.device());
            at::Tensor y = runReal(node, lq, p, inputs, why);
            if (y.defined()) {
                outputs = {std::move(y)};
                m_impl->ran[node.name] = plan->name;
                return true;
            }
        } catch (const c10::Error& e) {
            why = firstLine(e.what_without_backtrace());
            m_impl->disabled[node.name] = why;
        }
    }
    m_impl->simulate(node, inputs, outputs);
    m_impl->ran[node.name] = "simulated (fake-quant, float32): " + why;
    return true;
}

const std::map<std::string, std::string>& RealKernelHook::plannedKernels() const
{
    return m_impl->planned;
}

const std::map<std::string, std::string>& RealKernelHook::kernelsRun() const
{
    return m_impl->ran;
}

std::optional<std::string> realKernelFor(const ir::Node& node, const LayerQuant& layer,
                                         c10::Device device, KernelSource source)
{
    const auto plan = planKernel(node, layer, device, source);
    if (!plan)
        return std::nullopt;
    return plan->name;
}

std::shared_ptr<RealKernelHook> makeRealKernelHook(const QuantizedModel& model,
                                                   c10::Device device, KernelSource source)
{
    return std::make_shared<RealKernelHook>(model, device, source);
}

at::Tensor int8MatmulAccumulate(const at::Tensor& xCodes, const at::Tensor& xZeroPoint,
                                const at::Tensor& wCodes)
{
    TORCH_CHECK(xCodes.dim() == 2 && wCodes.dim() == 2 && xCodes.size(1) == wCodes.size(1),
                "int8MatmulAccumulate: x [M, K] and w [N, K] expected, got ", xCodes.sizes(),
                " and ", wCodes.sizes());
    TORCH_CHECK(xCodes.scalar_type() == at::kByte || xCodes.scalar_type() == at::kChar,
                "int8MatmulAccumulate: x codes must be uint8 or int8");
    TORCH_CHECK(wCodes.scalar_type() == at::kChar, "int8MatmulAccumulate: w codes must be int8");
    TORCH_CHECK(xCodes.size(1) <= kMaxInt8K, "int8MatmulAccumulate: K above ", kMaxInt8K,
                " could overflow the int32 accumulator");
    const Int8Weight w = packInt8Weight(wCodes.to(xCodes.device()));
    return int8Accumulate(xCodes, xZeroPoint, w, wCodes.size(0)).contiguous();
}

} // namespace bitlens::quant

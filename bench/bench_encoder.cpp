// A MiniLM-class encoder (6 layers, hidden 384, 12 heads, intermediate 1536; batch 8 x 128
// tokens) in plain LibTorch, float32 against the same model with every Linear on BitLens's
// dynamic int8 kernel (per-tensor uint8 activations quantized per batch, per-channel int8
// weights, VNNI GEMM with fused dequantization and bias). The int8 model also fuses what a
// quantizing engine fuses: Q, K and V in one GEMM (the activations are quantized once, not three
// times) with the attention's 1 / sqrt(d_head) folded into Q's output scale and bias, the
// skip connections added in the epilogues of the O and FFN-down GEMMs, AVX-512 min/max for the
// dynamic scale and a reused activation-code buffer (`_unfused` runs it without the last
// three, as before, for a side-by-side measurement). The
// non-linear parts (scaled_dot_product_attention, LayerNorm, GELU) are LibTorch's float ops
// on both sides. This is a hand-built LibTorch model around BitLens's kernels, not the graph
// executor (which has no LayerNorm yet). bench/peers.py builds the same
// shapes in PyTorch and times torch.ao's quantize_dynamic on them; scripts/run-bench puts the
// two side by side. The label carries the SQNR of the int8 output against float32 (accuracy).

#include "kernels/lowbit.h"

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

namespace {

using namespace bitlens::kernels;

constexpr std::int64_t kHidden = 384, kHeads = 12, kInter = 1536, kLayers = 6;
constexpr std::int64_t kBatch = 8, kSeq = 128;

/// Float32; int8 as the engine runs it (own min/max, a reused code buffer, skip connections
/// added in the GEMM epilogue); int8 as this benchmark ran it before those three (at::aminmax,
/// a fresh code tensor per Linear, separate adds), kept to measure them side by side.
enum class Mode { Float, Int8, Int8Unfused };

/// One Linear: float weights and bias, and the int8 copy packed for the VNNI GEMM.
struct Linear {
    at::Tensor w, b;          // [N, K], [N]
    at::Tensor wScale;        // [N]
    std::shared_ptr<Int8PackedWeight> packed;

    Linear(std::int64_t in, std::int64_t out, at::Generator& gen)
        : w(at::randn({out, in}, gen) * 0.02), b(at::randn({out}, gen) * 0.02)
    {
        wScale = (w.abs().amax(1) / 127.0).clamp_min(1e-12).contiguous();
        const at::Tensor codes =
            at::round(w / wScale.unsqueeze(1)).clamp(-127, 127).to(at::kChar).contiguous();
        packed = std::make_shared<Int8PackedWeight>(
            packInt8Weight(codes.data_ptr<std::int8_t>(), out, in, in));
    }

    /// The rows of a, b, c stacked into one layer (out = a.out + b.out + c.out), with the first
    /// one's outputs multiplied by `firstScale`.
    Linear(const Linear& a, const Linear& bl, const Linear& c, double firstScale)
        : w(at::cat({a.w * firstScale, bl.w, c.w})), b(at::cat({a.b * firstScale, bl.b, c.b}))
    {
        wScale = (w.abs().amax(1) / 127.0).clamp_min(1e-12).contiguous();
        const at::Tensor codes =
            at::round(w / wScale.unsqueeze(1)).clamp(-127, 127).to(at::kChar).contiguous();
        packed = std::make_shared<Int8PackedWeight>(
            packInt8Weight(codes.data_ptr<std::int8_t>(), w.size(0), w.size(1), w.size(1)));
    }

    at::Tensor floatForward(const at::Tensor& x) const { return at::linear(x, w, b); }

    /// Dynamic int8: per-tensor uint8 qparams from the batch (MinMaxObserver's rule), then the
    /// fused kernel; `residual` (same shape as the output, or undefined) is added in the GEMM's
    /// epilogue. The activation codes live in a per-thread buffer that only grows: a fresh
    /// multi-megabyte allocation per Linear costs page faults on every call.
    at::Tensor int8Forward(const at::Tensor& x, const at::Tensor& residual = {},
                           bool unfused = false) const
    {
        const at::Tensor x2 = x.contiguous();
        float lo = 0.0f, hi = 0.0f;
        if (unfused) {
            const auto [a, c] = at::aminmax(x2);
            lo = a.item<float>();
            hi = c.item<float>();
        } else {
            minMaxF32(x2.data_ptr<float>(), x2.numel(), &lo, &hi);
        }
        const float a = std::min(0.0f, lo), c = std::max(0.0f, hi);
        float scale = std::max((c - a) / 255.0f, 1.1920929e-07f);
        const std::int32_t zero = std::clamp(static_cast<std::int32_t>(std::nearbyint(-a / scale)), 0, 255);
        const float inv = 1.0f / scale;
        const std::int64_t m = x2.numel() / packed->k;
        thread_local AlignedArray<std::uint8_t> buffer;
        const std::size_t bytes = static_cast<std::size_t>(m * packed->kPadded);
        if (buffer.size() < bytes)
            buffer = AlignedArray<std::uint8_t>(bytes);
        at::Tensor fresh;
        if (unfused)
            fresh = at::empty({static_cast<std::int64_t>(bytes)}, at::kByte);
        std::uint8_t* u = unfused ? fresh.data_ptr<std::uint8_t>() : buffer.data();
        quantizeRowsU8(x2.data_ptr<float>(), m, packed->k, packed->k, &inv, &zero, false, 0, 255, 0,
                       u, packed->kPadded);
        at::Tensor y = at::empty({m, packed->n});
        Int8Epilogue e{&scale, false, wScale.data_ptr<float>(), b.data_ptr<float>()};
        at::Tensor r;
        if (residual.defined()) {
            r = residual.reshape({m, packed->n}).contiguous();
            e.residual = r.data_ptr<float>();
            e.ldResidual = packed->n;
        }
        int8GemmVnniF32({u, m, packed->kPadded, &zero, false}, *packed, e,
                        y.data_ptr<float>());
        return y;
    }

};

constexpr std::int64_t kHeadDim = kHidden / kHeads;

struct EncoderLayer {
    Linear q, k, v, o, up, down;
    Linear qkv;  ///< int8 model: q (pre-scaled by 1 / sqrt(d_head)), k, v in one GEMM
    at::Tensor ln1w, ln1b, ln2w, ln2b;

    explicit EncoderLayer(at::Generator& gen)
        : q(kHidden, kHidden, gen), k(kHidden, kHidden, gen), v(kHidden, kHidden, gen),
          o(kHidden, kHidden, gen), up(kHidden, kInter, gen), down(kInter, kHidden, gen),
          qkv(q, k, v, 1.0 / std::sqrt(static_cast<double>(kHeadDim))),
          ln1w(at::ones({kHidden})), ln1b(at::zeros({kHidden})), ln2w(at::ones({kHidden})),
          ln2b(at::zeros({kHidden}))
    {
    }

    /// x: [B * S, hidden].
    at::Tensor forward(const at::Tensor& x, Mode mode) const
    {
        const bool int8 = mode != Mode::Float;
        const bool unfused = mode == Mode::Int8Unfused;
        const auto heads = [&](const at::Tensor& t) {
            return t.view({kBatch, kSeq, kHeads, kHeadDim}).transpose(1, 2);
        };
        // Attention through LibTorch's fused scaled_dot_product_attention on both sides, as
        // Hugging Face's BERT / MiniLM run it by default (and bench/peers.py does).
        at::Tensor ctx;
        if (int8) {
            const at::Tensor all = qkv.int8Forward(x, {}, unfused);  // [B * S, 3 * hidden]
            ctx = at::scaled_dot_product_attention(heads(all.narrow(1, 0, kHidden)),
                                                   heads(all.narrow(1, kHidden, kHidden)),
                                                   heads(all.narrow(1, 2 * kHidden, kHidden)),
                                                   {}, 0.0, false, 1.0);  // Q is pre-scaled
        } else {
            ctx = at::scaled_dot_product_attention(heads(q.floatForward(x)),
                                                   heads(k.floatForward(x)),
                                                   heads(v.floatForward(x)));
        }
        ctx = ctx.transpose(1, 2).reshape({-1, kHidden});
        if (unfused) {
            const at::Tensor h =
                at::layer_norm(x + o.int8Forward(ctx, {}, true), {kHidden}, ln1w, ln1b);
            const at::Tensor f = down.int8Forward(at::gelu(up.int8Forward(h, {}, true)), {}, true);
            return at::layer_norm(h + f, {kHidden}, ln2w, ln2b);
        }
        if (int8) {
            // The skip connections are added in the GEMMs' epilogues (same sums, one pass less).
            const at::Tensor h = at::layer_norm(o.int8Forward(ctx, x), {kHidden}, ln1w, ln1b);
            return at::layer_norm(down.int8Forward(at::gelu(up.int8Forward(h)), h), {kHidden},
                                  ln2w, ln2b);
        }
        const at::Tensor h = at::layer_norm(x + o.floatForward(ctx), {kHidden}, ln1w, ln1b);
        const at::Tensor f = down.floatForward(at::gelu(up.floatForward(h)));
        return at::layer_norm(h + f, {kHidden}, ln2w, ln2b);
    }
};

struct Encoder {
    std::vector<EncoderLayer> layers;
    at::Tensor x;
    Encoder()
    {
        at::Generator gen = at::detail::createCPUGenerator(42);
        for (int i = 0; i < kLayers; ++i)
            layers.emplace_back(gen);
        x = at::randn({kBatch * kSeq, kHidden}, gen);
    }
    at::Tensor forward(Mode mode) const
    {
        at::Tensor h = x;
        for (const auto& l : layers)
            h = l.forward(h, mode);
        return h;
    }
};

const Encoder& encoder()
{
    static const Encoder e;
    return e;
}

void BM_EncoderMiniLM(benchmark::State& state, Mode mode)
{
    const bool int8 = mode != Mode::Float;
    if (int8 && !cpuFeatures().avx512Vnni) {
        state.SkipWithError("no AVX512-VNNI");
        return;
    }
    c10::InferenceMode guard;
    const Encoder& e = encoder();
    const at::Tensor ref = e.forward(Mode::Float);
    const at::Tensor out = e.forward(mode);
    const double sqnr = 10.0 * std::log10(ref.pow(2).sum().item<double>() /
                                          std::max((out - ref).pow(2).sum().item<double>(), 1e-30));
    for (auto _ : state)
        benchmark::DoNotOptimize(e.forward(mode).data_ptr());
    state.counters["samples_per_s"] = benchmark::Counter(
        static_cast<double>(kBatch), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["sqnr_db"] = int8 ? sqnr : 0.0;
    state.SetLabel(mode == Mode::Int8          ? "bitlens vnni dynamic int8 linears"
                   : mode == Mode::Int8Unfused ? "bitlens vnni dynamic int8, unfused (before)"
                                               : "float32 LibTorch");
}

BENCHMARK_CAPTURE(BM_EncoderMiniLM, float32, Mode::Float)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncoderMiniLM, bitlens_dynamic_int8, Mode::Int8)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncoderMiniLM, bitlens_dynamic_int8_unfused, Mode::Int8Unfused)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace

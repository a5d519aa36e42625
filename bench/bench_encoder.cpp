// A MiniLM-class encoder (6 layers, hidden 384, 12 heads, intermediate 1536; batch 8 x 128
// tokens) in plain LibTorch, float32 against the same model with every Linear on BitLens's
// dynamic int8 kernel (per-tensor uint8 activations quantized per batch, per-channel int8
// weights, VNNI GEMM with fused dequantization and bias). The int8 model also fuses what a
// quantizing engine fuses: Q, K and V in one GEMM (the activations are quantized once, not three
// times) with the attention's 1 / sqrt(d_head) folded into Q's output scale and bias. The
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
    /// fused kernel.
    at::Tensor int8Forward(const at::Tensor& x) const
    {
        const at::Tensor x2 = x.contiguous();
        const auto [lo, hi] = at::aminmax(x2);
        const float a = std::min(0.0f, lo.item<float>()), c = std::max(0.0f, hi.item<float>());
        float scale = std::max((c - a) / 255.0f, 1.1920929e-07f);
        const std::int32_t zero = std::clamp(static_cast<std::int32_t>(std::nearbyint(-a / scale)), 0, 255);
        const float inv = 1.0f / scale;
        const std::int64_t m = x2.numel() / packed->k;
        at::Tensor u = at::empty({m, packed->kPadded}, at::kByte);
        quantizeRowsU8(x2.data_ptr<float>(), m, packed->k, packed->k, &inv, &zero, false, 0, 255, 0,
                       u.data_ptr<std::uint8_t>(), packed->kPadded);
        at::Tensor y = at::empty({m, packed->n});
        const Int8Epilogue e{&scale, false, wScale.data_ptr<float>(), b.data_ptr<float>()};
        int8GemmVnniF32({u.data_ptr<std::uint8_t>(), m, packed->kPadded, &zero, false}, *packed, e,
                        y.data_ptr<float>());
        return y;
    }

    at::Tensor forward(const at::Tensor& x, bool int8) const
    {
        return int8 ? int8Forward(x) : floatForward(x);
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
    at::Tensor forward(const at::Tensor& x, bool int8) const
    {
        const auto heads = [&](const at::Tensor& t) {
            return t.view({kBatch, kSeq, kHeads, kHeadDim}).transpose(1, 2);
        };
        // Attention through LibTorch's fused scaled_dot_product_attention on both sides, as
        // Hugging Face's BERT / MiniLM run it by default (and bench/peers.py does).
        at::Tensor ctx;
        if (int8) {
            const at::Tensor all = qkv.int8Forward(x);  // [B * S, 3 * hidden]
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
        const at::Tensor h = at::layer_norm(x + o.forward(ctx, int8), {kHidden}, ln1w, ln1b);
        const at::Tensor f = down.forward(at::gelu(up.forward(h, int8)), int8);
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
    at::Tensor forward(bool int8) const
    {
        at::Tensor h = x;
        for (const auto& l : layers)
            h = l.forward(h, int8);
        return h;
    }
};

const Encoder& encoder()
{
    static const Encoder e;
    return e;
}

void BM_EncoderMiniLM(benchmark::State& state, bool int8)
{
    if (int8 && !cpuFeatures().avx512Vnni) {
        state.SkipWithError("no AVX512-VNNI");
        return;
    }
    c10::InferenceMode guard;
    const Encoder& e = encoder();
    const at::Tensor ref = e.forward(false);
    const at::Tensor out = e.forward(int8);
    const double sqnr = 10.0 * std::log10(ref.pow(2).sum().item<double>() /
                                          std::max((out - ref).pow(2).sum().item<double>(), 1e-30));
    for (auto _ : state)
        benchmark::DoNotOptimize(e.forward(int8).data_ptr());
    state.counters["samples_per_s"] = benchmark::Counter(
        static_cast<double>(kBatch), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["sqnr_db"] = int8 ? sqnr : 0.0;
    state.SetLabel(int8 ? "bitlens vnni dynamic int8 linears" : "float32 LibTorch");
}

BENCHMARK_CAPTURE(BM_EncoderMiniLM, float32, false)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncoderMiniLM, bitlens_dynamic_int8, true)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

} // namespace

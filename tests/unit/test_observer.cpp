// Calibration observers: min-max and moving-average against PyTorch's observers, percentile
// against exact order statistics, KL and MSE searches against what they claim to minimise, and
// the behaviour on bad, empty and constant input.

#include "quant/observer.h"

#include "io/dataset.h"
#include "quant/observer_histogram.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

using namespace bitlens;
using namespace bitlens::quant;

namespace {

const std::string kDataDir = std::string(BITLENS_TEST_DATA) + "/observer/";

at::Tensor gaussian(std::int64_t n, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::randn({n}, gen);
}

at::Tensor uniform01(std::int64_t n, std::uint64_t seed)
{
    at::Generator gen = at::detail::createCPUGenerator(seed);
    return at::rand({n}, gen);
}

/// Every spec the factory accepts with default parameters, one per observer kind.
const char* const kAllSpecs[] = {"minmax", "moving-average", "percentile", "entropy", "mse"};

std::unique_ptr<Observer> make(const std::string& spec)
{
    auto factory = observerFactory(spec);
    EXPECT_TRUE(factory.ok()) << spec;
    return factory.ok() ? (*factory)() : nullptr;
}

/// Mean squared error of PyTorch's fake quantization of `x` with a symmetric signed integer
/// grid clipped at +-t (PyTorch's symmetric scale t / ((qmax - qmin) / 2), zero point 0).
double realMse(const at::Tensor& x, double t, std::int64_t qmin, std::int64_t qmax)
{
    const double scale = t / (static_cast<double>(qmax - qmin) / 2.0);
    const at::Tensor fq = at::fake_quantize_per_tensor_affine(x, scale, 0, qmin, qmax);
    return (fq - x).pow(2).mean().item<double>();
}

/// The exact q-quantile (0..1) of a 1-D tensor as an order statistic.
double exactQuantile(const at::Tensor& x, double q)
{
    const at::Tensor sorted = std::get<0>(x.to(at::kDouble).sort());
    const auto n = sorted.numel();
    const auto k = std::clamp<std::int64_t>(
        static_cast<std::int64_t>(std::ceil(q * static_cast<double>(n))) - 1, 0, n - 1);
    return sorted[k].item<double>();
}

void expectValidRange(const ClipChoice& c, bool symmetric, const std::string& what)
{
    EXPECT_LT(c.lo, c.hi) << what;
    EXPECT_LE(c.lo, 0.0f) << what;
    EXPECT_GE(c.hi, 0.0f) << what;
    EXPECT_TRUE(std::isfinite(c.lo) && std::isfinite(c.hi)) << what;
    if (symmetric)
        EXPECT_EQ(c.lo, -c.hi) << what;
    EXPECT_FALSE(c.why.empty()) << what;
}

} // namespace

TEST(ObserverMinMax, MatchesPyTorchOnGoldenBatches)
{
    auto batches = io::readNpy(kDataDir + "batches.npy");
    auto golden = io::readNpy(kDataDir + "minmax.npy");
    ASSERT_TRUE(batches.ok() && golden.ok());
    auto obs = makeMinMaxObserver();
    for (std::int64_t b = 0; b < batches->size(0); ++b)
        ASSERT_TRUE(obs->observe((*batches)[b]).ok());
    const float gMin = (*golden)[0].item<float>();
    const float gMax = (*golden)[1].item<float>();
    const ClipChoice asym = obs->choose(QuantType::UInt8, false);
    EXPECT_EQ(asym.observedMin, gMin);
    EXPECT_EQ(asym.observedMax, gMax);
    // PyTorch's calculate_qparams widens to include 0, then takes max(|min|, max) if symmetric.
    EXPECT_EQ(asym.lo, std::min(gMin, 0.0f));
    EXPECT_EQ(asym.hi, std::max(gMax, 0.0f));
    const ClipChoice sym = obs->choose(QuantType::Int8, true);
    EXPECT_EQ(sym.hi, std::max(-gMin, gMax));
    EXPECT_EQ(sym.lo, -sym.hi);
    EXPECT_EQ(sym.method, "minmax");
    EXPECT_TRUE(sym.histogram.counts.empty());
    EXPECT_TRUE(sym.candidates.empty());
    EXPECT_EQ(sym.why, "Max |x| = 22.8 (x in [-22.8, 18.1] over 6 batches).");
}

TEST(ObserverMinMax, PositiveDataRangeStartsAtZero)
{
    auto obs = makeMinMaxObserver();
    ASSERT_TRUE(obs->observe(at::tensor({2.0f, 5.0f, 3.0f})).ok());
    const ClipChoice c = obs->choose(QuantType::UInt8, false);
    EXPECT_EQ(c.lo, 0.0f);
    EXPECT_EQ(c.hi, 5.0f);
    EXPECT_EQ(c.observedMin, 2.0f);
}

TEST(ObserverMinMax, TenBatchesEqualTheirConcatenation)
{
    const std::uint64_t seed = 1234;
    SCOPED_TRACE("seed " + std::to_string(seed));
    at::Generator gen = at::detail::createCPUGenerator(seed);
    std::vector<at::Tensor> batches;
    for (int b = 0; b < 10; ++b)
        batches.push_back(at::randn({3, 17}, gen) * (1.0 + b % 4) + (b % 3 - 1));
    auto split = makeMinMaxObserver();
    for (const auto& b : batches)
        ASSERT_TRUE(split->observe(b).ok());
    auto whole = makeMinMaxObserver();
    ASSERT_TRUE(whole->observe(at::cat(batches)).ok());
    for (const bool symmetric : {true, false}) {
        const ClipChoice a = split->choose(QuantType::Int8, symmetric);
        const ClipChoice b = whole->choose(QuantType::Int8, symmetric);
        EXPECT_EQ(a.lo, b.lo);
        EXPECT_EQ(a.hi, b.hi);
        EXPECT_EQ(a.observedMin, b.observedMin);
        EXPECT_EQ(a.observedMax, b.observedMax);
    }
}

TEST(ObserverMovingAverage, MatchesPyTorchOnGoldenBatches)
{
    auto batches = io::readNpy(kDataDir + "batches.npy");
    ASSERT_TRUE(batches.ok());
    for (const double c : {0.01, 0.3}) {
        char name[64];
        std::snprintf(name, sizeof name, "moving_average_%g.npy", c);
        auto golden = io::readNpy(kDataDir + name);
        ASSERT_TRUE(golden.ok()) << name;
        auto obs = makeMovingAverageObserver(c);
        for (std::int64_t b = 0; b < batches->size(0); ++b)
            ASSERT_TRUE(obs->observe((*batches)[b]).ok());
        const ClipChoice choice = obs->choose(QuantType::Int8, false);
        // Bit for bit: the same float32 operations in the same order as PyTorch.
        EXPECT_EQ(choice.lo, (*golden)[0].item<float>()) << name;
        EXPECT_EQ(choice.hi, (*golden)[1].item<float>()) << name;
        EXPECT_EQ(choice.method, "moving-average");
        // The true extremes are reported next to the averaged ones.
        EXPECT_EQ(choice.observedMin, batches->min().item<float>());
        EXPECT_EQ(choice.observedMax, batches->max().item<float>());
    }
}

TEST(ObserverMovingAverage, FollowsTheUpdateFormula)
{
    // First batch sets the range; after that min += c * (batchMin - min), likewise max.
    auto obs = makeMovingAverageObserver(0.5);
    ASSERT_TRUE(obs->observe(at::tensor({-1.0f, 2.0f})).ok());
    ASSERT_TRUE(obs->observe(at::tensor({-3.0f, 4.0f})).ok());
    ASSERT_TRUE(obs->observe(at::tensor({-2.0f, 1.0f})).ok());
    const ClipChoice c = obs->choose(QuantType::Int8, false);
    // min: -1 -> -1 + 0.5 * (-3 + 1) = -2 -> -2 + 0.5 * (-2 + 2) = -2
    // max:  2 ->  2 + 0.5 * (4 - 2) = 3 ->  3 + 0.5 * (1 - 3) = 2
    EXPECT_EQ(c.lo, -2.0f);
    EXPECT_EQ(c.hi, 2.0f);
    EXPECT_EQ(c.observedMin, -3.0f);
    EXPECT_EQ(c.observedMax, 4.0f);
    EXPECT_EQ(obs->choose(QuantType::Int8, true).hi, 2.0f);
}

TEST(ObserverPercentile, SymmetricWithinOneBinOfExactPercentile)
{
    const at::Tensor x = uniform01(1000000, 7) * 2.0 - 1.0;  // |x| ~ uniform on [0, 1]
    for (const double p : {99.99, 99.9, 99.0, 90.0}) {
        auto obs = makePercentileObserver(p);
        ASSERT_TRUE(obs->observe(x).ok());
        const ClipChoice c = obs->choose(QuantType::Int8, true);
        const double absMax = x.abs().max().item<double>();
        const double exact = exactQuantile(x.abs(), p / 100.0);
        EXPECT_NEAR(c.hi, exact, absMax / 2048) << "p=" << p;
        EXPECT_EQ(c.lo, -c.hi);
        ASSERT_EQ(c.histogram.counts.size(), 2048u);
        ASSERT_EQ(c.histogram.edges.size(), 2049u);
        double total = 0.0;
        for (double v : c.histogram.counts)
            total += v;
        EXPECT_NEAR(total, 1e6, 1e-6);  // re-binning keeps every count
    }
}

TEST(ObserverPercentile, AsymmetricSplitsTheExcludedShareBetweenTails)
{
    const at::Tensor x = gaussian(1000000, 11) * 2.0 + 1.0;
    auto obs = makePercentileObserver(99.9);
    ASSERT_TRUE(obs->observe(x).ok());
    const ClipChoice c = obs->choose(QuantType::UInt8, false);
    const double bin = (x.max().item<double>() - x.min().item<double>()) / 2048;
    EXPECT_NEAR(c.lo, exactQuantile(x, 0.0005), bin);
    EXPECT_NEAR(c.hi, exactQuantile(x, 0.9995), bin);
    EXPECT_EQ(c.why.rfind("0.05th and 99.95th percentiles of x = ", 0), 0u) << c.why;
}

TEST(ObserverPercentile, StaysWithinOneBinWhenTheRangeGrowsAcrossBatches)
{
    // Each batch is wider than the last, so the histogram doubles its range several times.
    std::vector<at::Tensor> batches;
    for (int b = 0; b < 10; ++b)
        batches.push_back(gaussian(50000, 100 + b) * (0.1 * (b + 1) * (b + 1)));
    auto obs = makePercentileObserver(99.0);
    for (const auto& b : batches)
        ASSERT_TRUE(obs->observe(b).ok());
    const at::Tensor all = at::cat(batches);
    const ClipChoice c = obs->choose(QuantType::Int8, true);
    const double absMax = all.abs().max().item<double>();
    EXPECT_NEAR(c.hi, exactQuantile(all.abs(), 0.99), absMax / 2048);
    EXPECT_EQ(c.observedMax, all.max().item<float>());
}

TEST(ObserverPercentile, WhyNamesThePercentileAndTheMax)
{
    auto obs = makePercentileObserver(99.99);
    ASSERT_TRUE(obs->observe(at::arange(0, 10001, at::kFloat)).ok());
    const ClipChoice c = obs->choose(QuantType::Int8, true);
    EXPECT_EQ(c.why, "99.99th percentile of |x| = " + [&] {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", static_cast<double>(c.hi));
        return std::string(buf);
    }() + " (max 1e+04).");
}

TEST(ObserverEntropy, ClipsGaussianOutliersBetweenThreeSigmaAndTheMax)
{
    // 1e6 standard normal values plus 20 outliers at +-40: min-max would spend almost all of
    // int8's 128 positive levels on empty range. The KL threshold lands in [3, 10]: above
    // 3 sigma (the Gaussian tail still carries information) and far below the max of 40.
    const at::Tensor outliers = at::full({20}, 40.0f) * (at::arange(20) % 2 * 2 - 1);
    const at::Tensor x = at::cat({gaussian(1000000, 3), outliers});
    auto obs = makeEntropyObserver();
    ASSERT_TRUE(obs->observe(x).ok());
    const ClipChoice c = obs->choose(QuantType::Int8, true);
    EXPECT_GT(c.hi, 3.0f) << c.why;
    EXPECT_LT(c.hi, 10.0f) << c.why;
    EXPECT_EQ(c.lo, -c.hi);
    EXPECT_EQ(c.method, "entropy");
    // TensorRT's search: thresholds 128 .. 2048 bins of a 2048-bin histogram up to max |x|.
    ASSERT_EQ(c.candidates.size(), 2048u - 128u + 1u);
    EXPECT_NEAR(c.candidates.front().first, 40.0 * 128 / 2048, 1e-4);
    EXPECT_NEAR(c.candidates.back().first, 40.0, 1e-4);
    double minKl = std::numeric_limits<double>::infinity();
    double atChosen = -1.0;
    for (const auto& [threshold, kl] : c.candidates) {
        EXPECT_GE(kl, 0.0);
        minKl = std::min(minKl, kl);
        if (std::abs(threshold - c.hi) < 1e-5)
            atChosen = kl;
    }
    EXPECT_EQ(atChosen, minKl);
    EXPECT_EQ(c.why.rfind("KL divergence ", 0), 0u) << c.why;
    EXPECT_NE(c.why.find("of 2048 bins up to 40"), std::string::npos) << c.why;
}

TEST(ObserverEntropy, Int4ClipsTighterThanInt8AndReluUsesTheFullGrid)
{
    const at::Tensor x = gaussian(200000, 5);
    auto obs = makeEntropyObserver();
    ASSERT_TRUE(obs->observe(x).ok());
    const ClipChoice c8 = obs->choose(QuantType::Int8, true);
    const ClipChoice c4 = obs->choose(QuantType::Int4, true);
    EXPECT_LT(c4.hi, c8.hi);
    EXPECT_EQ(c4.candidates.size(), 2048u - 8u + 1u);  // 8 levels per side for int4

    // A ReLU output with asymmetric uint8 gets all 256 levels over [0, T] and lo = 0.
    auto relu = makeEntropyObserver();
    ASSERT_TRUE(relu->observe(x.clamp_min(0)).ok());
    const ClipChoice r = relu->choose(QuantType::UInt8, false);
    EXPECT_EQ(r.lo, 0.0f);
    EXPECT_GT(r.hi, 0.0f);
    EXPECT_EQ(r.candidates.size(), 2048u - 256u + 1u);

    // Code tables search too, with the code table's 9 non-negative NF4 levels.
    const ClipChoice nf4 = obs->choose(QuantType::NF4, true);
    expectValidRange(nf4, true, "nf4");
    EXPECT_LE(nf4.hi, std::max(-nf4.observedMin, nf4.observedMax));
    EXPECT_EQ(nf4.candidates.size(), 2048u - 9u + 1u);
}

TEST(ObserverMse, Int8ThresholdMinimisesTheRealFakeQuantError)
{
    // Two outliers at +-25 in a million: clipping them to ~5 costs 2 * 20^2 / 1e6 = 8e-4, less
    // than the 3.2e-3 of rounding noise a step of 25 / 127.5 brings.
    const at::Tensor outliers = at::tensor({25.0f, -25.0f});
    const at::Tensor x = at::cat({gaussian(1000000, 21), outliers});
    auto obs = makeMseObserver();
    ASSERT_TRUE(obs->observe(x).ok());
    const ClipChoice c = obs->choose(QuantType::Int8, true);
    const double chosen = realMse(x, c.hi, -128, 127);
    const double atMax = realMse(x, 25.0, -128, 127);
    const double atHalf = realMse(x, 0.5 * c.hi, -128, 127);
    EXPECT_LE(chosen, atMax * 1.01) << c.why;
    EXPECT_LE(chosen, atHalf * 1.01) << c.why;
    EXPECT_LT(chosen, 0.5 * atMax) << "clipping the outliers should pay off: " << c.why;
    // The histogram model predicts the real error closely.
    double predicted = -1.0;
    for (const auto& [threshold, mse] : c.candidates)
        if (std::abs(threshold - c.hi) < 1e-5)
            predicted = mse;
    EXPECT_NEAR(predicted, chosen, 0.05 * chosen);
    EXPECT_EQ(c.candidates.size(), 2048u);
    EXPECT_EQ(c.why.rfind("Expected int8 MSE ", 0), 0u) << c.why;
}

TEST(ObserverMse, Int4ClipsTighterThanInt8)
{
    const at::Tensor x = gaussian(200000, 22);
    auto obs = makeMseObserver();
    ASSERT_TRUE(obs->observe(x).ok());
    const ClipChoice c8 = obs->choose(QuantType::Int8, true);
    const ClipChoice c4 = obs->choose(QuantType::Int4, true);
    EXPECT_LT(c4.hi, 0.8f * c8.hi) << c4.why << " / " << c8.why;
    // int4's real error at its threshold beats min-max and half the threshold.
    EXPECT_LE(realMse(x, c4.hi, -8, 7), realMse(x, x.abs().max().item<double>(), -8, 7));
    EXPECT_LE(realMse(x, c4.hi, -8, 7), realMse(x, 0.5 * c4.hi, -8, 7) * 1.01);
}

TEST(ObserverMse, AsymmetricReluRangeStartsAtZero)
{
    const at::Tensor x = gaussian(100000, 23).clamp_min(0);
    auto obs = makeMseObserver();
    ASSERT_TRUE(obs->observe(x).ok());
    const ClipChoice c = obs->choose(QuantType::UInt8, false);
    EXPECT_EQ(c.lo, 0.0f);
    EXPECT_GT(c.hi, 2.0f);
    EXPECT_LE(c.hi, c.observedMax);
}

TEST(ObserverHistogram, ExpectedSquaredErrorIsStepSquaredOverTwelve)
{
    // Data uniform over a fine grid's range: the rounding error is uniform on +-step/2.
    const std::vector<double> counts(100, 1.0);
    std::vector<double> grid;
    for (int k = 0; k <= 10; ++k)
        grid.push_back(k * 0.1);
    EXPECT_NEAR(quant::detail::expectedSquaredError(counts, 0.0, 1.0, grid), 0.01 / 12, 1e-12);
    // Bins wider than the step give the same answer (the integral is exact per bin).
    EXPECT_NEAR(quant::detail::expectedSquaredError({1.0, 1.0}, 0.0, 1.0, grid), 0.01 / 12, 1e-12);
}

TEST(ObserverHistogram, MseGridIsWhatTheQuantizerProduces)
{
    // The MSE search models quantization as rounding to the nearest representable value; for
    // every scaled type and clip range, the error of the real fakeQuantize (chooseQParams from
    // the same range) must equal the distance to the nearest value of that model grid.
    const at::Tensor x = at::linspace(-9.0, 9.0, 9001);
    for (const QuantTypeTraits& t : allQuantTypes()) {
        // Block formats (MX, NVFP4) have no per-tensor scale to calibrate: their activations
        // are dynamic, one scale per block (the schemes refuse a static observer for them).
        if (!t.needsScale || isBlockFormat(t))
            continue;
        for (const bool symmetric : {true, false}) {
            for (const auto& [lo, hi] : {std::pair{-3.0, 5.0}, {0.0, 4.0}, {-2.0, 0.0}}) {
                const QParams qp = chooseQParams(at::full({}, lo), at::full({}, hi), t.type,
                                                 symmetric, Granularity::perTensor());
                const std::vector<double> grid =
                    quant::detail::representableValues(lo, hi, symmetric, t);
                const at::Tensor g = at::tensor(grid, at::kDouble).to(at::kFloat);
                const at::Tensor nearest =
                    std::get<0>((x.unsqueeze(1) - g.unsqueeze(0)).abs().min(1));
                const at::Tensor real = (fakeQuantize(x, qp) - x).abs();
                EXPECT_LT((real - nearest).abs().max().item<double>(), 1e-5)
                    << t.name << (symmetric ? " sym " : " asym ") << lo << ".." << hi;
            }
        }
    }
}

TEST(ObserverBadInput, RejectsNanAndInfAndKeepsItsState)
{
    for (const char* spec : kAllSpecs) {
        auto obs = make(spec);
        ASSERT_TRUE(obs);
        ASSERT_TRUE(obs->observe(at::tensor({-1.0f, 2.0f})).ok());
        const float nan = std::numeric_limits<float>::quiet_NaN();
        const float inf = std::numeric_limits<float>::infinity();
        for (const auto& [bad, message] :
             {std::pair{at::tensor({1.0f, nan, 3.0f}), "contains NaN"},
              std::pair{at::tensor({nan, inf}), "contains NaN"},
              std::pair{at::tensor({1.0f, inf}), "contains Inf"},
              std::pair{at::tensor({-inf, 0.0f}), "contains Inf"}}) {
            const auto r = obs->observe(bad);
            ASSERT_FALSE(r.ok()) << spec;
            EXPECT_EQ(r.error().code, ErrorCode::BadInput) << spec;
            EXPECT_EQ(r.error().message, message) << spec;
        }
        const ClipChoice c = obs->choose(QuantType::Int8, false);
        EXPECT_EQ(c.observedMin, -1.0f) << spec;
        EXPECT_EQ(c.observedMax, 2.0f) << spec;
    }
}

TEST(ObserverBadInput, EmptyAndConstantInputGiveValidRanges)
{
    const float eps = std::numeric_limits<float>::epsilon();
    for (const char* spec : kAllSpecs) {
        for (const QuantType type : {QuantType::Int8, QuantType::UInt8, QuantType::NF4}) {
            for (const bool symmetric : {true, false}) {
                const std::string what = std::string(spec) + (symmetric ? " sym" : " asym");
                auto none = make(spec);
                ASSERT_TRUE(none->observe(at::empty({0, 3})).ok());  // empty batch: no-op
                const ClipChoice n = none->choose(type, symmetric);
                expectValidRange(n, symmetric, what + " nothing");
                EXPECT_LE(n.hi - n.lo, 2 * eps) << what;
                EXPECT_EQ(n.why.rfind("No values observed", 0), 0u) << n.why;

                auto zeros = make(spec);
                ASSERT_TRUE(zeros->observe(at::zeros({4, 5})).ok());
                const ClipChoice z = zeros->choose(type, symmetric);
                expectValidRange(z, symmetric, what + " zeros");
                EXPECT_EQ(z.hi, eps) << what;
                EXPECT_EQ(z.lo, symmetric ? -eps : 0.0f) << what;

                auto threes = make(spec);
                ASSERT_TRUE(threes->observe(at::full({7}, 3.0f)).ok());
                ASSERT_TRUE(threes->observe(at::full({2, 2}, 3.0f)).ok());
                const ClipChoice t = threes->choose(type, symmetric);
                EXPECT_EQ(t.hi, 3.0f) << what;
                EXPECT_EQ(t.lo, symmetric ? -3.0f : 0.0f) << what;
                EXPECT_EQ(t.why, "All 11 observed values equal 3; range [" +
                                     std::string(symmetric ? "-3" : "0") + ", 3].");

                auto negative = make(spec);
                ASSERT_TRUE(negative->observe(at::full({5}, -2.0f)).ok());
                const ClipChoice m = negative->choose(type, symmetric);
                EXPECT_EQ(m.lo, -2.0f) << what;
                EXPECT_EQ(m.hi, symmetric ? 2.0f : 0.0f) << what;
            }
        }
    }
}

TEST(ObserverBadInput, ZerosThenDataKeepTheZerosCounted)
{
    // Zeros seen before any non-zero value have no histogram range yet; they must not be lost.
    auto obs = makePercentileObserver(50.0);
    ASSERT_TRUE(obs->observe(at::zeros({900})).ok());
    ASSERT_TRUE(obs->observe(at::linspace(0.01, 1.0, 100)).ok());
    const ClipChoice c = obs->choose(QuantType::Int8, true);
    EXPECT_LE(c.hi, 0.01f);  // the median of 900 zeros and 100 positives is 0
}

TEST(ObserverInput, AcceptsOtherDtypesAndShapes)
{
    for (const char* spec : kAllSpecs) {
        auto obs = make(spec);
        ASSERT_TRUE(obs->observe(at::tensor({-1.5, 0.5, 4.0}).to(at::kHalf).reshape({3, 1})).ok());
        ASSERT_TRUE(obs->observe(at::tensor({1, 2, 3}, at::kInt)).ok());
        const ClipChoice c = obs->choose(QuantType::Int8, false);
        EXPECT_EQ(c.observedMin, -1.5f) << spec;
        EXPECT_EQ(c.observedMax, 4.0f) << spec;
    }
}

TEST(ObserverInput, Fp16HasNothingToClip)
{
    auto obs = makeEntropyObserver();
    ASSERT_TRUE(obs->observe(gaussian(1000, 9)).ok());
    const ClipChoice c = obs->choose(QuantType::FP16, false);
    EXPECT_EQ(c.lo, c.observedMin);
    EXPECT_EQ(c.hi, c.observedMax);
    EXPECT_TRUE(c.candidates.empty());
}

TEST(ObserverFactory, ParsesEverySpec)
{
    const std::pair<const char*, const char*> cases[] = {
        {"minmax", "minmax"},         {"moving-average", "moving-average"},
        {"moving-average:0.1", "moving-average"},
        {"percentile", "percentile"}, {"percentile:99.9", "percentile"},
        {"entropy", "entropy"},       {"entropy:4096", "entropy"},
        {"mse", "mse"},               {"mse:512", "mse"}};
    for (const auto& [spec, name] : cases) {
        auto factory = observerFactory(spec);
        ASSERT_TRUE(factory.ok()) << spec;
        auto a = (*factory)();
        auto b = (*factory)();
        EXPECT_EQ(a->name(), name);
        EXPECT_NE(a.get(), b.get()) << "a factory makes fresh observers";
    }
    // The parameter is used: percentile:50 of 0..100 is 50, not the default 99.99.
    auto median = (*observerFactory("percentile:50"))();
    ASSERT_TRUE(median->observe(at::arange(0, 101, at::kFloat)).ok());
    EXPECT_NEAR(median->choose(QuantType::Int8, true).hi, 50.0f, 0.1f);
}

TEST(ObserverFactory, RejectsBadSpecsWithTheValidOnes)
{
    const std::string valid =
        " (observers: minmax, moving-average[:c], percentile[:p], entropy[:bins], mse[:bins])";
    const std::pair<const char*, std::string> cases[] = {
        {"kl", "unknown observer 'kl'" + valid},
        {"", "unknown observer ''" + valid},
        {"MinMax", "unknown observer 'MinMax'" + valid},
        {"minmax:3", "bad observer 'minmax:3': minmax takes no parameter" + valid},
        {"moving-average:0", "bad observer 'moving-average:0': the averaging constant c must be a "
                             "number in (0, 1]" + valid},
        {"moving-average:", "bad observer 'moving-average:': the averaging constant c must be a "
                            "number in (0, 1]" + valid},
        {"percentile:101", "bad observer 'percentile:101': the percentile p must be a number in "
                           "(0, 100]" + valid},
        {"percentile:99.9x", "bad observer 'percentile:99.9x': the percentile p must be a number "
                             "in (0, 100]" + valid},
        {"percentile:nan", "bad observer 'percentile:nan': the percentile p must be a number in "
                           "(0, 100]" + valid},
        {"entropy:100.5", "bad observer 'entropy:100.5': bins must be an integer from 16 to "
                          "65536" + valid},
        {"mse:8", "bad observer 'mse:8': bins must be an integer from 16 to 65536" + valid},
    };
    for (const auto& [spec, message] : cases) {
        auto factory = observerFactory(spec);
        ASSERT_FALSE(factory.ok()) << spec;
        EXPECT_EQ(factory.error().code, ErrorCode::Usage) << spec;
        EXPECT_EQ(factory.error().message, message);
    }
}

TEST(ObserverSpeed, CalibrationSizedInputIsQuick)
{
    // ~1000 fashion-cnn images through a 32-channel 28x28 layer, in 10 batches of 100.
    const at::Tensor batch = at::relu(gaussian(100 * 32 * 28 * 28, 31));
    for (const char* spec : kAllSpecs) {
        auto obs = make(spec);
        const auto t0 = std::chrono::steady_clock::now();
        for (int b = 0; b < 10; ++b)
            ASSERT_TRUE(obs->observe(batch).ok());
        (void)obs->choose(QuantType::UInt8, false);
        (void)obs->choose(QuantType::Int8, true);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        EXPECT_LT(seconds, 5.0) << spec;
        std::printf("[          ] %s: %.3f s\n", spec, seconds);
    }
}

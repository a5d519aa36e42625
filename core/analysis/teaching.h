#pragma once
// The numbers behind the GUI's Teach tab and its weight-grid drawings, with a torch-free header
// so the widgets can call them: one layer's weights as floats, the error of quantizing them
// with one setting (core's chooseQParams + fakeQuantize), a histogram to draw, a format's code
// points over a range, and the representable values of the FP8 formats.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens {
class Model;
}

namespace bitlens::analysis {

/// The float32 weight (first floating-point initializer, flattened) that node `layer` of
/// `model` reads; empty when there is no such node or it reads no floating-point weight.
std::vector<float> layerWeightValues(const Model& model, const std::string& layer);

/// What the Teach tab quantizes one tensor with.
struct TeachingSettings {
    std::string format = "int8";  ///< int8, int4, int2, nf4, fp4_e2m1, fp8_e4m3, fp8_e5m2, ...
    int bits = 8;                 ///< integer formats only: 2..8 (symmetric, signed)
    double clipFraction = 1.0;    ///< clip range as a fraction of each block's max|w|, 0.05..1
    std::int64_t groupSize = 0;   ///< elements per scale; 0 = per-tensor
};

/// True for the integer formats ("int8", "int4", ...), whose width TeachingSettings::bits sets.
bool isIntegerFormat(std::string_view format);

/// Error of quantizing a vector with one setting.
struct QuantErrorStats {
    double sqnrDb = 0.0;       ///< 10 log10(sum x^2 / sum (x - q(x))^2); +inf for an exact fit
    double mse = 0.0;          ///< mean of (x - q(x))^2
    double maxAbsError = 0.0;  ///< max |x - q(x)|
    bool valid = false;        ///< false for an empty vector or an unknown format
};

/// Quantizes `values` (as a [1, n] weight; groups run along it) with `settings` through core's
/// chooseQParams and fakeQuantize and measures the error. 3, 5, 6 and 7 bits, which have no
/// QuantType, use int8's qparams widened to the b-bit step. Thread-safe; never throws.
QuantErrorStats quantizationError(const std::vector<float>& values,
                                  const TeachingSettings& settings);

/// Equal-width counts of the finite values of a vector, for drawing.
struct ValueHistogram {
    double lo = 0.0;              ///< left edge of bin 0 (the smallest finite value)
    double hi = 0.0;              ///< right edge of the last bin (the largest finite value)
    double absMax = 0.0;          ///< max(|lo|, |hi|) of the bin range
    std::vector<double> counts;   ///< `bins` counts; empty when no value is finite
    std::size_t size = 0;         ///< values binned (the vector's size)
};

/// Bins the finite values of `values` into `bins` equal bins over [min, max]; when every
/// value is the same, the range is that value ± 0.5.
ValueHistogram valueHistogram(const std::vector<float>& values, int bins);

/// The representable values that `weightType` ("int8", "uint8", "int4", "uint4", "int2",
/// "nf4", "fp4_e2m1", "fp8_e4m3", "fp8_e5m2", or a block format) places in the range [lo, hi],
/// ascending, in a per-tensor view: symmetric integer types put 2^(bits-1)-1 steps each side of
/// 0 up to max(|lo|, |hi|) (int8: k * max|w| / 127, k in -127..127), asymmetric ones 2^bits-1
/// steps from lo to hi; NF4/FP4/FP8 are their code points scaled so the largest is max|w|; a
/// block format gives the grid of a block whose max |w| is max(|lo|, |hi|), with its own
/// scale rule (MX: a power of two, so the largest code may pass max|w|; NVFP4: E4M3), clipped
/// to [lo, hi]. Empty for float types (finer than any drawing), an empty range or a
/// non-finite one.
std::vector<double> codePoints(std::string_view weightType, bool symmetric, double lo, double hi);

/// The code points of `settings` on [-clip, clip], as the Teach tab draws them: codePoints()
/// for the formats core has, and the same symmetric rule k * clip / (2^(bits-1) - 1) for 3,
/// 5, 6 and 7 bits.
std::vector<double> teachingCodePoints(const TeachingSettings& settings, double clip);

/// Positive finite values of "fp8_e4m3" (E4M3FN) or "fp8_e5m2", ascending: every bit pattern
/// cast by LibTorch, so they are exactly what core's FP8 quantization rounds to. Empty for any
/// other name.
std::vector<double> float8PositiveValues(std::string_view format);

/// True for the block formats ("mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3",
/// "mxfp8_e5m2", "mxint8", "nvfp4"): one shared scale per block of 32 (MX) or 16 (NVFP4).
bool isBlockFormatName(std::string_view format);
/// Elements per shared scale of a block format (32 or 16); 0 for any other name.
std::int64_t blockSizeOf(std::string_view format);
/// Every block format's name, in the QuantType table's order.
std::vector<std::string> blockFormatNames();
/// The largest magnitude a block format's element takes before the block scale (E2M1 6, E2M3
/// 7.5, E3M2 28, E4M3 448, E5M2 57344, MXINT8's code 127); 0 for any other name.
double blockElementMax(std::string_view format);

/// One block of a vector quantized in a block format, as the Teach tab draws it: the block's
/// weights, their quantized values, the element grid that block's scale puts them on, and the
/// scale as stored (MX: an E8M0 byte, a power of two; NVFP4: an E4M3 byte under the vector's
/// float32 scale, so the grid moves in steps of 1/8 of an octave instead of whole octaves).
struct BlockView {
    std::string format;
    std::int64_t block = 0;      ///< which block (0-based)
    std::int64_t blocks = 0;     ///< blocks in the vector (the last may be shorter)
    std::int64_t blockSize = 0;  ///< 32 or 16
    std::vector<double> values;     ///< the block's weights
    std::vector<double> quantized;  ///< the same after quantize / dequantize (core's)
    std::vector<double> grid;       ///< every value the block can hold, ascending
    double amax = 0.0;              ///< max |w| of the block
    double scale = 0.0;      ///< the multiplier of the element grid (MX 2^(e - 127); NVFP4
                             ///< e4m3 x tensorScale)
    int scaleByte = 0;       ///< the stored block scale: E8M0's biased exponent, or E4M3's bits
    double e4m3 = 0.0;       ///< NVFP4: the E4M3 block scale's value
    double tensorScale = 0.0;  ///< NVFP4: the float32 per-tensor scale (amax / (6 * 448))
    double elementMax = 0.0;   ///< the element format's largest value (E2M1 6, E4M3 448, ...)
    double sqnrDb = 0.0;       ///< of this block; +inf when exact
    bool valid = false;
};

/// Block `block` of `values` (as a [1, n] weight; blocks run along it) quantized with block
/// format `format` through core's chooseQParams / quantize / dequantize, NVFP4 under the whole
/// vector's tensor scale. O(n) for the max scan, then O(block size). `valid` is false for an
/// unknown format, an empty vector or a block past the end. Never throws.
BlockView blockView(const std::vector<float>& values, std::string_view format,
                    std::int64_t block);

/// The grid scale of the first `maxBlocks` blocks of `values` in block format `format`
/// (BlockView::scale, block by block, NVFP4's under the whole vector's tensor scale), for the
/// Teach tab's staircase; empty when the format is not a block format. O(n) for the max scan,
/// then O(maxBlocks x block size).
std::vector<double> blockScales(const std::vector<float>& values, std::string_view format,
                                std::int64_t maxBlocks = 256);

} // namespace bitlens::analysis

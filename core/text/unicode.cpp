#include "text/unicode.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

namespace bitlens::text::unicode {

namespace {

#include "text/unicode_tables.inc"

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kReplacement = 0xFFFD;

// Hangul syllable decomposition constants (Unicode chapter 3.12).
constexpr char32_t kHangulFirst = 0xAC00;
constexpr char32_t kJamoL = 0x1100;
constexpr char32_t kJamoV = 0x1161;
constexpr char32_t kJamoT = 0x11A7;
constexpr int kJamoVCount = 21;
constexpr int kJamoTCount = 28;
constexpr int kHangulCount = 19 * kJamoVCount * kJamoTCount;

/// Index of the run that contains `cp` in a sorted run-start table.
template <std::size_t N>
std::size_t runIndex(const std::uint32_t (&starts)[N], char32_t cp)
{
    const auto* it = std::upper_bound(std::begin(starts), std::end(starts),
                                      static_cast<std::uint32_t>(cp));
    return static_cast<std::size_t>(it - std::begin(starts)) - 1;
}

/// True when `cp` lies in one of the (first, last) pairs of a flat sorted range table.
template <std::size_t N>
bool inRanges(const std::uint32_t (&flat)[N], char32_t cp)
{
    static_assert(N % 2 == 0, "range tables hold (first, last) pairs");
    std::size_t lo = 0;
    std::size_t hi = N / 2;
    while (lo < hi) {
        const std::size_t mid = (lo + hi) / 2;
        if (cp < flat[2 * mid])
            hi = mid;
        else if (cp > flat[2 * mid + 1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/// Category of the first 256 code points, the common case of any text, without a search.
const std::array<Category, 256>& latin1Categories()
{
    static const std::array<Category, 256> table = [] {
        std::array<Category, 256> t{};
        for (char32_t c = 0; c < 256; ++c)
            t[c] = static_cast<Category>(kCategoryRunValue[runIndex(kCategoryRunStart, c)]);
        return t;
    }();
    return table;
}

void appendDecomposed(char32_t cp, std::u32string& out)
{
    if (cp >= kHangulFirst && cp < kHangulFirst + kHangulCount) {
        const int s = static_cast<int>(cp - kHangulFirst);
        out.push_back(kJamoL + s / (kJamoVCount * kJamoTCount));
        out.push_back(kJamoV + (s % (kJamoVCount * kJamoTCount)) / kJamoTCount);
        if (s % kJamoTCount != 0)
            out.push_back(kJamoT + s % kJamoTCount);
        return;
    }
    if (cp < 0xC0) {  // nothing below U+00C0 decomposes canonically
        out.push_back(cp);
        return;
    }
    const auto* it = std::lower_bound(std::begin(kDecompCp), std::end(kDecompCp),
                                      static_cast<std::uint32_t>(cp));
    if (it == std::end(kDecompCp) || *it != cp) {
        out.push_back(cp);
        return;
    }
    const auto i = static_cast<std::size_t>(it - std::begin(kDecompCp));
    for (std::size_t k = kDecompOffset[i]; k < kDecompOffset[i + 1]; ++k)
        out.push_back(kDecompPool[k]);
}

} // namespace

const char* tableVersion() { return kUnicodeVersion; }

Category category(char32_t cp)
{
    if (cp < 256)
        return latin1Categories()[cp];
    if (cp > kMaxCodePoint)
        return Category::Cn;
    return static_cast<Category>(kCategoryRunValue[runIndex(kCategoryRunStart, cp)]);
}

bool isLetter(char32_t cp)
{
    if (cp < 128)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    return category(cp) <= Category::Lo;
}

bool isNumber(char32_t cp)
{
    if (cp < 128)
        return cp >= '0' && cp <= '9';
    const Category c = category(cp);
    return c == Category::Nd || c == Category::Nl || c == Category::No;
}

bool isWhitespace(char32_t cp)
{
    if (cp <= 0x20)
        return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
    if (cp < 0x85)
        return false;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool isBertPunctuation(char32_t cp)
{
    if (cp < 128)
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
    return inRanges(kBertPunctuation, cp);
}

bool isBertNonspacingMark(char32_t cp)
{
    return cp >= 0x300 && inRanges(kBertNonspacingMark, cp);
}

bool isBertOther(char32_t cp) { return inRanges(kBertOther, cp); }

bool isCjkIdeograph(char32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

std::uint8_t combiningClass(char32_t cp)
{
    if (cp < 0x300 || cp > kMaxCodePoint)
        return 0;
    return kCccRunValue[runIndex(kCccRunStart, cp)];
}

std::u32string nfd(std::u32string_view text)
{
    std::u32string out;
    out.reserve(text.size() + text.size() / 4);
    for (char32_t cp : text)
        appendDecomposed(cp, out);
    // Canonical ordering: a stable sort of every run of non-starters by combining class.
    std::size_t i = 0;
    while (i < out.size()) {
        if (combiningClass(out[i]) == 0) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < out.size() && combiningClass(out[j]) != 0)
            ++j;
        if (j - i > 1)
            std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i),
                             out.begin() + static_cast<std::ptrdiff_t>(j),
                             [](char32_t a, char32_t b) {
                                 return combiningClass(a) < combiningClass(b);
                             });
        i = j;
    }
    return out;
}

void appendLower(char32_t cp, std::u32string& out)
{
    if (cp < 128) {
        out.push_back(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
        return;
    }
    if (cp == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: "i" + COMBINING DOT ABOVE
        out.push_back(U'i');
        out.push_back(0x307);
        return;
    }
    const auto* it = std::lower_bound(std::begin(kLowerCp), std::end(kLowerCp),
                                      static_cast<std::uint32_t>(cp));
    if (it != std::end(kLowerCp) && *it == cp)
        out.push_back(kLowerTo[it - std::begin(kLowerCp)]);
    else
        out.push_back(cp);
}

namespace {

/// Length of the valid UTF-8 sequence at `i` and its code point, or 0 when it is invalid
/// (overlong forms, surrogates and values past U+10FFFF are invalid).
std::size_t utf8Sequence(std::string_view s, std::size_t i, char32_t& cp)
{
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        cp = b0;
        return 1;
    }
    std::size_t len = 0;
    char32_t min = 0;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2;
        cp = b0 & 0x1F;
        min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3;
        cp = b0 & 0x0F;
        min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4;
        cp = b0 & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (i + len > s.size())
        return 0;
    for (std::size_t k = 1; k < len; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

} // namespace

std::size_t decodeUtf8(std::string_view text, std::u32string& out)
{
    std::size_t bad = 0;
    out.reserve(out.size() + text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        char32_t cp = 0;
        const std::size_t len = utf8Sequence(text, i, cp);
        if (len == 0) {
            out.push_back(kReplacement);
            ++bad;
            ++i;
        } else {
            out.push_back(cp);
            i += len;
        }
    }
    return bad;
}

std::size_t findInvalidUtf8(std::string_view text)
{
    std::size_t i = 0;
    while (i < text.size()) {
        char32_t cp = 0;
        const std::size_t len = utf8Sequence(text, i, cp);
        if (len == 0)
            return i;
        i += len;
    }
    return std::string_view::npos;
}

void appendUtf8(char32_t cp, std::string& out)
{
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string toUtf8(std::u32string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (char32_t cp : text)
        appendUtf8(cp, out);
    return out;
}

} // namespace bitlens::text::unicode

#pragma once
// The Unicode facts the tokenizers need, from a generated table (gen_unicode_tables.py writes
// unicode_tables.inc from Python's unicodedata): General_Category, White_Space, canonical
// decomposition (NFD), per-character lower case, and UTF-8 conversion. No ICU, no LibTorch.

#include <cstdint>
#include <string>
#include <string_view>

namespace bitlens::text::unicode {

/// Unicode General_Category, in the order of the generated table.
enum class Category : std::uint8_t {
    Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe, Pi, Pf, Po,
    Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co, Cn
};

/// Unicode version of the tables ("14.0.0").
const char* tableVersion();

/// General_Category of a code point (Cn for unassigned ones and values past U+10FFFF).
Category category(char32_t cp);
/// \p{L}: Lu, Ll, Lt, Lm, Lo.
bool isLetter(char32_t cp);
/// \p{N}: Nd, Nl, No (Rust's char::is_numeric, regex \p{N}).
bool isNumber(char32_t cp);
/// The White_Space property (regex \s, Rust's char::is_whitespace): 9-D, 20, 85, A0, 1680,
/// 2000-200A, 2028, 2029, 202F, 205F, 3000.
bool isWhitespace(char32_t cp);

/// BERT's punctuation: ASCII punctuation or P* as Hugging Face tokenizers sees it (its category
/// crate is Unicode 8.0, so P* characters added later are not punctuation there, nor here).
bool isBertPunctuation(char32_t cp);
/// Mn as Hugging Face's BERT normalizer sees it (Unicode 8.0 assignments).
bool isBertNonspacingMark(char32_t cp);
/// Cc, Cf, Cs or Co as Hugging Face's BERT normalizer sees it (Unicode 8.0 assignments).
bool isBertOther(char32_t cp);
/// The CJK ideograph blocks BERT pads with spaces (4E00-9FFF, 3400-4DBF, F900-FAFF and the
/// supplementary extensions 20000-2A6DF, 2A700-2CEAF, 2F800-2FA1F).
bool isCjkIdeograph(char32_t cp);

/// Canonical combining class (0 for starters).
std::uint8_t combiningClass(char32_t cp);
/// Canonical decomposition (NFD) of a string: full decomposition, Hangul syllables split into
/// jamo, then combining marks put in canonical order.
std::u32string nfd(std::u32string_view text);
/// Appends the lower case of one code point (one-to-many for U+0130: "i" + U+0307).
void appendLower(char32_t cp, std::u32string& out);

/// Decodes UTF-8; each byte of an invalid sequence becomes U+FFFD (as Python's
/// errors="replace" does for a lone byte). Returns the number of invalid bytes replaced.
std::size_t decodeUtf8(std::string_view text, std::u32string& out);
/// Byte offset of the first invalid UTF-8 sequence, or npos when `text` is valid.
std::size_t findInvalidUtf8(std::string_view text);
/// Appends the UTF-8 encoding of `cp`.
void appendUtf8(char32_t cp, std::string& out);
/// UTF-8 of a whole string.
std::string toUtf8(std::u32string_view text);

} // namespace bitlens::text::unicode

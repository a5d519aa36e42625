#pragma once
// How much of a text file the model's data reads when no size is given (model_data.h), in a
// header of its own so that the window can name the same defaults without tensor headers.

#include <cstdint>

namespace bitlens {

/// Window length of language models when none is given (tokens).
inline constexpr std::int64_t kLmSeqLen = 512;
/// Longest encoder row when none is given (tokens; longer lines are truncated).
inline constexpr std::int64_t kEncoderSeqLen = 256;
/// Language models: windows read when no limit is given, for evaluation (16,384 tokens) and
/// for calibration (8,192 tokens).
inline constexpr std::int64_t kLmEvalWindows = 32;
inline constexpr std::int64_t kLmCalibWindows = 16;
/// Encoders: lines read when no limit is given, for evaluation and for calibration.
inline constexpr std::int64_t kEncoderEvalLines = 1000;
inline constexpr std::int64_t kEncoderCalibLines = 256;

class Model;

/// The model's context in tokens (graph metadata "context_length"), 0 when it names none.
std::int64_t contextLength(const Model& model);
/// Tokens per row that loadModelData cuts text into for `model` when no length is given:
/// kLmSeqLen for language models, kEncoderSeqLen otherwise, cut to the model's context.
std::int64_t defaultTextRowLength(const Model& model);

} // namespace bitlens

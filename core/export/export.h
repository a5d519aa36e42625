#pragma once
// Export front: writes a quantized model in a format other tools load (ONNX QDQ, GGUF for
// llama models, compressed-tensors safetensors), atomically, and verifies a
// written file by reloading it with BitLens' own reader and running it next to the in-app
// quantized model on the same samples.

#include "analysis/metrics.h"
#include "io/dataset.h"
#include "jobs/progress.h"
#include "jobs/result.h"
#include "quant/engine.h"

#include <c10/core/Device.h>
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace bitlens::exporting {

/// File formats a quantized model can be exported to.
enum class ExportFormat { Onnx, Gguf, Safetensors };

/// "onnx", "gguf", "safetensors".
std::string formatName(ExportFormat format);
/// Parses a --format value; Usage error naming the choices.
Result<ExportFormat> parseFormat(const std::string& name);
/// The format a file name asks for by its extension (.onnx, .gguf, .safetensors); Usage error
/// naming the extensions otherwise.
Result<ExportFormat> formatFromPath(const std::string& path);

/// What an export wrote.
struct ExportResult {
    ExportFormat format = ExportFormat::Onnx;
    std::string path;
    std::int64_t bytes = 0;          ///< size of the written file
    std::int64_t opset = 0;          ///< ONNX: default-domain opset written
    int quantizedLayers = 0;         ///< layers written with quantized weights
    int floatLayers = 0;             ///< planned layers kept in float
    std::vector<std::string> notes;  ///< what the writer adapted, per layer (safetensors)
    /// safetensors: config.json and the tokenizer / generation files written beside the
    /// weights (the Hugging Face model folder)
    std::vector<std::string> folderFiles;
};

/// Checks, before any calibration, that `format` can hold `scheme` (Unsupported naming the
/// scheme, the reason and the formats that can hold it).
Result<void> checkExportable(const quant::Scheme& scheme, ExportFormat format);

/// Checks, once the model is open and before any calibration, what only the graph decides:
/// a quantized LSTM / GRU (ONNX QDQ and compressed-tensors cannot hold its recurrence) and,
/// for GGUF, a model that is not a llama-family language model. Unsupported naming the layer
/// or the model; the writers check the same again.
Result<void> checkExportableModel(const ir::Graph& graph, const quant::Scheme& scheme,
                                  ExportFormat format, const std::string& modelPath = {});

/// What `format` does with a quantized weight whose rows the group (block) size does not
/// divide, in one sentence (the export dialog and `export --help` show it). ONNX keeps the
/// shorter last block; safetensors refuses; GGUF falls back as llama.cpp's quantizer does.
std::string partialGroupRule(ExportFormat format);
/// An option that decides how an exported file meets the runtime that loads it, as the export
/// dialog and `bitlens-cli export --help` list them.
struct InteropOption {
    std::string key;           ///< the scheme option ("wrange", "reduce-range") or "partial groups"
    std::string value;         ///< the scheme's value; for partial groups, the format's rule
    std::string defaultValue;  ///< the default ("128", "false"; partial groups: the rule)
    std::string meaning;       ///< one sentence: what it changes, and for which runtime
};
/// The interop options of `format`: int8 weight range (wrange=127|128, default 128), 7-bit
/// weights for CPUs without VNNI (reduce-range, default false), and what `format` does with a
/// group that does not divide a row (partialGroupRule). Values are `scheme`'s (its global
/// configuration), or the defaults where `scheme` is null.
std::vector<InteropOption> interopOptions(ExportFormat format,
                                          const quant::Scheme* scheme = nullptr);
/// The options as text lines, "wrange = 128 (default 128): ...", one per option.
std::vector<std::string> interopOptionLines(ExportFormat format,
                                            const quant::Scheme* scheme = nullptr);
/// Checks, before anything is written, each quantized layer of `layers` (layer -> its
/// configuration) whose weight rows [out, in] its group or block size does not divide:
///  - ONNX: kept. DequantizeLinear's blocked form (opset 21) takes ceil(in / B) scales, the
///    last block shorter, the same arithmetic as the in-app model (engine.cpp: the last block
///    of a row has its own range); onnxruntime 1.32 gives the same values.
///  - safetensors: Unsupported. compressed-tensors 0.20 raises "tensor column shape must be
///    divisble by the given group_size" when it (de)quantizes such a weight, and padding the
///    columns would change the layer's shape that transformers builds the module with.
///  - GGUF: the gguf-* presets keep the tensor in a type whose block divides the row
///    (quant::ggmlTypeForRow, as llama-quantize's fallback); MXFP4 has none: Unsupported.
/// The message names the weight tensor, its row length, the group size and what to do.
Result<void> checkPartialGroups(const ir::Graph& graph,
                                const std::map<std::string, quant::LayerConfig>& layers,
                                ExportFormat format, const std::string& path = {});
/// Where the model came from, for writers that carry more than the graph (GGUF: general.name
/// and the tokenizer).
struct ExportSource {
    std::string modelPath;      ///< the opened model (file or folder)
    std::string tokenizerPath;  ///< ModelSummary::tokenizerPath; empty: none
};

/// Writes `model` to `path` in `format`, atomically: a failure or cancellation leaves no file
/// (and an existing file at `path` untouched).
Result<ExportResult> exportModel(const quant::QuantizedModel& model, ExportFormat format,
                                 const std::string& path, Progress& progress = Progress::none(),
                                 const CancelToken& cancel = CancelToken(),
                                 const ExportSource& source = {});

/// How verifyExport runs.
struct VerifyOptions {
    c10::Device device = c10::Device(c10::kCPU);
    /// Samples per run; the in-app metric uses the same batches (analysis::evaluateQuantized
    /// runs 256), which matters for dynamic schemes: their activation ranges are per batch.
    std::int64_t batchSize = 256;
    /// Token windows per run of a sequence model (language model, encoder, LSTM), as its metric
    /// runs them (analysis::SequenceMetricOptions), fewer where a batch's first output would
    /// pass 256 MB.
    std::int64_t sequenceBatchSize = 8;
};

/// The consumer runtime's own run of the file (ONNX: onnxruntime) on the first batch of the
/// verification's samples, compared with the in-app model (exporting::runConsumer).
struct ConsumerCheck {
    std::string runtime;             ///< "onnxruntime 1.20.1"; empty when it was not asked
    std::string skipped;             ///< why it was not asked (not installed, ...)
    std::int64_t samples = 0;
    double maxAbsDiff = 0.0;         ///< max |consumer output - in-app output|
    std::int64_t top1Positions = 0;  ///< outputs whose top-1 was compared
    double sameTop1Rate = 1.0;       ///< fraction where the consumer picks the in-app top-1
    std::optional<analysis::MetricValue> metricApp;   ///< on the same samples
    std::optional<analysis::MetricValue> metricFile;  ///< the consumer's
    std::optional<double> meanKld;                    ///< language models
    std::optional<double> embeddingCosineMean;        ///< encoders
    std::optional<double> embeddingCosineMin;
    bool ok = true;  ///< within the format's rounding (see verifyExport)
};

/// The outcome of reloading and re-running an exported file. The file is run twice: as ONNX
/// defines its operators (x / scale before rounding, what onnxruntime does) and with BitLens'
/// own rounding rule (x * (1 / scale), as torch.fake_quantize). The second run must reproduce
/// the in-app outputs exactly — that checks every scale, zero point, layout and op the file
/// holds; the first may differ where a value lies within an ulp of a rounding tie (one
/// activation step for that element), which is reported, and must keep top-1 within
/// metricTolerance.
struct VerifyResult {
    std::int64_t samples = 0;
    double maxAbsDiff = 0.0;        ///< max |file output (ONNX rounding) - in-app output|
    double maxAbsDiffSameRounding = 0.0;  ///< the same with the in-app rounding rule
    double sameRoundingTolerance = 0.0;   ///< 0 on the CPU; 1e-5 of outputAbsMax on a GPU
    double outputAbsMax = 0.0;      ///< max |in-app output| (the scale of the outputs)
    /// |top-1 file - top-1 in-app| allowed (0.2 points); for a language model the same
    /// fraction of its perplexity, |perplexity file / in-app - 1|
    double metricTolerance = 0.002;
    std::int64_t weightsChecked = 0;    ///< quantized layers whose dequantized weights compared
    std::int64_t weightsMismatched = 0; ///< of those, not bit-identical to the in-app weights
    std::int64_t argmaxDisagreements = 0;  ///< samples whose top-1 class differs (ONNX rounding)
    std::optional<analysis::MetricValue> metricApp;   ///< in-app quantized model (labels only)
    std::optional<analysis::MetricValue> metricFile;  ///< the reloaded file, ONNX rounding
    /// What the model does (ir::taskName): "classification", "lm", "embedding", "sequence";
    /// it decides the figures below. A classifier's top-1 is per sample, a sequence model's
    /// per token position (argmaxDisagreements counts the same positions).
    std::string task = "classification";
    std::int64_t top1Positions = 0;  ///< outputs whose top-1 was compared (none: embeddings)
    double sameTop1Rate = 1.0;       ///< fraction of them where the file picks the in-app top-1
    /// Language models, over every next-token prediction of the windows (`tokens`): the
    /// perplexities (also metricApp / metricFile) and the KL divergence of the file's
    /// distribution from the in-app one, KLD_t = sum_v P_app ln(P_app / P_file).
    std::int64_t tokens = 0;
    std::optional<double> meanKld;
    std::optional<double> maxKld;
    /// Encoders: cosine of the file's mean-pooled embedding with the in-app one (the pooling
    /// of the embedding-cosine metric), mean and smallest over the samples.
    std::optional<double> embeddingCosineMean;
    std::optional<double> embeddingCosineMin;
    /// The consumer runtime's run where one was asked for the format (ONNX), else nullopt.
    std::optional<ConsumerCheck> consumer;
    bool ok = false;
    std::string message;            ///< one line: what was compared and the verdict
};

/// Reloads `path` with BitLens' reader for `format`, runs it with exec::Executor and the
/// in-app model (executor + quant::makeQuantHook) on `data` (all samples, in batches), and
/// compares: dequantized weights bit for bit, outputs (see VerifyResult), and top-1 when
/// `data` has labels. A mismatch is ok = false (see mismatchError), not an Error; Errors are for
/// unreadable files and failed runs.
Result<VerifyResult> verifyExport(const std::string& path, ExportFormat format,
                                  const quant::QuantizedModel& model, const io::Dataset& data,
                                  const VerifyOptions& options = {},
                                  Progress& progress = Progress::none(),
                                  const CancelToken& cancel = CancelToken());

/// The Runtime error (exit 5) a failed verification is, with its numbers.
Error mismatchError(const std::string& path, const VerifyResult& result);

/// report.json's "export" object: {format, path, bytes, opset, quantized_layers, float_layers,
/// verify: {samples, max_abs_diff, max_abs_diff_same_rounding, same_rounding_tolerance,
/// output_abs_max, metric_tolerance, weights_checked, weights_mismatched, argmax_disagreements,
/// metric_app, metric_file, metric_name, task, top1_positions, same_top1_rate, tokens,
/// perplexity_app, perplexity_file, mean_kld, max_kld, embedding_cosine_mean,
/// embedding_cosine_min, ok, message} | null} (figures a task does not have are null).
nlohmann::json exportToJson(const ExportResult& result,
                            const std::optional<VerifyResult>& verify);

} // namespace bitlens::exporting

#include "export/consumer.h"

#include "export/verify_runs.h"
#include "io/dataset.h"
#include "io/gguf.h"
#include "io/process.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace bitlens::exporting {

namespace fs = std::filesystem;

namespace {

/// The mean KL divergence (nats per token) up to which a consumer's next-token distribution
/// counts as the in-app one whatever its perplexity ratio: 50x what llama.cpp's Q8 activation
/// rounding gives kjv-llama gguf-q4_k (1.0e-4).
constexpr double kConsumerMaxMeanKld = 5e-3;

/// A folder of its own under the system's temporary folder, removed with everything in it.
class ScratchDir {
public:
    ScratchDir()
    {
        std::string pattern = (fs::temp_directory_path() / "bitlens-consumer-XXXXXX").string();
        if (const char* made = ::mkdtemp(pattern.data()))
            m_path = made;
    }
    ~ScratchDir()
    {
        std::error_code ec;
        if (!m_path.empty())
            fs::remove_all(m_path, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    const std::string& path() const { return m_path; }

private:
    std::string m_path;
};

/// Formats whose consumer runtime run_consumer.py knows.
bool hasConsumer(ExportFormat format)
{
    return format == ExportFormat::Onnx || format == ExportFormat::Gguf ||
           format == ExportFormat::Safetensors;
}

} // namespace

Result<ConsumerOutputs> runConsumer(ExportFormat format, const std::string& path,
                                    const ir::Graph& graph, const std::vector<at::Tensor>& feeds)
{
    ConsumerOutputs result;
    if (!hasConsumer(format)) {
        result.skipped = "no consumer runtime is asked for " + formatName(format) + " here";
        return result;
    }
    if (const char* off = std::getenv("BITLENS_CONSUMER"); off && std::string(off) == "off") {
        result.skipped = "BITLENS_CONSUMER=off";
        return result;
    }
    if (format == ExportFormat::Gguf) {
        auto gguf = io::GgufFile::open(path);
        if (gguf && !gguf->getStringArray("tokenizer.ggml.tokens")) {
            result.skipped = "the file has no tokenizer (tokenizer.ggml.*), without which "
                             "llama.cpp does not load it; export from a folder or GGUF that "
                             "carries one";
            return result;
        }
    }
    const std::string python = io::pythonPath();
    if (python.empty()) {
        result.skipped = "no Python found (set BITLENS_PYTHON)";
        return result;
    }
    const std::string script = io::findDataFile("consumers/run_consumer.py");
    if (script.empty()) {
        result.skipped = "share/bitlens/consumers/run_consumer.py is not installed";
        return result;
    }
    ScratchDir dir;
    if (dir.path().empty())
        return Error::runtime("cannot make a temporary folder for the consumer runtime", path);
    const fs::path in = fs::path(dir.path()) / "in";
    const fs::path out = fs::path(dir.path()) / "out";
    std::error_code ec;
    fs::create_directories(in, ec);
    fs::create_directories(out, ec);
    {
        std::ofstream names(in / "names.txt");
        for (std::size_t i = 0; i < feeds.size() && i < graph.inputs.size(); ++i)
            names << graph.inputs[i].name << "\n";
        if (!names)
            return Error::runtime("cannot write the consumer's inputs in " + in.string(), path);
        std::ofstream outputs(in / "outputs.txt");
        for (const auto& output : graph.outputs)
            outputs << output.name << "\n";
        if (!outputs)
            return Error::runtime("cannot write the consumer's inputs in " + in.string(), path);
    }
    for (std::size_t i = 0; i < feeds.size(); ++i)
        if (auto r = io::writeNpy(feeds[i].contiguous(),
                                  (in / ("in_" + std::to_string(i) + ".npy")).string());
            !r)
            return r.error();
    const std::string stdoutPath = (fs::path(dir.path()) / "stdout.txt").string();
    const std::string stderrPath = (fs::path(dir.path()) / "stderr.txt").string();
    const int rc = io::runProcess({python, script, formatName(format), path, in.string(),
                                   out.string()},
                                  stdoutPath, stderrPath);
    if (rc == 3 || rc == -1) {
        result.skipped = rc == -1 ? "cannot run " + python : io::tailOf(stderrPath, 1);
        return result;
    }
    if (rc != 0) {
        const std::string why = io::tailOf(stderrPath, 2);
        return Error::runtime("verification failed: the consumer runtime does not run the file (" +
                                  (why.empty() ? "exit " + std::to_string(rc) : why) + ")",
                              path);
    }
    std::ifstream said(stdoutPath);
    std::stringstream text;
    text << said.rdbuf();
    const auto line = nlohmann::json::parse(text.str(), nullptr, false);
    if (line.is_object() && line.value("runtime", "") != "")
        result.runtime = line.value("runtime", "") + " " + line.value("version", "");
    else
        result.runtime = "the consumer runtime";
    for (std::size_t i = 0;; ++i) {
        const fs::path file = out / ("out_" + std::to_string(i) + ".npy");
        if (!fs::exists(file, ec))
            break;
        auto y = io::readNpy(file.string());
        if (!y)
            return Error::runtime("cannot read the consumer's output " + std::to_string(i) +
                                      ": " + y.error().message,
                                  path);
        result.outputs.push_back(*y);
    }
    result.ran = true;
    return result;
}

Result<std::optional<ConsumerCheck>> checkWithConsumer(ExportFormat format,
                                                       const std::string& path,
                                                       const ir::Graph& fileGraph,
                                                       exec::Executor& app,
                                                       const io::Dataset& data,
                                                       std::int64_t batch,
                                                       const CancelToken& cancel)
{
    if (!hasConsumer(format) || data.size() == 0)
        return std::optional<ConsumerCheck>{};
    const std::int64_t rows = std::min(std::max<std::int64_t>(batch, 1), data.size());
    io::Dataset first;
    first.path = data.path;
    first.inputs = data.inputs.slice(0, 0, rows);
    if (data.labels.defined())
        first.labels = data.labels.slice(0, 0, rows);
    auto feeds = detail::feedsFor(fileGraph, first.inputs, path);
    if (!feeds)
        return feeds.error();
    auto ran = runConsumer(format, path, fileGraph, *feeds);
    if (!ran)
        return ran.error();
    ConsumerCheck check;
    if (!ran->ran) {
        check.skipped = ran->skipped;
        return std::optional<ConsumerCheck>(std::move(check));
    }
    check.runtime = ran->runtime;
    const std::vector<at::Tensor> outputs = std::move(ran->outputs);
    const detail::FileRunner runner{
        fileGraph, [&outputs](const std::vector<at::Tensor>&) -> Result<std::vector<at::Tensor>> {
            return outputs;
        }};
    VerifyResult figures;
    if (auto r = detail::compareRuns(app, runner, first, rows, path, figures, Progress::none(),
                                     cancel);
        !r)
        return r.error();
    check.samples = figures.samples;
    check.maxAbsDiff = figures.maxAbsDiff;
    check.top1Positions = figures.top1Positions;
    check.sameTop1Rate = figures.sameTop1Rate;
    check.metricApp = figures.metricApp;
    check.metricFile = figures.metricFile;
    check.meanKld = figures.meanKld;
    check.embeddingCosineMean = figures.embeddingCosineMean;
    check.embeddingCosineMin = figures.embeddingCosineMin;
    const std::int64_t allowed = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(std::ceil(0.002 * static_cast<double>(check.top1Positions))));
    // llama.cpp rounds the activations of every quantized matmul to Q8 blocks, which the
    // gguf-* schemes do not simulate: its perplexity is allowed 2 % (test_export_llamacpp.sh
    // measures +1.37 % for gguf-q4_k on smollm2-135m, +0.79 % without the Q8_K rounding
    // of the Q4_K matmuls' inputs, 0 with F32 weights and activations).
    if (format == ExportFormat::Gguf)
        figures.metricTolerance = 0.02;
    // A language model: its perplexity (near-ties flip top-1), or where that is off its mean
    // KL divergence from the in-app distribution: a random test model's perplexity of 1.8e31
    // moves 3.5 % for logits 0.5 apart out of 89 at a mean KLD of 1e-12.
    if (figures.tokens > 0)
        check.ok = detail::metricAgrees(figures) ||
                   (figures.meanKld && *figures.meanKld <= kConsumerMaxMeanKld);
    else if (check.embeddingCosineMean)
        check.ok = *check.embeddingCosineMean >= 0.99 && *check.embeddingCosineMin >= 0.98;
    else
        check.ok = figures.argmaxDisagreements <= allowed;
    return std::optional<ConsumerCheck>(std::move(check));
}

std::string consumerText(const std::optional<ConsumerCheck>& check)
{
    if (!check)
        return {};
    if (check->runtime.empty())
        return "; consumer not asked: " + check->skipped;
    auto fmt = [](double v) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", v);
        return std::string(buf);
    };
    std::string text = "; " + check->runtime + " on " + std::to_string(check->samples) +
                       " samples: max |diff| " + fmt(check->maxAbsDiff) + " vs in-app";
    if (check->top1Positions > 0)
        text += ", same top-1 " + fmt(100.0 * check->sameTop1Rate) + "% of " +
                std::to_string(check->top1Positions);
    if (check->metricApp && check->metricFile)
        text += check->metricApp->higherIsBetter
                    ? ", top-1 " + fmt(100.0 * check->metricFile->value) + "% (in-app " +
                          fmt(100.0 * check->metricApp->value) + "%)"
                    : ", perplexity " + fmt(check->metricFile->value) + " (in-app " +
                          fmt(check->metricApp->value) + ")";
    if (check->meanKld)
        text += ", mean KLD " + fmt(*check->meanKld);
    if (check->embeddingCosineMean)
        text += ", embedding cosine " + fmt(*check->embeddingCosineMean) + " (min " +
                fmt(*check->embeddingCosineMin) + ")";
    return text + (check->ok ? "" : " — beyond the format's rounding");
}

} // namespace bitlens::exporting

#include "zoo/char_lstm.h"

#include "exec/executor.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cmath>
#include <deque>

namespace bitlens::zoo {

namespace {

at::Tensor uniform(std::vector<std::int64_t> shape, double bound, at::Generator& gen)
{
    return at::empty(shape).uniform_(-bound, bound, gen);
}

/// Runs the enclosing scope on one intra-op thread. The recurrence is thousands of small ops
/// ([32, 256] x [256, 1024] per step); on the 2-core build machine, loaded, one thread trained
/// ~5x faster than two (2 s vs > 9 s a step), whose spinning workers only contend.
class OneThread {
public:
    OneThread() : m_threads(at::get_num_threads()) { at::set_num_threads(1); }
    ~OneThread() { at::set_num_threads(m_threads); }
    OneThread(const OneThread&) = delete;
    OneThread& operator=(const OneThread&) = delete;

private:
    int m_threads;
};

} // namespace

at::Tensor encodeChars(std::string_view text)
{
    at::Tensor ids = at::empty({static_cast<std::int64_t>(text.size())}, at::kLong);
    auto* dst = ids.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        dst[i] = c == '\n' ? 1 : (c >= 32 && c <= 126) ? static_cast<std::int64_t>(c) - 30 : 0;
    }
    return ids;
}

at::Tensor charWindows(const at::Tensor& ids, std::int64_t seqLen, std::int64_t count)
{
    const std::int64_t n = std::min(count, ids.numel() / seqLen);
    return ids.slice(0, 0, n * seqLen).reshape({n, seqLen}).clone();
}

ir::Graph makeCharLstm(const CharLstmRecipe& recipe)
{
    at::Generator gen = at::detail::createCPUGenerator(recipe.seed);
    const std::int64_t h = recipe.hidden;
    ir::GraphBuilder g("char-lstm");
    std::string x = g.input("input_ids", {-1, -1}, ir::DType::Int64);
    // nn.Embedding: N(0, 1).
    const std::string table =
        g.constant("embed.weight", at::empty({kCharLstmVocab, recipe.embedding}).normal_(0, 1, gen));
    ir::Attributes axis0;
    axis0.set("axis", std::int64_t{0});
    x = g.node("embed", ir::OpKind::Gather, {table, x}, axis0);  // [B, S, E]
    ir::Attributes toTimeMajor;
    toTimeMajor.set("perm", std::vector<std::int64_t>{1, 0, 2});
    x = g.node("time_major", ir::OpKind::Transpose, {x}, toTimeMajor);  // [S, B, E]
    const std::string squeezeAxes = g.constant("squeeze.axes", at::tensor({std::int64_t{1}}));
    // nn.LSTM: every weight and bias ~ U(-1/sqrt(H), 1/sqrt(H)). ONNX layout, gates i, o, f, c.
    const double bound = 1.0 / std::sqrt(static_cast<double>(h));
    for (std::int64_t l = 0; l < recipe.layers; ++l) {
        const std::string name = "lstm." + std::to_string(l);
        const std::int64_t in = l == 0 ? recipe.embedding : h;
        const std::string w = g.constant(name + ".W", uniform({1, 4 * h, in}, bound, gen));
        const std::string r = g.constant(name + ".R", uniform({1, 4 * h, h}, bound, gen));
        const std::string b = g.constant(name + ".B", uniform({1, 8 * h}, bound, gen));
        ir::Attributes a;
        a.set("hidden_size", h);
        x = g.node(name, ir::OpKind::LSTM, {x, w, r, b}, a);                       // [S, 1, B, H]
        x = g.node(name + ".squeeze", ir::OpKind::Squeeze, {x, squeezeAxes});  // [S, B, H]
    }
    x = g.node("batch_major", ir::OpKind::Transpose, {x}, toTimeMajor);  // [B, S, H]
    // nn.Linear: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)); stored [in, out] for MatMul.
    const std::string head = g.constant("head.weight", uniform({h, kCharLstmVocab}, bound, gen));
    x = g.matmul("head", x, head);
    const std::string bias = g.constant("head.bias", uniform({kCharLstmVocab}, bound, gen));
    x = g.binary("logits", ir::OpKind::Add, x, bias);
    g.output(x);
    ir::Graph graph = g.build().value();
    graph.metadata["task"] = "sequence";
    graph.metadata["model_type"] = "char-lstm";
    graph.metadata["bitlens.alphabet"] =
        "id 0: other, 1: newline, 2..96: ASCII 32..126 (id = code - 30)";
    return graph;
}

Result<CharLstmTraining> trainCharLstm(ir::Graph& graph, const at::Tensor& ids,
                                       const CharLstmRecipe& recipe, Progress& progress,
                                       const CancelToken& cancel)
{
    const std::int64_t span = recipe.seqLen + 1;
    if (!ids.defined() || ids.numel() < span * 2)
        return Error::badInput("", "the training text is shorter than two windows");
    const auto started = std::chrono::steady_clock::now();
    CharLstmTraining result;
    const OneThread oneThread;
    try {
        std::vector<at::Tensor> params;
        for (auto& [name, tensor] : graph.initializers) {
            if (tensor.is_floating_point()) {
                tensor.requires_grad_(true);
                params.push_back(tensor);
            }
        }
        train::Adam adam(params, recipe.learningRate);
        exec::Executor executor(graph, exec::ExecOptions{c10::Device(c10::kCPU), true});
        at::Generator gen = at::detail::createCPUGenerator(recipe.seed + 1);
        const at::Tensor offsets = at::arange(span, at::kLong);
        std::deque<double> recent;
        for (std::int64_t step = 0; step < recipe.steps; ++step) {
            if (cancel.cancelled())
                return Error::cancelled();
            const double t = static_cast<double>(step) / static_cast<double>(recipe.steps);
            adam.setLearningRate(recipe.learningRate * 0.5 * (1.0 + std::cos(M_PI * t)));
            const at::Tensor starts = at::randint(ids.numel() - span, {recipe.batchSize, 1}, gen,
                                                  at::TensorOptions().dtype(at::kLong));
            const at::Tensor batch = ids.index_select(0, (starts + offsets).reshape({-1}))
                                         .reshape({recipe.batchSize, span});  // [B, S + 1]
            const at::Tensor inputs = batch.slice(1, 0, recipe.seqLen);
            const at::Tensor targets = batch.slice(1, 1, span);
            adam.zeroGrad();
            const at::Tensor logits = executor.forward({inputs}).front();
            const at::Tensor loss = at::cross_entropy_loss(
                logits.reshape({-1, kCharLstmVocab}), targets.reshape({-1}));
            loss.backward();
            train::clipGradNorm(params, recipe.clipNorm);
            adam.step();
            recent.push_back(loss.item<double>());
            if (recent.size() > 50)
                recent.pop_front();
            if (step % 10 == 0 || step + 1 == recipe.steps) {
                double mean = 0.0;
                for (double v : recent)
                    mean += v;
                mean /= static_cast<double>(recent.size());
                result.finalLoss = mean;
                progress.report(static_cast<double>(step + 1) / static_cast<double>(recipe.steps),
                                "training step " + std::to_string(step + 1) + "/" +
                                    std::to_string(recipe.steps) + ", loss " +
                                    std::to_string(mean));
            }
        }
        for (auto& [name, tensor] : graph.initializers)
            tensor = tensor.detach().requires_grad_(false).contiguous();
    } catch (const c10::Error& e) {
        return Error::runtime(std::string("training failed: ") + e.what_without_backtrace());
    } catch (const std::exception& e) {
        return Error::runtime(std::string("training failed: ") + e.what());
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return result;
}

Result<double> nextCharAccuracy(const ir::Graph& graph, const at::Tensor& windows)
{
    if (!windows.defined() || windows.dim() != 2 || windows.size(1) < 2)
        return Error::badInput("", "next-character accuracy needs windows [N, S] with S >= 2");
    c10::InferenceMode guard;
    exec::Executor executor(graph);
    std::int64_t correct = 0;
    std::int64_t total = 0;
    for (std::int64_t start = 0; start < windows.size(0); start += 16) {
        const at::Tensor batch =
            windows.slice(0, start, std::min(windows.size(0), start + 16)).to(at::kLong);
        auto out = executor.run({batch});
        if (!out)
            return out.error();
        const at::Tensor predicted = out->front().slice(1, 0, -1).argmax(-1);
        correct += predicted.eq(batch.slice(1, 1)).sum().item<std::int64_t>();
        total += predicted.numel();
    }
    return static_cast<double>(correct) / static_cast<double>(std::max<std::int64_t>(total, 1));
}

} // namespace bitlens::zoo

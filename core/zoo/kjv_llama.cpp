#include "zoo/kjv_llama.h"

#include "exec/executor.h"
#include "model/hf_builders.h"
#include "train/optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <chrono>
#include <cmath>
#include <deque>

namespace bitlens::zoo {

nlohmann::json kjvLlamaConfig(const KjvLlamaRecipe& r)
{
    return {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"vocab_size", r.vocab},
            {"hidden_size", r.hidden},
            {"intermediate_size", r.intermediate},
            {"num_hidden_layers", r.layers},
            {"num_attention_heads", r.heads},
            {"num_key_value_heads", r.kvHeads},
            {"head_dim", r.hidden / r.heads},
            {"hidden_act", "silu"},
            {"max_position_embeddings", r.seqLen},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"attention_bias", false},
            {"mlp_bias", false},
            {"tie_word_embeddings", true},
            {"initializer_range", r.initStd},
            {"bos_token_id", 0},
            {"eos_token_id", 0},
            {"torch_dtype", "float32"}};
}

std::map<std::string, at::Tensor> initKjvLlama(const KjvLlamaRecipe& r)
{
    at::Generator gen = at::detail::createCPUGenerator(r.seed);
    std::map<std::string, at::Tensor> w;
    // One tensor drawn per statement, in a fixed order: the same values under any compiler.
    auto normal = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
        w[name] = at::empty({rows, cols}).normal_(0.0, r.initStd, gen);
    };
    auto ones = [&](const std::string& name) { w[name] = at::ones({r.hidden}); };
    const std::int64_t headDim = r.hidden / r.heads;
    normal("model.embed_tokens.weight", r.vocab, r.hidden);
    for (std::int64_t l = 0; l < r.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        ones(p + "input_layernorm.weight");
        normal(p + "self_attn.q_proj.weight", r.heads * headDim, r.hidden);
        normal(p + "self_attn.k_proj.weight", r.kvHeads * headDim, r.hidden);
        normal(p + "self_attn.v_proj.weight", r.kvHeads * headDim, r.hidden);
        normal(p + "self_attn.o_proj.weight", r.hidden, r.heads * headDim);
        ones(p + "post_attention_layernorm.weight");
        normal(p + "mlp.gate_proj.weight", r.intermediate, r.hidden);
        normal(p + "mlp.up_proj.weight", r.intermediate, r.hidden);
        normal(p + "mlp.down_proj.weight", r.hidden, r.intermediate);
    }
    ones("model.norm.weight");
    return w;
}

Result<KjvLlamaTraining> trainKjvLlama(std::map<std::string, at::Tensor>& weights,
                                       const nlohmann::json& config, const at::Tensor& ids,
                                       const KjvLlamaRecipe& recipe, Progress& progress,
                                       const CancelToken& cancel)
{
    const std::int64_t span = recipe.seqLen + 1;
    if (!ids.defined() || ids.numel() < span * 2)
        return Error::badInput("", "the training text is shorter than two windows");
    const auto started = std::chrono::steady_clock::now();
    KjvLlamaTraining result;
    try {
        c10::AutoGradMode grad(true);
        std::vector<at::Tensor> params;
        for (auto& [name, tensor] : weights) {
            tensor = tensor.detach().contiguous().requires_grad_(true);
            params.push_back(tensor);
        }
        auto graph = model::buildFromHfConfig(config, weights, "kjv-llama");
        if (!graph)
            return graph.error();
        // The builder runs in inference mode, so its views of the leaves record no autograd
        // history and its own constants are inference tensors. Each initializer is re-derived
        // here from its leaf (the same view: as stored, or transposed for a MatMul's [in, out])
        // so the gradients reach `weights`; the constants become normal tensors.
        for (auto& [name, t] : graph->initializers) {
            const auto it = weights.find(name == "lm_head.weight" ? "model.embed_tokens.weight"
                                                                  : name);
            if (it == weights.end()) {
                if (t.is_inference())
                    t = t.clone();
                continue;
            }
            const at::Tensor& leaf = it->second;
            const at::Tensor flipped = leaf.dim() == 2 ? leaf.t() : leaf;
            if (t.sizes() == leaf.sizes() && t.strides() == leaf.strides())
                t = leaf;
            else if (t.sizes() == flipped.sizes() && t.strides() == flipped.strides())
                t = flipped;
            else
                return Error::runtime("the graph's '" + name +
                                      "' is neither the parameter nor its transpose");
        }
        train::Adam adam(params, recipe.learningRate);
        exec::Executor executor(*graph, exec::ExecOptions{c10::Device(c10::kCPU), true});
        at::Generator gen = at::detail::createCPUGenerator(recipe.seed + 1);
        const at::Tensor offsets = at::arange(span, at::kLong);
        std::deque<double> recent;
        double firstSum = 0.0;
        for (std::int64_t step = 0; step < recipe.steps; ++step) {
            if (cancel.cancelled())
                return Error::cancelled();
            // Linear warm-up, then cosine decay from the peak to a tenth of it.
            double lr = recipe.learningRate;
            if (step < recipe.warmupSteps) {
                lr *= static_cast<double>(step + 1) / static_cast<double>(recipe.warmupSteps);
            } else {
                const double t = static_cast<double>(step - recipe.warmupSteps) /
                                 static_cast<double>(std::max<std::int64_t>(
                                     recipe.steps - recipe.warmupSteps, 1));
                lr *= 0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * t));
            }
            adam.setLearningRate(lr);
            const at::Tensor starts = at::randint(ids.numel() - span, {recipe.batchSize, 1}, gen,
                                                  at::TensorOptions().dtype(at::kLong));
            const at::Tensor batch = ids.index_select(0, (starts + offsets).reshape({-1}))
                                         .reshape({recipe.batchSize, span});
            const at::Tensor inputs = batch.slice(1, 0, recipe.seqLen).contiguous();
            const at::Tensor targets = batch.slice(1, 1, span).contiguous();
            adam.zeroGrad();
            const at::Tensor logits = executor.forward({inputs}).front();
            const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, recipe.vocab}),
                                                           targets.reshape({-1}));
            loss.backward();
            train::clipGradNorm(params, recipe.clipNorm);
            adam.step();
            const double value = loss.item<double>();
            if (!std::isfinite(value))
                return Error::runtime("training diverged at step " + std::to_string(step + 1) +
                                      " (loss " + std::to_string(value) + ")");
            if (step < 10)
                firstSum += value;
            recent.push_back(value);
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
        result.firstLoss = firstSum / static_cast<double>(std::min<std::int64_t>(recipe.steps, 10));
        for (auto& [name, tensor] : weights)
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

} // namespace bitlens::zoo

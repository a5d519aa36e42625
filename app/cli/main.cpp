// bitlens-cli: everything the GUI does, from a shell. The command names, exit codes and JSON
// keys are a contract (DESIGN.md, "Command-line contract"); tests and scripts rely on them.
// This file holds the usage text and the dispatch; each command is a cmd_*.cpp (cli.h).

#include "cli.h"

#include "analysis/memory_estimate.h"
#include "exec/omp_env.h"

#include <cstdio>
#include <exception>
#include <malloc.h>
#include <string>

namespace bitlens::cli {

namespace {

constexpr const char* kUsage = R"(usage: bitlens-cli COMMAND [ARGS]

commands:
  --version                          print the version
  zoo list                           the demo models
  zoo build NAME                     build (train) a zoo model again
  zoo path NAME                      print a zoo model's file path (builds it when missing)
  info MODEL [--scheme S] [--json]   layers, shapes, parameters, and the memory an eval and a
                                     quantize of S (default w4-int4) would need
  eval MODEL [--data DATA] [--limit N] [--seq-len N] [--tokens N] [--device cpu|cuda] [--json]
                                     task metric (top-1, perplexity, embedding cosine)
  run MODEL --input X.npy[,Y.npy...] --out DIR [--device cpu|cuda] [--scheme SCHEME [--calib DATA]]
                                     run the model, write each output as DIR/<name>.npy
  quantize MODEL --scheme SCHEME [--calib DATA] [--eval DATA] [--limit N] [--report FILE.json]
           [--out FILE.onnx [--verify]] [--engine auto|whole|block]
                                     quantize, compare layer by layer with float, measure;
                                     --out also exports (format from the extension);
                                     --engine block: an LLM one decoder block at a time
  compare MODEL --schemes S1,S2,...|all [--calib DATA] [--eval DATA] [--report FILE.json]
                                     one quantize run per scheme, side by side (all: every
                                     post-training preset; name qat-* schemes to train them)
  sensitivity MODEL --scheme SCHEME [--calib DATA] [--eval DATA] [--by metric|kld]
              [--layers NAME,...] [--estimate] [--report FILE.json]
                                     quantize each layer alone; rank layers by metric drop
                                     (--by kld: language models, by output KL divergence;
                                     --layers: only layers whose name contains one of these;
                                     --estimate: print the sweep's cost here and stop)
  bench MODEL --scheme SCHEME [--calib DATA] [--batch N] [--device cpu|cuda] [--json]
                                     float vs quantized samples/s, side by side
  bench MODEL --scheme SCHEME --decode [--prompt-tokens N] [--gen-tokens N]
        [--repetitions N] [--calib DATA] [--json]
                                     language models: llama-bench's pp (prompt, 512 tokens)
                                     and tg (one token at a time, 128) tokens/s, KV cache
  generate MODEL --prompt TEXT [--scheme SCHEME] [--max-tokens N] [--seed N]
           [--temperature T] [--top-k K] [--top-p P] [--calib DATA] [--json]
                                     float and quantized continuations side by side (KV
                                     cache; greedy unless --temperature > 0; scheme default
                                     w4-int4): first divergence, KL per token, tokens/s
  tokenize MODEL --text FILE [--json] [--no-special]
                                     token ids of a text (MODEL: zoo name, tokenizer.json,
                                     vocab.txt, or a folder or model file beside one)
  export MODEL --scheme SCHEME --format onnx|gguf|safetensors --out FILE [--verify]
         [--calib DATA] [--eval DATA] [--limit N] [--report FILE.json] [--json]
                                     write the quantized model (ONNX QDQ: static-int8,
                                     dynamic-int8, w4-int4, static-w4a8, smoothquant-int8;
                                     GGUF: llama models with the gguf-* presets);
                                     --verify reloads it and compares with the in-app model;
                                     export --help: the interop options (wrange, reduce-range,
                                     partial groups) with their defaults
  plan MODEL|PRESET|config.json [--precision P] [--kv-precision P] [--act-precision P]
       [--use inference|finetune|lora|qlora] [--batch N] [--context N] [--rank N]
       [--checkpointing] [--gpu CARD] [--cards FILE] [--json]
                                     memory per part (weights, KV cache, activations,
                                     gradients, optimizer states, master weights, LoRA) and
                                     the accelerators that hold it; decode tokens/s bound
  plan --list [--cards FILE] [--json] the presets, cards and precisions plan knows

SCHEME is a preset with options (static-int8:observer=percentile:99.99,per=channel,
w4-int4:group=64) or a JSON file {"preset", "options", "overrides": {"layer": "float"}}.
presets: dynamic-int8 static-int8 static-w4a8 w4-int4 w4-nf4 w4-fp4 fp8-e4m3 fp8-e5m2
         llm-int8 smoothquant-int8 fp16 bf16 qat-int8 qat-w4a8
         gguf-f16 gguf-q8_0 gguf-q4_0 gguf-q4_1 gguf-q4_k gguf-q6_k (weight-only, ggml's
         block round trip: the weights a GGUF file of that type holds)
qat-* presets fine-tune through fake quantization on the calibration (training) data, then
report like any scheme: qat-w4a8:epochs=1,samples=12000,lr=1e-4,optimizer=adam|sgd,lsq=true,
act-range=fixed|ema|learned,distill=true,freeze-bn=STEP,eval-every=N,holdout=N,batch=N

MODEL is a model file (.onnx, .gguf, .safetensors with config.json beside it), a Hugging Face
folder (config.json + model.safetensors), or a zoo name (fashion-cnn, minilm-l6, smollm2-135m);
a zoo name brings its own data.
DATA is a folder of IDX files, an IDX images file, an image folder, a .npy or a .npz, or a .txt
for models with a tokenizer: language models read it in windows of --seq-len tokens (512;
--tokens N or --limit N windows, 32 by default), encoders one line per sample (--limit lines).
exit codes: 0 ok, 2 usage, 3 bad input, 4 unsupported model or op, 5 runtime failure
)";

} // namespace

int dispatch(int argc, char** argv)
{
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    const std::string command = argv[1];
    if (command == "--version" || command == "version") {
        std::printf("bitlens-cli %s (LibTorch %s)\n", BITLENS_VERSION, BITLENS_TORCH_VERSION);
        return 0;
    }
    if (command == "--help" || command == "-h" || command == "help") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    // A malformed BITLENS_MEMORY_AVAILABLE is refused before any work (exit 2).
    if (auto memory = analysis::checkMemoryOverride(); !memory)
        return fail(memory.error());
    auto args = parseArgs(argc, argv, 2);
    if (!args)
        return fail(args.error());
    // export has its own --help (its interop options); the others print the overview.
    if (args->has("--help") && command != "export") {
        std::fputs(kUsage, stdout);
        return 0;
    }
    if (command == "zoo")
        return cmdZoo(*args);
    if (command == "info")
        return cmdInfo(*args);
    if (command == "eval")
        return cmdEval(*args);
    if (command == "run")
        return cmdRun(*args);
    if (command == "quantize")
        return cmdQuantize(*args);
    if (command == "compare")
        return cmdCompare(*args);
    if (command == "sensitivity")
        return cmdSensitivity(*args);
    if (command == "bench")
        return cmdBench(*args);
    if (command == "generate")
        return cmdGenerate(*args);
    if (command == "tokenize")
        return cmdTokenize(*args);
    if (command == "export")
        return cmdExport(*args);
    if (command == "plan")
        return cmdPlan(*args);
    std::fprintf(stderr, "error: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
}

} // namespace bitlens::cli

int main(int argc, char** argv)
{
    // Before anything else: LibTorch's OpenMP threads sleep instead of spinning (exec/omp_env.h).
    bitlens::exec::usePassiveOpenMp(argv);
    // Token windows of language models allocate and free hundreds of MB per batch (logits are
    // [B, S, vocab]); keeping freed memory in the heap instead of handing it back to the kernel
    // saves re-faulting it: SmolLM2 perplexity spends ~60 % less system time.
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 256 << 20);
    try {
        return bitlens::cli::dispatch(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: internal failure: %s\n", e.what());
        return 5;
    }
}
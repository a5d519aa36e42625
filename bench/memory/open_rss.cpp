// Peak resident memory of opening a model, against the size of its weights (issue #8: "memory
// use while opening a model stays within a small factor of its weights"). One process per
// measurement, so the peak is this open alone:
//   bitlens_open_rss none                       LibTorch and the process, nothing opened
//   bitlens_open_rss onnx <model.onnx>          openModel: read, validate, shapes by a traced run
//   bitlens_open_rss safetensors <file>         readSafetensors, then every tensor summed (reads
//                                               every byte of the mapping)
//   bitlens_open_rss gguf <file>                GgufFile::open, then every tensor dequantized
// Prints one JSON line: {"what", "file_bytes", "weight_bytes", "peak_rss_bytes"}.
// scripts/measure-open-rss runs it on the demo model and a generated 200 MB safetensors.

#include "io/gguf.h"
#include "io/safetensors.h"
#include "ir/graph.h"
#include "model/model.h"

#include <ATen/ATen.h>

#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

long long peakRssBytes()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<long long>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

int fail(const bitlens::Error& e)
{
    std::fprintf(stderr, "%s\n", e.userMessage().c_str());
    return 3;
}

} // namespace

int main(int argc, char** argv)
{
    const std::string what = argc > 1 ? argv[1] : "";
    const std::string path = argc > 2 ? argv[2] : "";
    at::zeros({1}).sum();  // LibTorch initialised in every mode, so "none" is the baseline
    long long weightBytes = 0;
    double checksum = 0;
    if (what == "onnx") {
        auto model = bitlens::openModel(path);
        if (!model)
            return fail(model.error());
        weightBytes = (*model)->graph().parameterBytes();
    } else if (what == "safetensors") {
        auto file = bitlens::io::readSafetensors(path);
        if (!file)
            return fail(file.error());
        for (const auto& [name, t] : file->tensors) {
            weightBytes += static_cast<long long>(t.nbytes());
            checksum += t.to(at::kDouble).sum().item<double>();
        }
    } else if (what == "gguf") {
        auto file = bitlens::io::GgufFile::open(path);
        if (!file)
            return fail(file.error());
        for (const auto& info : file->tensors()) {
            weightBytes += static_cast<long long>(info.sizeBytes);
            auto values = file->dequantize(info.name);
            if (!values)
                return fail(values.error());
            checksum += values->to(at::kDouble).sum().item<double>();
        }
    } else if (what != "none") {
        std::fprintf(stderr, "usage: bitlens_open_rss none | onnx|safetensors|gguf <file>\n");
        return 2;
    }
    std::error_code ec;
    const auto fileBytes = path.empty() ? 0 : std::filesystem::file_size(path, ec);
    std::printf("{\"what\": \"%s\", \"file_bytes\": %llu, \"weight_bytes\": %lld, "
                "\"peak_rss_bytes\": %lld, \"checksum\": %g}\n",
                what.c_str(), static_cast<unsigned long long>(ec ? 0 : fileBytes), weightBytes,
                peakRssBytes(), checksum);
    return 0;
}

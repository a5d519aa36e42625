// libFuzzer target for the GGUF reader: GgufFile::open on a file, then every tensor as a view
// and (for types with a dequantizer) as float32, and every metadata value described.

#include "fuzz_common.h"
#include "io/gguf.h"

#include <ATen/ATen.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static bitlens::fuzz::ScratchCleanup cleanup;
    const std::string path = bitlens::fuzz::writeScratch("model.gguf", data, size);
    auto file = bitlens::io::GgufFile::open(path);
    if (!file.ok()) {
        bitlens::fuzz::checkError(file.error(), path);
        return 0;
    }
    for (const auto& [key, value] : file->metadata())
        (void)value.describe();
    // The typed getters a model builder calls, on whatever keys the file has.
    for (const auto& [key, value] : file->metadata()) {
        (void)file->getInt(key);
        (void)file->getFloat(key);
        (void)file->getString(key);
        (void)file->getStringArray(key);
        (void)file->getIntArray(key);
        (void)file->getFloatArray(key);
    }
    volatile std::uint64_t sum = 0;
    for (const auto& info : file->tensors()) {
        auto view = file->tensorView(info.name);
        if (!view.ok()) {
            bitlens::fuzz::checkError(view.error(), path);
            continue;
        }
        sum = sum + bitlens::fuzz::touch(view->data_ptr(), view->nbytes());
        auto values = file->dequantize(info.name);
        if (!values.ok())
            bitlens::fuzz::checkError(values.error(), path);
        else
            sum = sum + bitlens::fuzz::touch(values->data_ptr(), values->nbytes());
    }
    (void)sum;
    return 0;
}

// libFuzzer target for the safetensors reader (readSafetensors on a file): any bytes give the
// tensors or an Error naming the file; every tensor view must lie inside the mapping.

#include "fuzz_common.h"
#include "io/safetensors.h"

#include <ATen/ATen.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static bitlens::fuzz::ScratchCleanup cleanup;
    const std::string path = bitlens::fuzz::writeScratch("model.safetensors", data, size);
    auto file = bitlens::io::readSafetensors(path);
    if (!file.ok()) {
        bitlens::fuzz::checkError(file.error(), path);
        return 0;
    }
    volatile std::uint64_t sum = 0;
    for (const auto& [name, tensor] : file->tensors)
        sum = sum + bitlens::fuzz::touch(tensor.data_ptr(), tensor.nbytes());
    (void)sum;
    return 0;
}

// libFuzzer target for the IDX reader (readIdx on a file, plain or gzipped: the content
// decides, so the fuzzer reaches both the IDX parser and gunzip).

#include "fuzz_common.h"
#include "io/dataset.h"

#include <ATen/ATen.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static bitlens::fuzz::ScratchCleanup cleanup;
    const std::string path = bitlens::fuzz::writeScratch("t10k-images-idx3-ubyte", data, size);
    auto tensor = bitlens::io::readIdx(path);
    if (!tensor.ok()) {
        bitlens::fuzz::checkError(tensor.error(), path);
        return 0;
    }
    volatile std::uint64_t sum = bitlens::fuzz::touch(tensor->data_ptr(), tensor->nbytes());
    (void)sum;
    return 0;
}

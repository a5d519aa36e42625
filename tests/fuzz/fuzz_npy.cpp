// libFuzzer target for the .npy parser (parseNpy on bytes).

#include "fuzz_common.h"
#include "io/dataset.h"

#include <ATen/ATen.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::vector<std::uint8_t> bytes(data, data + size);
    auto tensor = bitlens::io::parseNpy(bytes, "fuzz.npy");
    if (!tensor.ok()) {
        bitlens::fuzz::checkError(tensor.error(), "fuzz.npy");
        return 0;
    }
    volatile std::uint64_t sum = bitlens::fuzz::touch(tensor->data_ptr(), tensor->nbytes());
    (void)sum;
    return 0;
}

// libFuzzer target for the image-folder reader (stb_image PNG/JPEG decoding behind
// readImageFolder): one class folder holding the input as an image, as PNG or JPEG by magic.

#include "fuzz_common.h"
#include "io/dataset.h"

#include <ATen/ATen.h>

#include <filesystem>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static bitlens::fuzz::ScratchCleanup cleanup;
    const bool jpeg = size >= 2 && data[0] == 0xFF && data[1] == 0xD8;
    const std::string image = bitlens::fuzz::writeScratch(
        std::string("images/cls/") + (jpeg ? "a.jpg" : "a.png"), data, size);
    // Only this input in the folder: remove the other extension left from a previous input.
    std::error_code ec;
    std::filesystem::remove(bitlens::fuzz::scratchDir() / "images/cls" / (jpeg ? "a.png" : "a.jpg"),
                            ec);
    const std::string dir = (bitlens::fuzz::scratchDir() / "images").string();
    auto dataset = bitlens::io::readImageFolder(dir);
    if (!dataset.ok()) {
        // The error names the image, or the folder for a failure that is not the image's.
        const auto& error = dataset.error();
        bitlens::fuzz::checkError(error, error.path == dir ? dir : image);
        return 0;
    }
    volatile std::uint64_t sum =
        bitlens::fuzz::touch(dataset->inputs.data_ptr(), dataset->inputs.nbytes());
    (void)sum;
    return 0;
}

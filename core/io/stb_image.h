#pragma once
// The image decoder behind image folders: stb_image (PNG and JPEG), compiled into
// stb_image.cpp alone so that its code can be built with its own sanitizer settings and no
// shared libstb is needed at run time. Torch-free.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#if __has_include(<stb/stb_image.h>)
#define BITLENS_HAVE_STB_IMAGE 1
#endif

namespace bitlens::io::stb {

/// Decoded pixels: interleaved rows of `channels` bytes per pixel.
using Pixels = std::unique_ptr<std::uint8_t, void (*)(void*)>;

/// Reads an image's size and colour channels (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA) without
/// decoding it; false with `reason` set when the bytes are not a PNG or JPEG stb can read, or
/// carry what stb 2.27 mishandles (see stb_image.cpp).
bool info(const std::vector<std::uint8_t>& bytes, int& width, int& height, int& channels,
          std::string& reason);
/// Decodes to `channels` (1 or 3) bytes per pixel; null with `reason` set on failure.
Pixels load(const std::vector<std::uint8_t>& bytes, int channels, int& width, int& height,
            std::string& reason);

} // namespace bitlens::io::stb

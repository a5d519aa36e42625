// Image folders in the torchvision ImageFolder layout: <dir>/<class>/<image>.png|.jpg|.jpeg.
// Classes are the sorted subfolder names, labels their index. Decoding uses stb_image (PNG and
// JPEG), compiled into io/stb_image.cpp so that no shared libstb is needed at run time.

#include "io/dataset.h"
#include "io/stb_image.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <memory>
#include <new>

namespace bitlens::io {

namespace fs = std::filesystem;

namespace {

bool isImageFile(const fs::path& file)
{
    std::string ext = file.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

constexpr double kMaxInputBytes = 64.0 * (1ull << 30);

bool isHidden(const fs::path& entry) { return entry.filename().string().starts_with("."); }

std::string sizeText(int width, int height)
{
    return std::to_string(width) + "x" + std::to_string(height);
}

#ifdef BITLENS_HAVE_STB_IMAGE
Result<Dataset> readImageFolderImpl(const std::string& dir, int channels, Progress& progress,
                                    const CancelToken& cancel)
{
    std::error_code ec;
    if (!fs::exists(dir, ec))
        return Error::badInput(dir, "no such folder");
    if (!fs::is_directory(dir, ec))
        return Error::badInput(dir, "is not a folder");

    std::vector<fs::path> classDirs;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.is_directory() && !isHidden(entry.path()))
            classDirs.push_back(entry.path());
    if (ec)
        return Error::badInput(dir, "cannot list folder: " + ec.message());
    if (classDirs.empty())
        return Error::badInput(dir, "has no class subfolders (expected one folder of PNG or "
                                    "JPEG images per class)");
    std::sort(classDirs.begin(), classDirs.end());

    Dataset dataset;
    dataset.path = dir;
    dataset.kind = "image-folder";
    std::vector<fs::path> files;
    std::vector<std::int64_t> labels;
    for (std::size_t c = 0; c < classDirs.size(); ++c) {
        std::vector<fs::path> classFiles;
        for (const auto& entry : fs::directory_iterator(classDirs[c], ec))
            if (entry.is_regular_file() && !isHidden(entry.path()) && isImageFile(entry.path()))
                classFiles.push_back(entry.path());
        if (ec)
            return Error::badInput(classDirs[c].string(), "cannot list folder: " + ec.message());
        if (classFiles.empty())
            return Error::badInput(classDirs[c].string(), "class folder holds no PNG or JPEG "
                                                          "images");
        std::sort(classFiles.begin(), classFiles.end());
        dataset.classNames.push_back(classDirs[c].filename().string());
        for (auto& file : classFiles) {
            files.push_back(std::move(file));
            labels.push_back(static_cast<std::int64_t>(c));
        }
    }

    const std::int64_t n = static_cast<std::int64_t>(files.size());
    int width = 0;
    int height = 0;
    int channelCount = channels;
    at::Tensor inputs;
    float* dst = nullptr;
    std::int64_t planeSize = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        if (cancel.cancelled())
            return Error::cancelled();
        const std::string file = files[i].string();
        auto bytes = readFileBytes(file);
        if (!bytes)
            return bytes.error();
        int w = 0;
        int h = 0;
        int comp = 0;
        std::string reason;
        if (!stb::info(*bytes, w, h, comp, reason))
            return Error::badInput(file, "cannot read image: " + reason);
        if (i == 0) {
            width = w;
            height = h;
            // 0 keeps the first image's colour channels: grey(+alpha) -> 1, RGB(A) -> 3.
            if (channelCount == 0)
                channelCount = comp <= 2 ? 1 : 3;
            planeSize = static_cast<std::int64_t>(w) * h;
            // stb caps each side at 2^24 pixels, so this product cannot overflow.
            const double totalBytes = 4.0 * static_cast<double>(n) * channelCount *
                                      static_cast<double>(planeSize);
            if (totalBytes > kMaxInputBytes)
                return Error::badInput(file, "image is " + sizeText(w, h) + " pixels: " +
                                                 std::to_string(n) + " such images need more " +
                                                 "than 64 GiB");
        } else if (w != width || h != height) {
            return Error::badInput(file, "image is " + sizeText(w, h) + " pixels but " +
                                             files[0].string() + " is " +
                                             sizeText(width, height) +
                                             "; all images must share one size");
        }
        const stb::Pixels pixels = stb::load(*bytes, channelCount, w, h, reason);
        if (!pixels)
            return Error::badInput(file, "cannot decode image: " + reason);
        if (i == 0) {
            // Allocated only once the first image decoded: a header that claims 100000 x 100000
            // pixels in a few bytes is refused by the decoder before 40 GB are asked for.
            inputs = at::empty({n, channelCount, h, w}, at::TensorOptions().dtype(at::kFloat));
            dst = inputs.data_ptr<float>();
        }
        // Interleaved HWC bytes -> planar CHW floats in [0, 1], as torchvision's ToTensor.
        float* sample = dst + i * channelCount * planeSize;
        for (std::int64_t p = 0; p < planeSize; ++p)
            for (int c = 0; c < channelCount; ++c)
                sample[c * planeSize + p] =
                    static_cast<float>(pixels.get()[p * channelCount + c]) / 255.0f;
        progress.report(static_cast<double>(i + 1) / static_cast<double>(n), "reading images");
    }
    dataset.inputs = inputs;
    dataset.labels = at::tensor(labels, at::TensorOptions().dtype(at::kLong));
    return dataset;
}
#endif

} // namespace

Result<Dataset> readImageFolder(const std::string& dir, int channels, Progress& progress,
                                const CancelToken& cancel)
{
    if (channels != 0 && channels != 1 && channels != 3)
        return Error::usage("channels must be 0 (as the first image), 1 (grey) or 3 (RGB), not " +
                            std::to_string(channels));
#ifdef BITLENS_HAVE_STB_IMAGE
    try {
        return readImageFolderImpl(dir, channels, progress, cancel);
    } catch (const std::bad_alloc&) {
        return Error::runtime("out of memory", dir);
    } catch (const c10::Error& e) {
        return Error::runtime(e.what_without_backtrace(), dir);
    } catch (const std::exception& e) {
        return Error::runtime(e.what(), dir);
    }
#else
    (void)progress;
    (void)cancel;
    return Error::unsupported(dir, "this build of BitLens has no image decoder (stb_image)");
#endif
}

} // namespace bitlens::io

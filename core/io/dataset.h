#pragma once
// Calibration and evaluation data: IDX files (the MNIST family, optionally gzipped), image
// folders (one subfolder per class, PNG/JPEG), and NumPy .npy / .npz files.

#include "jobs/progress.h"
#include "io/file_util.h"
#include "jobs/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace bitlens::io {

/// Samples and (optional) labels held in memory.
struct Dataset {
    std::string path;                     ///< what was opened
    std::string kind;                     ///< "idx", "image-folder", "npy", "npz"
    at::Tensor inputs;                    ///< float32 [N, ...]; images are [N, C, H, W] in [0, 1]
    at::Tensor labels;                    ///< int64 [N], undefined when the data has no labels
    std::vector<std::string> classNames;  ///< image folders: subfolder names, sorted

    std::int64_t size() const { return inputs.defined() ? inputs.size(0) : 0; }
};

/// Torch-free description of a data set for the GUI.
struct DatasetSummary {
    std::string path;
    std::string kind;
    std::int64_t samples = 0;
    std::vector<std::int64_t> sampleShape;
    std::int64_t classes = 0;  ///< 0 when unlabelled
};

/// Opens any supported data set: a directory of IDX files (train-* / t10k-* prefixes pick
/// `split`), an IDX images file (labels file found by replacing "images" with "labels"),
/// an image folder, a .npy file (inputs only) or a .npz (arrays "x"/"inputs", "y"/"labels").
/// `limit` > 0 keeps the first `limit` samples.
Result<Dataset> loadDataset(const std::string& path, const std::string& split = "test",
                            std::int64_t limit = 0, Progress& progress = Progress::none(),
                            const CancelToken& cancel = CancelToken());
/// Summary of a loaded data set.
DatasetSummary summarize(const Dataset& dataset);

/// Reads one IDX file (.gz allowed): uint8 image arrays become float32 / 255, label arrays int64.
Result<at::Tensor> readIdx(const std::string& path);
/// Reads an image folder: every PNG/JPEG under <dir>/<class>/, resized never (all images must
/// share one size), converted to `channels` (0 = as the first image, 1 or 3).
Result<Dataset> readImageFolder(const std::string& dir, int channels = 0,
                                Progress& progress = Progress::none(),
                                const CancelToken& cancel = CancelToken());

/// Reads a .npy array (little- or big-endian f2/f4/f8/i1/u1/i2/i4/i8/b1, C or Fortran order).
Result<at::Tensor> readNpy(const std::string& path);
/// Reads all arrays of a .npz (stored or deflated zip members).
Result<std::map<std::string, at::Tensor>> readNpz(const std::string& path);
/// Writes a .npy (C order, little-endian) atomically.
Result<void> writeNpy(const at::Tensor& tensor, const std::string& path);
/// Parses .npy bytes; `path` only names the source in error messages.
Result<at::Tensor> parseNpy(const std::vector<std::uint8_t>& bytes, const std::string& path);

} // namespace bitlens::io

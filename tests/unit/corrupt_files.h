#pragma once
// Corrupt-file generator for the reader tests (issue #8): for each format a small valid file
// built byte by byte (so every section boundary is known), a list of structural defects made
// from it (each with the error a reader must give), and seeded random mutations on top.
// Torch-free: the bytes are built by hand, not by the writers under test.

#include "jobs/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bitlens::test {

/// The file formats the corrupt-file suite covers.
enum class CorruptFormat {
    Onnx,
    Safetensors,
    Gguf,
    Idx,   ///< plain and gzipped IDX (gzip defects included)
    Npy,
    Npz,   ///< zip container + .npy members, through loadDataset
    Image, ///< PNG and JPEG through stb_image (readImageFolder)
    Zip,   ///< the zip reader alone (listZipEntries + extractZipEntry)
    TorchScript, ///< torch.save / TorchScript zips (hand-made pickles) through openModel
};

/// Every format, for loops.
inline constexpr CorruptFormat kCorruptFormats[] = {
    CorruptFormat::Onnx, CorruptFormat::Safetensors, CorruptFormat::Gguf, CorruptFormat::Idx,
    CorruptFormat::Npy,  CorruptFormat::Npz,         CorruptFormat::Image, CorruptFormat::Zip,
    CorruptFormat::TorchScript,
};

/// "onnx", "safetensors", ...
std::string_view formatName(CorruptFormat format);

/// What is wrong with a generated file. Not every defect applies to every format.
enum class Defect {
    None,           ///< the valid base file: must read
    Truncated,      ///< cut at a section boundary
    BadMagic,       ///< magic / signature bytes changed (or, formats without one, not the format)
    CountPastEnd,   ///< a count or length claims more than the file holds
    OffsetPastEnd,  ///< an offset (or a data range) points past the end
    DimOverflow,    ///< dimensions whose element count overflows 64 bits
    HugeTensor,     ///< a tensor claiming 100 GB: refused before anything is allocated
    UnknownDtype,   ///< an element type (or compression method) the format does not define
    DuplicateName,  ///< two tensors / keys / members with one name
    BadChecksum,    ///< a CRC or deflate stream that does not match its data
    NanWeights,     ///< NaN in the values: reads, but quantizing / loading data refuses
    InfWeights,     ///< +-Inf in the values: likewise
    RandomMutation, ///< seeded byte-level mutations of one of the files above
};

/// "Truncated", "BadMagic", ...
std::string_view defectName(Defect defect);

/// One generated file and what a reader must do with it.
struct CorruptFile {
    Defect defect = Defect::None;
    std::string note;                   ///< which variant: "cut at 41 of 112 (in tensor infos)"
    std::vector<std::uint8_t> bytes;
    std::string fileName;               ///< name to save it under ("model.onnx", "a.png")
    /// The error a reader must give; nullopt = must succeed. Random mutations have none: any
    /// clean success or Error is fine, a crash or an error without path or reason is not.
    std::optional<ErrorCode> expectCode;
    std::string expectText;             ///< a substring of the error message (when expectCode)
};

/// The valid base file of `format` and every structural defect made from it (truncations at
/// every section boundary included), in a fixed order.
std::vector<CorruptFile> structuralDefects(CorruptFormat format);

/// `count` files: the structural defects first, then random mutations (seeded by `seed`) of
/// randomly chosen structural files until there are `count`.
std::vector<CorruptFile> corruptFiles(CorruptFormat format, std::size_t count, std::uint64_t seed);

/// Builds a zip archive (stored or deflated members) the way numpy.savez does; exposed for
/// tests that need a hand-made archive.
struct ZipMember {
    std::string name;
    std::vector<std::uint8_t> data;
    bool deflate = false;
};
std::vector<std::uint8_t> buildZip(const std::vector<ZipMember>& members);

/// A .npy v1.0 file: header dict text (e.g. "{'descr': '<f4', 'fortran_order': False,
/// 'shape': (2, 3), }") padded as numpy pads it, then `data`.
std::vector<std::uint8_t> buildNpy(const std::string& dict, const std::vector<std::uint8_t>& data);

} // namespace bitlens::test

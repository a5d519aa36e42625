// Corrupt-file suite (issue #8): for every format 1,000 generated files (each structural defect
// of corrupt_files.h, then seeded random mutations) go through the reader a user's file would
// go through. Every one must end in a clean success or an Error that names the file and says
// why; structural defects must give their specific error. The tally (defect -> message class
// -> count) is printed. TorchScript / torch.save archives go through openModel, as a user's .pt
// does. Seed: BITLENS_CORRUPT_SEED (default 8), printed.

#include "corrupt_files.h"
#include "temp_dir.h"

#include "io/dataset.h"
#include "io/gguf.h"
#include "io/onnx.h"
#include "io/safetensors.h"
#include "io/zip.h"
#include "ir/graph.h"
#include "model/model.h"
#include "quant/engine.h"
#include "quant/observer.h"
#include "quant/scheme.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace bitlens::test {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kFilesPerFormat = 1000;

std::uint64_t suiteSeed()
{
    const char* env = std::getenv("BITLENS_CORRUPT_SEED");
    return env ? std::strtoull(env, nullptr, 10) : 8;
}

void writeFile(const std::string& path, const std::vector<std::uint8_t>& bytes)
{
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
}

/// The quantization observer over every floating tensor: what refuses NaN/Inf weights before
/// they become NaN scales. Its errors name no file; the caller's path is added, as the CLI does.
Result<void> observeWeights(const std::map<std::string, at::Tensor>& tensors,
                            const std::string& path)
{
    for (const auto& [name, tensor] : tensors) {
        if (!tensor.is_floating_point())
            continue;
        auto observer = quant::makeMinMaxObserver();
        if (auto r = observer->observe(tensor.to(at::kFloat)); !r) {
            Error e = r.error();
            e.path = path;
            e.message = "tensor '" + name + "' " + e.message;
            return e;
        }
    }
    return {};
}

/// Reads `file` as a user's file of `format` would be read, and uses what was read the way the
/// next step would (weights through quantization, data through the data-set checks).
/// `named` receives the path the error must name.
Result<void> openAndUse(CorruptFormat format, const CorruptFile& file, const TempDir& dir,
                        std::string& named)
{
    named = dir.file(file.fileName);
    switch (format) {
    case CorruptFormat::Onnx: {
        auto graph = io::readOnnx(file.bytes, named);
        if (!graph)
            return graph.error();
        auto scheme = quant::parseScheme("dynamic-int8");
        if (!scheme)
            return scheme.error();
        auto prepared = quant::prepare(*graph, *scheme, at::Tensor());
        if (!prepared) {
            Error e = prepared.error();
            if (e.path.empty())
                e.path = named;
            return e;
        }
        return {};
    }
    case CorruptFormat::Safetensors: {
        writeFile(named, file.bytes);
        auto st = io::readSafetensors(named);
        if (!st)
            return st.error();
        return observeWeights(st->tensors, named);
    }
    case CorruptFormat::Gguf: {
        writeFile(named, file.bytes);
        auto gguf = io::GgufFile::open(named);
        if (!gguf)
            return gguf.error();
        std::map<std::string, at::Tensor> weights;
        for (const auto& info : gguf->tensors()) {
            auto values = gguf->dequantize(info.name);
            if (!values)
                return values.error();
            weights[info.name] = *values;
        }
        return observeWeights(weights, named);
    }
    case CorruptFormat::Idx:
    case CorruptFormat::Npy:
    case CorruptFormat::Npz: {
        writeFile(named, file.bytes);
        auto data = io::loadDataset(named);
        if (!data)
            return data.error();
        return {};
    }
    case CorruptFormat::Image: {
        // One image in one class folder; the error names the image.
        const fs::path classDir = fs::path(dir.path()) / "images" / "cls";
        std::error_code ec;
        fs::remove_all(classDir, ec);
        named = (classDir / file.fileName).string();
        writeFile(named, file.bytes);
        auto data = io::loadDataset((fs::path(dir.path()) / "images").string());
        if (!data)
            return data.error();
        return {};
    }
    case CorruptFormat::Zip: {
        const std::span<const std::uint8_t> bytes(file.bytes);
        auto entries = io::listZipEntries(bytes, named);
        if (!entries)
            return entries.error();
        for (const auto& entry : *entries) {
            auto member = io::extractZipEntry(bytes, entry, named);
            if (!member)
                return member.error();
        }
        return {};
    }
    case CorruptFormat::TorchScript: {
        writeFile(named, file.bytes);
        auto model = openModel(named);
        if (!model)
            return model.error();
        return observeWeights((*model)->graph().initializers, named);
    }
    }
    return Error::runtime("unknown format");
}

/// "BadInput: tensor '…' has N bytes of raw_data, expected N …": numbers and quoted names
/// replaced so that one kind of message is one class.
std::string messageClass(const Error& e)
{
    static const std::map<ErrorCode, std::string> kCodes = {
        {ErrorCode::Usage, "Usage"},         {ErrorCode::BadInput, "BadInput"},
        {ErrorCode::Unsupported, "Unsupported"}, {ErrorCode::Runtime, "Runtime"},
        {ErrorCode::Cancelled, "Cancelled"}};
    std::string text;
    bool inQuote = false;
    for (std::size_t i = 0; i < e.message.size(); ++i) {
        const char c = e.message[i];
        // A quote opens after a space or bracket ("tensor 'w'"), not inside a word ("shape's").
        const bool opens = i == 0 || !std::isalnum(static_cast<unsigned char>(e.message[i - 1]));
        if (c == '\'' && (inQuote || opens)) {
            if (!inQuote)
                text += "'…'";
            inQuote = !inQuote;
            continue;
        }
        if (inQuote)
            continue;
        if (std::isdigit(static_cast<unsigned char>(c))) {
            if (text.empty() || text.back() != 'N')
                text += 'N';
            continue;
        }
        text += c;
    }
    if (text.size() > 90)
        text = text.substr(0, 87) + "...";
    return kCodes.at(e.code) + ": " + text;
}

bool matchesOneOf(const std::string& message, const std::string& alternatives)
{
    std::stringstream in(alternatives);
    std::string alternative;
    while (std::getline(in, alternative, '|'))
        if (message.find(alternative) != std::string::npos)
            return true;
    return false;
}

void runFormat(CorruptFormat format)
{
    const std::uint64_t seed = suiteSeed() * 1000 + static_cast<std::uint64_t>(format);
    const auto files = corruptFiles(format, kFilesPerFormat, seed);
    ASSERT_EQ(files.size(), kFilesPerFormat);
    TempDir dir("corrupt");
    std::map<std::string, std::map<std::string, int>> tally;  // defect -> class -> count
    std::map<std::string, int> totals;
    std::vector<std::string> failures;
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < files.size(); ++i) {
        const CorruptFile& file = files[i];
        std::string named;
        const auto result = openAndUse(format, file, dir, named);
        const std::string defect(defectName(file.defect));
        const std::string what = "#" + std::to_string(i) + " " + defect + " (" + file.note + ")";
        if (result) {
            ++tally[defect]["ok"];
            ++totals["ok"];
            if (file.expectCode)
                failures.push_back(what + ": read without error, expected " + file.expectText);
            continue;
        }
        const Error& e = result.error();
        ++tally[defect][messageClass(e)];
        ++totals[e.code == ErrorCode::BadInput      ? "BadInput"
                 : e.code == ErrorCode::Unsupported ? "Unsupported"
                                                    : "other"];
        // Every error names the file (the image folder for a folder-level failure) and why.
        const bool pathOk = e.path == named ||
                            (format == CorruptFormat::Image &&
                             e.path == (fs::path(dir.path()) / "images").string());
        if (!pathOk || e.message.empty())
            failures.push_back(what + ": error does not name the file: " + e.userMessage());
        if (e.code != ErrorCode::BadInput && e.code != ErrorCode::Unsupported)
            failures.push_back(what + ": not a bad-input/unsupported error: " + e.userMessage());
        if (!file.expectCode && file.defect != Defect::RandomMutation)
            failures.push_back(what + ": expected to read, got " + e.userMessage());
        if (file.expectCode &&
            (e.code != *file.expectCode || !matchesOneOf(e.message, file.expectText)))
            failures.push_back(what + ": expected '" + file.expectText + "', got " +
                               e.userMessage());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::ostringstream report;
    report << "[corrupt " << formatName(format) << "] " << files.size()
           << " files, seed " << seed << ", " << seconds << " s: 0 crashes, " << totals["ok"]
           << " read cleanly, " << totals["BadInput"] << " BadInput, " << totals["Unsupported"]
           << " Unsupported, " << totals["other"] << " other\n";
    for (const auto& [defect, classes] : tally) {
        int n = 0;
        for (const auto& [cls, count] : classes)
            n += count;
        report << "  " << defect << " (" << n << ")\n";
        std::vector<std::pair<int, std::string>> sorted;
        for (const auto& [cls, count] : classes)
            sorted.emplace_back(-count, cls);
        std::sort(sorted.begin(), sorted.end());
        for (const auto& [count, cls] : sorted)
            report << "    " << -count << "  " << cls << "\n";
    }
    std::cout << report.str();
    for (std::size_t i = 0; i < failures.size() && i < 25; ++i)
        ADD_FAILURE() << failures[i];
    EXPECT_EQ(failures.size(), 0u) << "of " << files.size() << " files";
}

TEST(CorruptFiles, Onnx) { runFormat(CorruptFormat::Onnx); }
TEST(CorruptFiles, Safetensors) { runFormat(CorruptFormat::Safetensors); }
TEST(CorruptFiles, Gguf) { runFormat(CorruptFormat::Gguf); }
TEST(CorruptFiles, Idx) { runFormat(CorruptFormat::Idx); }
TEST(CorruptFiles, Npy) { runFormat(CorruptFormat::Npy); }
TEST(CorruptFiles, Npz) { runFormat(CorruptFormat::Npz); }
TEST(CorruptFiles, Image) { runFormat(CorruptFormat::Image); }
TEST(CorruptFiles, Zip) { runFormat(CorruptFormat::Zip); }
TEST(CorruptFiles, TorchScript) { runFormat(CorruptFormat::TorchScript); }

/// Every format has each of the defects the issue lists, and a 100 GB tensor claim among them.
TEST(CorruptFiles, EveryFormatHasTheListedDefects)
{
    for (CorruptFormat format : kCorruptFormats) {
        std::set<Defect> seen;
        for (const auto& f : structuralDefects(format))
            seen.insert(f.defect);
        SCOPED_TRACE(std::string(formatName(format)));
        for (Defect d : {Defect::None, Defect::Truncated, Defect::BadMagic, Defect::CountPastEnd,
                         Defect::OffsetPastEnd, Defect::HugeTensor})
            EXPECT_TRUE(seen.count(d)) << defectName(d);
    }
}

/// The generator is deterministic for a seed (so a failure can be reproduced from its number).
TEST(CorruptFiles, SameSeedSameFiles)
{
    const auto a = corruptFiles(CorruptFormat::Gguf, 200, 42);
    const auto b = corruptFiles(CorruptFormat::Gguf, 200, 42);
    const auto c = corruptFiles(CorruptFormat::Gguf, 200, 43);
    ASSERT_EQ(a.size(), b.size());
    bool allSame = true;
    bool anyDifferent = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        allSame = allSame && a[i].bytes == b[i].bytes;
        anyDifferent = anyDifferent || a[i].bytes != c[i].bytes;
    }
    EXPECT_TRUE(allSame);
    EXPECT_TRUE(anyDifferent);
}

/// An ONNX file of a few hundred bytes whose input declares 100 GB per sample: opening it must
/// refuse before the shape trace allocates that sample (zero-filling it would get the process
/// killed).
TEST(Limits, OnnxInputOf100GBIsRefusedBeforeTracing)
{
    TempDir dir;
    ir::GraphBuilder builder("huge-input");
    const std::string x =
        builder.input("x", {1, static_cast<std::int64_t>(25'000'000'000ll)});
    builder.output(builder.unary("relu", ir::OpKind::Relu, x));
    auto graph = builder.build();
    ASSERT_TRUE(graph.ok());
    // With its output shape given the writer does not trace the graph (which would refuse too).
    graph->outputs.front().shape = {1, static_cast<std::int64_t>(25'000'000'000ll)};
    const std::string path = dir.file("huge_input.onnx");
    ASSERT_TRUE(io::writeOnnxFile(*graph, path).ok());
    auto model = openModel(path);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.error().code, ErrorCode::BadInput);
    EXPECT_EQ(model.error().path, path);
    EXPECT_EQ(model.error().message,
              "input 'x' declares shape [1, 25000000000]: one sample would hold more than 2^28 "
              "elements");
}

} // namespace
} // namespace bitlens::test

// Opening a path never hangs and says the true reason (io/file_util.h checkOpenable, used by
// every reader and by openModel): FIFOs and devices are refused before open(), the system's
// own words for loops, long names and permissions, and messages stay printable.

#include "io/file_util.h"
#include "io/mapped_file.h"
#include "jobs/result.h"
#include "model/model.h"
#include "temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

using namespace bitlens;
namespace fs = std::filesystem;

TEST(OpenPaths, AFifoIsRefusedWithoutBlocking)
{
    test::TempDir dir("open-fifo");
    const std::string fifo = dir.file("pipe.onnx");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // Nobody writes: open() on it would wait forever.
    auto model = openModel(fifo);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.error().userMessage(),
              "error: " + fifo + ": is a FIFO (named pipe), not a regular file");
    EXPECT_FALSE(io::MappedFile::open(fifo).ok());
    EXPECT_FALSE(io::readFileBytes(fifo).ok());
    EXPECT_EQ(io::checkOpenable("/dev/null").error().message,
              "is a character device, not a regular file");
}

TEST(OpenPaths, LoopsLongNamesAndMissingFilesSayWhy)
{
    test::TempDir dir("open-why");
    const std::string a = dir.file("a.onnx"), b = dir.file("b.onnx");
    fs::create_symlink(b, a);
    fs::create_symlink(a, b);
    EXPECT_EQ(openModel(a).error().message,
              "cannot open file: Too many levels of symbolic links");
    const std::string longName = dir.file(std::string(300, 'x') + ".onnx");
    EXPECT_EQ(openModel(longName).error().message, "cannot open file: File name too long");
    EXPECT_EQ(openModel(dir.file("none.onnx")).error().message, "cannot open file: no such file");
    // A file under a regular file: ENOTDIR, not "no such file".
    std::ofstream(dir.file("plain")) << "x";
    EXPECT_EQ(openModel(dir.file("plain") + "/m.onnx").error().message,
              "cannot open file: Not a directory");
    if (::geteuid() != 0) {  // root reads every folder
        const std::string locked = dir.file("locked");
        fs::create_directory(locked);
        std::ofstream(locked + "/m.onnx") << "x";
        ::chmod(locked.c_str(), 0);
        EXPECT_EQ(openModel(locked + "/m.onnx").error().message,
                  "cannot open file: Permission denied");
        ::chmod(locked.c_str(), 0700);
    }
}

TEST(OpenPaths, MessagesWriteControlBytesAsEscapes)
{
    const Error e = Error::badInput("model.gguf", std::string("key 'gen\0eral.\x1b[2Jname' is bad", 30));
    EXPECT_EQ(e.userMessage(), "error: model.gguf: key 'gen\\x00eral.\\x1b[2Jname' is bad");
    EXPECT_EQ(Error::badInput("caf\xc3\xa9.onnx", "tab\there").describe(), "caf\xc3\xa9.onnx: tab\there");
}

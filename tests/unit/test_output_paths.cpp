// io::checkWritable (io/file_util.h): an output path is checked before any work, a target that
// is not a regular file is refused and never replaced, a symbolic link is written at its
// destination (issue #49, items 1 and 8).

#include "io/file_util.h"
#include "io/mapped_file.h"
#include "temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

using namespace bitlens;
namespace fs = std::filesystem;

namespace {

std::string readText(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

/// Refused naming `path`, with `reason` in the message; nothing written. Runtime (exit 5) for
/// a target that exists and cannot be written or replaced, BadInput (exit 3) for a path that
/// cannot name a file (empty, a missing parent folder, a parent that is a file).
void expectRefused(const std::string& path, const std::string& reason,
                   io::OutputKind kind = io::OutputKind::File,
                   ErrorCode code = ErrorCode::Runtime)
{
    auto checked = io::checkWritable(path, kind);
    ASSERT_FALSE(checked.ok()) << path << " was accepted as " << checked.value();
    EXPECT_EQ(checked.error().code, code) << checked.error().describe();
    EXPECT_EQ(checked.error().path, path);
    EXPECT_NE(checked.error().message.find(reason), std::string::npos)
        << checked.error().message;
}

/// Every writer refuses it too (AtomicFileWriter goes through checkWritable).
void expectWriteRefused(const std::string& path, ErrorCode code = ErrorCode::Runtime)
{
    auto written = io::writeFileAtomic(path, "abc", 3);
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.error().code, code) << written.error().describe();
}

} // namespace

TEST(OutputPaths, ACharacterDeviceIsRefusedAndStaysADevice)
{
    if (::geteuid() != 0)
        GTEST_SKIP() << "mknod of a character device needs root";
    test::TempDir dir("out-chr");
    const std::string node = dir.file("null");
    // A copy of /dev/null (1, 3): writing to it by rename would leave a regular file.
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    expectRefused(node, "is a character device, not a regular file");
    expectWriteRefused(node);
    struct stat st {};
    ASSERT_EQ(::lstat(node.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    // A symbolic link to it is no way around.
    const std::string link = dir.file("to-null.json");
    fs::create_symlink(node, link);
    expectRefused(link, "is a character device");
    expectWriteRefused(link);
    ASSERT_EQ(::lstat(node.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_TRUE(fs::is_symlink(link));
}

TEST(OutputPaths, AFifoAndASocketAreRefusedAndStay)
{
    test::TempDir dir("out-fifo");
    const std::string fifo = dir.file("pipe.json");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    expectRefused(fifo, "is a FIFO (named pipe), not a regular file");
    expectRefused(fifo, "is a FIFO", io::OutputKind::Folder);
    expectWriteRefused(fifo);
    EXPECT_TRUE(fs::is_fifo(fifo));

    const std::string sock = dir.file("s.onnx");
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr {};
    addr.sun_family = AF_UNIX;
    ASSERT_LT(sock.size(), sizeof(addr.sun_path));
    std::copy(sock.begin(), sock.end(), addr.sun_path);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    expectRefused(sock, "is a socket, not a regular file");
    expectWriteRefused(sock);
    EXPECT_TRUE(fs::is_socket(sock));
    ::close(fd);
}

TEST(OutputPaths, ASymlinkToAFileIsWrittenAtItsDestination)
{
    test::TempDir dir("out-link");
    fs::create_directory(dir.file("real"));
    const std::string dest = dir.file("real/r.json");
    std::ofstream(dest) << "old";
    const std::string link = dir.file("r.json");
    fs::create_symlink("real/r.json", link);

    auto checked = io::checkWritable(link);
    ASSERT_TRUE(checked.ok()) << checked.error().describe();
    EXPECT_EQ(fs::path(*checked), fs::canonical(dest));

    ASSERT_TRUE(io::writeFileAtomic(link, "new", 3).ok());
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(readText(dest), "new");
    // The staging file was beside the destination, and is gone.
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir.file("real"))) {
        (void)e;
        ++entries;
    }
    EXPECT_EQ(entries, 1);
}

TEST(OutputPaths, ADanglingSymlinkAndALoopAreRefused)
{
    test::TempDir dir("out-dangling");
    const std::string dangling = dir.file("r.json");
    fs::create_symlink(dir.file("nowhere/r.json"), dangling);
    expectRefused(dangling, "is a symbolic link to " + dir.file("nowhere/r.json") +
                                ", which does not exist");
    expectWriteRefused(dangling);
    EXPECT_TRUE(fs::is_symlink(dangling));

    const std::string a = dir.file("a.json");
    const std::string b = dir.file("b.json");
    fs::create_symlink(b, a);
    fs::create_symlink(a, b);
    expectRefused(a, "cannot resolve the symbolic link: Too many levels of symbolic links");
    expectWriteRefused(a);
    EXPECT_TRUE(fs::is_symlink(a));
    EXPECT_TRUE(fs::is_symlink(b));
}

TEST(OutputPaths, AFolderIsRefusedWhereAFileIsMeant)
{
    test::TempDir dir("out-dir");
    const std::string folder = dir.file("r.json");
    fs::create_directory(folder);
    expectRefused(folder, "is a directory, expected a file");
    expectWriteRefused(folder);
    EXPECT_TRUE(fs::is_directory(folder));
    // Where a folder may be meant (a safetensors export, run --out), it is the target.
    for (auto kind : {io::OutputKind::Folder, io::OutputKind::FileOrFolder}) {
        auto checked = io::checkWritable(folder, kind);
        ASSERT_TRUE(checked.ok()) << checked.error().describe();
    }
    // A regular file where a folder is meant.
    const std::string file = dir.file("f.txt");
    std::ofstream(file) << "x";
    expectRefused(file, "is a file, expected a folder", io::OutputKind::Folder);
    expectRefused(file + "/", "is a file, expected a folder", io::OutputKind::FileOrFolder);
    expectRefused(dir.file("new/"), "names a folder, expected a file", io::OutputKind::File,
                  ErrorCode::BadInput);
}

TEST(OutputPaths, AMissingParentFolderIsRefusedBeforeAnyWork)
{
    test::TempDir dir("out-parent");
    const std::string path = dir.file("missing-dir/r.json");
    expectRefused(path, "cannot write: folder " + dir.file("missing-dir") + " does not exist",
                  io::OutputKind::File, ErrorCode::BadInput);
    expectRefused(path, "does not exist", io::OutputKind::FileOrFolder, ErrorCode::BadInput);
    expectWriteRefused(path, ErrorCode::BadInput);
    // A parent that is a file.
    std::ofstream(dir.file("f")) << "x";
    expectRefused(dir.file("f/r.json"), "cannot write: " + dir.file("f") + " is not a folder",
                  io::OutputKind::File, ErrorCode::BadInput);
    // A folder output is created with its parents: only the nearest existing one counts.
    auto nested = io::checkWritable(dir.file("a/b/c"), io::OutputKind::Folder);
    ASSERT_TRUE(nested.ok()) << nested.error().describe();
    EXPECT_FALSE(fs::exists(dir.file("a")));
    expectRefused(dir.file("f/out"), "is not a folder", io::OutputKind::Folder,
                  ErrorCode::BadInput);
    // An empty path.
    expectRefused("", "empty", io::OutputKind::File, ErrorCode::BadInput);
}

TEST(OutputPaths, NewAndExistingRegularFilesAreAccepted)
{
    test::TempDir dir("out-ok");
    const std::string fresh = dir.file("r.json");
    auto checked = io::checkWritable(fresh);
    ASSERT_TRUE(checked.ok()) << checked.error().describe();
    EXPECT_EQ(*checked, fresh);
    EXPECT_FALSE(fs::exists(fresh));  // checked, not created
    std::ofstream(fresh) << "old";
    checked = io::checkWritable(fresh);
    ASSERT_TRUE(checked.ok()) << checked.error().describe();
    EXPECT_EQ(*checked, fresh);
    // A bare name is in the current folder.
    auto bare = io::checkWritable("bitlens-output-check-that-does-not-exist.json");
    ASSERT_TRUE(bare.ok()) << bare.error().describe();
}

TEST(OutputPaths, AFolderWithoutWritePermissionIsRefused)
{
    // Root writes through any mode bits (only a read-only mount stops it).
    if (::geteuid() == 0)
        GTEST_SKIP() << "root ignores the folder's mode";
    test::TempDir dir("out-mode");
    const std::string folder = dir.file("ro");
    fs::create_directory(folder);
    fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec);
    expectRefused(folder + "/r.json", "cannot write: folder " + folder + ": Permission denied");
    fs::permissions(folder, fs::perms::owner_all);
}

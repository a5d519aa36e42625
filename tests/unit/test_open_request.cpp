// Opening what a person asks for (zoo/open_request.h), as the GUI's Open Model / Open Data
// jobs do: failures are Errors naming the request, never exceptions.

#include "zoo/open_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace bitlens::zoo {
namespace {

TEST(OpenRequest, AMissingModelFileIsAnErrorNamingIt)
{
    const std::string path = "/nonexistent/bitlens/model.onnx";
    Result<OpenedModel> opened = openRequestedModel(path, Progress::none(), CancelToken());
    ASSERT_FALSE(opened);
    EXPECT_NE(opened.error().code, ErrorCode::Cancelled);
    EXPECT_NE(opened.error().userMessage().find("model.onnx"), std::string::npos)
        << opened.error().userMessage();
}

TEST(OpenRequest, TextDataNeedsAModelWithATokenizer)
{
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / "bitlens-open-request.txt";
    std::ofstream(file) << "to be or not to be\n";
    Result<DataInfo> data = openRequestedData(file.string(), Progress::none(), CancelToken());
    std::filesystem::remove(file);
    ASSERT_FALSE(data);
    EXPECT_EQ(data.error().code, ErrorCode::Usage);
    EXPECT_NE(data.error().message.find("tokenizer"), std::string::npos);
}

TEST(OpenRequest, CancelledBeforeOpeningIsCancelled)
{
    CancelToken cancel;
    cancel.cancel();
    Result<OpenedModel> opened =
        openRequestedModel(std::string(BITLENS_TEST_DATA), Progress::none(), cancel);
    ASSERT_FALSE(opened);
    EXPECT_EQ(opened.error().code, ErrorCode::Cancelled);
}

} // namespace
} // namespace bitlens::zoo

// TorchScript and torch.save archives read without running them: the pickle reader, every
// tensor of archives made by torch (tests/data/torchscript/make_golden.py) read exactly, RNN
// stacks opened as graphs that reproduce torch's outputs, other modules listed and refused,
// and corrupt archives refused with the file and the reason.

#include "exec/executor.h"
#include "io/pickle.h"
#include "io/torchscript.h"
#include "model/model.h"
#include "ir/graph.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace bitlens;
using namespace std::string_literals;
using nlohmann::json;

namespace {

const std::string kDir = std::string(BITLENS_TEST_DATA) + "/torchscript/";

json expected()
{
    std::ifstream in(kDir + "expected.json");
    return json::parse(in);
}

at::Tensor fromJson(const json& values, const json& shape)
{
    std::vector<double> v = values.get<std::vector<double>>();
    return at::tensor(v, at::kDouble).reshape(shape.get<std::vector<std::int64_t>>()).clone();
}

std::span<const std::uint8_t> bytesOf(const std::string& s)
{
    return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

} // namespace

TEST(Pickle, ReadsTheOpcodesTorchWritesAndNeverCalls)
{
    // {'a': (1, -2, 3.5, True, None), 'b': [os.system('x')]} as protocol 2 writes it; the call
    // is recorded, not made. (Adjacent literals end hex escapes before 'a', 'b'.)
    const std::string p = "\x80\x02}q\x00("s                        // PROTO 2, EMPTY_DICT, MARK
                          "X\x01\x00\x00\x00" "a("s                // 'a', MARK
                          "K\x01J\xfe\xff\xff\xff"s               // 1, -2
                          "G\x40\x0c\x00\x00\x00\x00\x00\x00"s // 3.5 (big-endian double)
                          "\x88Nt"s                                // True, None, TUPLE
                          "X\x01\x00\x00\x00" "b]"s                // 'b', EMPTY_LIST
                          "cos\nsystem\nX\x01\x00\x00\x00" "x\x85Rau."s;
    auto pickle = io::parsePickle(bytesOf(p), "t.pkl");
    ASSERT_TRUE(pickle.ok()) << pickle.error().userMessage();
    const io::PickleValue* root = pickle->root();
    ASSERT_EQ(root->kind, io::PickleValue::Kind::Dict);
    const io::PickleValue* a = root->get("a");
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->kind, io::PickleValue::Kind::Tuple);
    ASSERT_EQ(a->items.size(), 5u);
    EXPECT_EQ(a->items[0]->integer, 1);
    EXPECT_EQ(a->items[1]->integer, -2);
    EXPECT_DOUBLE_EQ(a->items[2]->number, 3.5);
    EXPECT_TRUE(a->items[3]->boolean);
    EXPECT_EQ(a->items[4]->kind, io::PickleValue::Kind::None);
    const io::PickleValue* b = root->get("b");
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->items.size(), 1u);
    EXPECT_EQ(b->items[0]->kind, io::PickleValue::Kind::Call);
    EXPECT_EQ(b->items[0]->qualifiedName(), "os.system");
}

TEST(Pickle, HostilePicklesAreErrorsNotCrashes)
{
    struct Case {
        std::string bytes;
        std::string message;
    };
    const std::vector<Case> cases = {
        {"\x80\x02\xfe."s, "unsupported pickle opcode 0xfe (BitLens reads the opcodes PyTorch "
                          "writes and never runs code) (opcode at byte 2)"},
        {std::string("\x80\x02X\xff\xff\xff\x7f", 8), "the pickle ends early"},
        {"\x80\x02h\x05."s, "memo entry 5 is read before it is written"},
        {"\x80\x02t.", "needs a MARK"},
        {"\x80\x02.", "STOP with an empty stack"},
        {"\x80\x02K\x01u.", "needs a MARK"},
        {"\x80\x02(K\x01K\x02u.", "reads an empty stack"},
        {"\x80\x02K\x01K\x02K\x03s.", "SETITEM(S) on a int"},
        {"\x80\x02\x8a\x09", "does not fit 64 bits"},
        {"\x80\x02" "cos\nsys", "ends inside a GLOBAL name"},
        {"\x80\x02", "the pickle ends early"},
    };
    for (const auto& c : cases) {
        auto pickle = io::parsePickle(bytesOf(c.bytes), "bad.pkl");
        ASSERT_FALSE(pickle.ok()) << c.message;
        EXPECT_EQ(pickle.error().code, ErrorCode::BadInput);
        EXPECT_EQ(pickle.error().path, "bad.pkl");
        EXPECT_NE(pickle.error().message.find(c.message), std::string::npos)
            << pickle.error().message;
    }
    // A list that contains itself is fine to hold (the walkers bound their depth).
    const std::string cyclicBytes = "\x80\x02]q\x00h\x00" "a."s;
    auto cyclic = io::parsePickle(bytesOf(cyclicBytes), "cyc.pkl");
    ASSERT_TRUE(cyclic.ok());
    EXPECT_EQ(cyclic->root()->items[0], cyclic->root());
}

TEST(TorchScript, EveryTensorIsReadExactly)
{
    const json all = expected();
    for (const char* file : {"lstm_script.pt", "gru_trace.pt", "lstm_state_dict.pt",
                             "mlp_trace.pt"}) {
        SCOPED_TRACE(file);
        auto archive = io::readTorchArchive(kDir + file);
        ASSERT_TRUE(archive.ok()) << archive.error().userMessage();
        EXPECT_EQ(archive->hasCode, std::string(file) != "lstm_state_dict.pt");
        const json& tensors = all.at(file).at("tensors");
        std::map<std::string, const io::TorchTensor*> byName;
        for (const auto& t : archive->tensors)
            byName[t.name] = &t;
        for (const auto& want : tensors) {
            const std::string name = want.at("name");
            SCOPED_TRACE(name);
            ASSERT_EQ(byName.count(name), 1u);
            const io::TorchTensor& got = *byName.at(name);
            EXPECT_EQ(got.dtype, want.at("dtype").get<std::string>());
            EXPECT_EQ(got.shape, want.at("shape").get<std::vector<std::int64_t>>());
            ASSERT_TRUE(got.value.is_contiguous());
            EXPECT_TRUE(at::equal(got.value.to(at::kDouble),
                                  fromJson(want.at("values"), want.at("shape"))));
        }
    }
}

TEST(TorchScript, StridedAndSharedStoragesAreViewedAsTorchDoes)
{
    auto archive = io::readTorchArchive(kDir + "mlp_trace.pt");
    ASSERT_TRUE(archive.ok()) << archive.error().userMessage();
    const io::TorchTensor* table = nullptr;
    const io::TorchTensor* view = nullptr;
    for (const auto& t : archive->tensors) {
        if (t.name == "table")
            table = &t;
        if (t.name == "table_view")
            view = &t;
    }
    ASSERT_TRUE(table && view);
    // table_view = table[1:, ::2]: offset 4 and strides (4, 2) into table's storage.
    EXPECT_TRUE(at::equal(view->value, table->value.slice(0, 1).slice(1, 0, 4, 2)));
    EXPECT_EQ(archive->rootClass, "__torch__.Mlp");
    EXPECT_EQ(archive->moduleClasses.at("fc1"), "__torch__.torch.nn.modules.linear.Linear");
}

TEST(TorchScript, AnLstmOpensAsAGraphThatMatchesTorch)
{
    const json all = expected();
    for (const char* file : {"lstm_script.pt", "gru_trace.pt", "lstm_state_dict.pt"}) {
        SCOPED_TRACE(file);
        auto model = openModel(kDir + file);
        ASSERT_TRUE(model.ok()) << model.error().userMessage();
        const ModelSummary& s = (*model)->summary();
        const bool script = std::string(file) != "lstm_state_dict.pt";
        EXPECT_EQ(s.format, script ? "torchscript" : "torch.save");
        ASSERT_GE(s.notes.size(), 2u);
        if (script)
            EXPECT_EQ(s.notes[0], io::kTorchScriptTrustNote);
        EXPECT_EQ(s.notes[0].rfind("untrusted: ", 0), 0u);
        EXPECT_NE(s.notes[1].find("weight_ih_l0 float32"), std::string::npos) << s.notes[1];

        const json& rnn = all.at(file).at("rnn");
        const at::Tensor x = fromJson(rnn.at("input"), rnn.at("input_shape")).to(at::kFloat);
        exec::Executor executor((*model)->graph());
        auto out = executor.run({x});
        ASSERT_TRUE(out.ok()) << out.error().userMessage();
        const at::Tensor y = fromJson(rnn.at("output"), rnn.at("output_shape"));
        const at::Tensor h = fromJson(rnn.at("h_n"), rnn.at("h_n_shape"));
        ASSERT_EQ((*out)[0].sizes(), y.sizes());
        EXPECT_LE(((*out)[0].to(at::kDouble) - y).abs().max().item<double>(), 1e-6);
        EXPECT_LE(((*out)[1].to(at::kDouble) - h).abs().max().item<double>(), 1e-6);
    }
    // batch_first = True comes from the Final constants in the scripted LSTM's code.
    auto model = openModel(kDir + "lstm_script.pt");
    ASSERT_TRUE(model.ok());
    EXPECT_EQ((*model)->graph().metadata.at("bitlens.batch_first"), "True");
}

TEST(TorchScript, OtherModulesAreListedAndRefused)
{
    auto model = openModel(kDir + "mlp_trace.pt");
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.error().code, ErrorCode::Unsupported);
    EXPECT_EQ(model.error().path, kDir + "mlp_trace.pt");
    const std::string& m = model.error().message;
    EXPECT_EQ(m.rfind("TorchScript code is not run", 0), 0u) << m;
    // In pickle order: TorchScript writes a module's buffers before its submodules.
    EXPECT_NE(m.find("parameters listed: table float32 [3, 4], table_view float32 [2, 2], "
                     "halves float16 [3], steps int64 [3], fc1.weight float32 [4, 5], "
                     "fc1.bias float32 [4], fc2.weight float32 [2, 4], fc2.bias float32 [2]"),
              std::string::npos)
        << m;
}

TEST(TorchScript, CorruptArchivesNameTheFileAndTheReason)
{
    struct Case {
        const char* file;
        const char* reason;
    };
    const Case cases[] = {
        {"truncated.pt", "not a zip archive"},
        {"bad_opcode.pt", "data.pkl: unsupported pickle opcode 0xfe"},
        {"storage_past_end.pt",
         "tensor 'fc1.weight': storage '3' holds 200 elements of float32, more than the 80 "
         "bytes of its member"},
        {"view_past_end.pt",
         "tensor 'fc1.weight': shape [40, 5] at offset 0 reads element 199, past the end of "
         "its storage of 20 elements"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.file);
        auto model = openModel(kDir + c.file);
        ASSERT_FALSE(model.ok());
        EXPECT_EQ(model.error().code, ErrorCode::BadInput) << model.error().userMessage();
        EXPECT_EQ(model.error().path, kDir + c.file);
        EXPECT_FALSE(model.error().message.empty());
        EXPECT_NE(model.error().message.find(c.reason), std::string::npos)
            << model.error().message;
    }
}

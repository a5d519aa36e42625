// Hostile pickles that are small but expensive (found while fuzzing the TorchScript reader,
// issue #8): a chain of calls whose callable is a call, dicts shared at every level of a deep
// nest, many keys in one dict. Each must parse or be refused without recursion, a blow-up of
// work, or an allocation the bytes do not justify.

#include "corrupt_files.h"
#include "temp_dir.h"

#include "io/pickle.h"
#include "io/torchscript.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace bitlens;

namespace {

using Bytes = std::vector<std::uint8_t>;

void appendText(Bytes& b, const std::string& s) { b.insert(b.end(), s.begin(), s.end()); }

void shortString(Bytes& b, const std::string& s)
{
    b.push_back(0x8c);  // SHORT_BINUNICODE
    b.push_back(static_cast<std::uint8_t>(s.size()));
    appendText(b, s);
}

/// REDUCE applied to the result of REDUCE, `links` times, over GLOBAL m.f.
TEST(PickleLimits, LongChainOfCallsIsNotFollowedRecursively)
{
    Bytes b = {0x80, 2};
    appendText(b, "cm\nf\n");
    const std::size_t links = 200'000;
    for (std::size_t i = 0; i < links; ++i) {
        b.push_back(')');
        b.push_back('R');
    }
    b.push_back('.');
    auto pickle = io::parsePickle(b, "chain.pkl");
    ASSERT_TRUE(pickle.ok()) << pickle.error().userMessage();
    // The name of a call is followed 16 links deep, then given up (no stack overflow).
    EXPECT_EQ(pickle->root()->qualifiedName(), "");
    const io::PickleValue* v = pickle->root();
    for (int i = 0; i < 10; ++i)
        v = v->items[0];
    EXPECT_EQ(v->qualifiedName(), "");
    Bytes shortChain = {0x80, 2};
    appendText(shortChain, "cm\nf\n)R)R.");
    auto two = io::parsePickle(shortChain, "chain.pkl");
    ASSERT_TRUE(two.ok());
    EXPECT_EQ(two->root()->qualifiedName(), "m.f");
}

/// A dict set 60,000 times: Python's semantics (first place, last value) kept, in order.
TEST(PickleLimits, ManyKeysKeepPythonSemantics)
{
    Bytes b = {0x80, 2, '}', '('};
    const int keys = 30'000;
    for (int round = 0; round < 2; ++round)
        for (int k = 0; k < keys; ++k) {
            shortString(b, "k" + std::to_string(k));
            b.push_back('J');
            const std::int32_t value = round * keys + k;
            for (int i = 0; i < 4; ++i)
                b.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
        }
    b.push_back('u');
    b.push_back('.');
    auto pickle = io::parsePickle(b, "keys.pkl");
    ASSERT_TRUE(pickle.ok()) << pickle.error().userMessage();
    const io::PickleValue* root = pickle->root();
    ASSERT_EQ(root->items.size(), 2u * keys);
    EXPECT_EQ(root->items[0]->text, "k0");
    EXPECT_EQ(root->items[1]->integer, keys);  // the second value of k0
    EXPECT_EQ(root->items[2 * (keys - 1)]->text, "k" + std::to_string(keys - 1));
    ASSERT_NE(root->get("k123"), nullptr);
    EXPECT_EQ(root->get("k123")->integer, keys + 123);
}

/// 40 levels of dicts, each holding the next twice (through the memo): 2^40 paths in a few
/// hundred bytes. The archive reader stops after a bounded number of visits.
TEST(PickleLimits, SharedDictsNestedDeepAreRefusedNotWalked)
{
    Bytes pkl = {0x80, 2, '}', 'q', 0};  // the innermost dict, memo 0
    const int levels = 40;
    for (int level = 1; level <= levels; ++level) {
        pkl.push_back('}');
        pkl.push_back('(');
        shortString(pkl, "a");
        pkl.push_back('h');
        pkl.push_back(static_cast<std::uint8_t>(level - 1));
        shortString(pkl, "b");
        pkl.push_back('h');
        pkl.push_back(static_cast<std::uint8_t>(level - 1));
        pkl.push_back('u');
        pkl.push_back('q');
        pkl.push_back(static_cast<std::uint8_t>(level));
    }
    pkl.push_back('.');
    ASSERT_TRUE(io::parsePickle(pkl, "nest.pkl").ok());

    test::TempDir dir;
    const std::string path = dir.file("nest.pt");
    const Bytes zip = test::buildZip({{"nest/data.pkl", pkl, false},
                                      {"nest/byteorder", Bytes{'l', 'i', 't', 't', 'l', 'e'}, false}});
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(zip.data()), static_cast<std::streamsize>(zip.size()));
    auto archive = io::readTorchArchive(path);
    ASSERT_FALSE(archive.ok());
    EXPECT_EQ(archive.error().path, path);
    EXPECT_NE(archive.error().message.find("takes more than 1000000 steps"),
              std::string::npos)
        << archive.error().message;
}

} // namespace

// libFuzzer target for the unpickler alone (parsePickle on raw bytes): any bytes give a value
// tree or an Error naming the source; no opcode sequence may crash it, recurse without bound or
// allocate more than the bytes justify. The tree is walked (bounded) as the archive reader
// walks it: names of callables, dict lookups.

#include "fuzz_common.h"
#include "io/pickle.h"

#include <vector>

namespace {
using bitlens::io::PickleValue;

/// Visits at most `budget` values (the memo allows shared and cyclic references).
std::uint64_t walk(const PickleValue* root)
{
    std::uint64_t sum = 0;
    std::size_t budget = 100'000;
    std::vector<const PickleValue*> todo{root};
    while (!todo.empty() && budget-- > 0) {
        const PickleValue* v = todo.back();
        todo.pop_back();
        sum += v->qualifiedName().size() + v->text.size() + v->name.size();
        if (v->get("_metadata"))
            ++sum;
        for (const PickleValue* item : v->items)
            if (todo.size() < 100'000)
                todo.push_back(item);
        if (v->state && todo.size() < 100'000)
            todo.push_back(v->state);
    }
    return sum;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    auto pickle = bitlens::io::parsePickle({data, size}, "data.pkl");
    if (!pickle.ok()) {
        bitlens::fuzz::checkError(pickle.error(), "data.pkl");
        return 0;
    }
    if (!pickle->root()) {
        std::fprintf(stderr, "parsePickle succeeded without a root\n");
        std::abort();
    }
    volatile std::uint64_t sum = walk(pickle->root());
    (void)sum;
    return 0;
}

// libFuzzer target for the ONNX reader (readOnnx on bytes). The reader must turn any bytes
// into a graph that validates or an Error naming the file; it must never crash, throw, or
// allocate more than the input justifies. Accepted graphs are written and read back, and the
// second read must succeed.
//
// Built with -DBITLENS_FUZZ=ON (see tests/fuzz/README.md); scripts/fuzz runs it.

#include "io/onnx.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::vector<std::uint8_t> bytes(data, data + size);
    auto graph = bitlens::io::readOnnx(bytes, "fuzz.onnx");
    if (!graph.ok()) {
        if (graph.error().path != "fuzz.onnx" || graph.error().message.empty())
            std::abort();
        return 0;
    }
    if (!graph->validate("fuzz.onnx").ok())
        std::abort();
    // Writing runs shape inference (a traced run) only for outputs without a shape; keep
    // that out of the fuzzer's way by giving each output a placeholder shape.
    for (auto& output : graph->outputs)
        if (output.shape.empty())
            output.shape = {-1};
    auto written = bitlens::io::writeOnnx(*graph);
    if (!written.ok())
        return 0; // e.g. an initializer dtype the writer does not export
    if (!bitlens::io::readOnnx(*written, "fuzz-rewritten.onnx").ok())
        std::abort();
    return 0;
}

// ONNX ops and opset forms against onnxruntime: tests/data/onnx/make_onnx_op_cases.py builds one
// tiny model per op and opset form (7 through 22), runs it in onnxruntime on random inputs and
// saves the outputs; BitLens reads each model (converting older opsets on import), runs it and
// must agree within 1e-5 relative (exactly for integer and bool outputs). The converted graph
// is then written back as ONNX, and onnxruntime must give the same outputs for that file too.

#include "exec/executor.h"
#include "io/dataset.h"
#include "io/onnx.h"
#include "python_oracle.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace bitlens;

namespace {

/// Fresh per-test directory under the temp dir.
std::string scratchDir(const std::string& name)
{
    const auto dir = std::filesystem::temp_directory_path() /
                     ("bitlens_onnx_ops_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

std::vector<std::string> readLines(const std::string& path)
{
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        if (!line.empty())
            lines.push_back(line);
    return lines;
}

/// Empty when `got` matches `want` (1e-5 relative, 1e-6 absolute; exact for integer / bool).
std::string mismatch(const at::Tensor& got, const at::Tensor& want)
{
    if (!got.defined())
        return "no output";
    if (got.sizes() != want.sizes())
        return "shape " + c10::str(got.sizes()) + ", onnxruntime " + c10::str(want.sizes());
    if (!want.is_floating_point()) {
        if (!at::equal(got.to(at::kCPU).to(want.scalar_type()), want))
            return "integer values differ";
        return {};
    }
    const at::Tensor g = got.to(at::kCPU).to(at::kDouble);
    const at::Tensor w = want.to(at::kDouble);
    if (!at::allclose(g, w, 1e-5, 1e-6))
        return "max |diff| " + std::to_string((g - w).abs().max().item<double>());
    return {};
}

/// Runs every case in `dir`/cases.txt; `written` gets the path of each converted graph written
/// back as ONNX. Returns the number of cases run.
int runCases(const std::string& dir, std::vector<std::string>& written)
{
    int count = 0;
    for (const auto& name : readLines(dir + "/cases.txt")) {
        SCOPED_TRACE(name);
        ++count;
        const auto graph = io::readOnnxFile(dir + "/" + name + ".onnx");
        if (!graph.ok()) {
            ADD_FAILURE() << graph.error().userMessage();
            continue;
        }
        std::vector<at::Tensor> inputs;
        for (std::size_t i = 0; i < graph->inputs.size(); ++i) {
            auto t = io::readNpy(dir + "/" + name + ".in" + std::to_string(i) + ".npy");
            if (!t.ok()) {
                ADD_FAILURE() << t.error().userMessage();
                return count;
            }
            inputs.push_back(*t);
        }
        exec::Executor executor(*graph);
        const auto outputs = executor.run(inputs);
        if (!outputs.ok()) {
            ADD_FAILURE() << outputs.error().userMessage();
            continue;
        }
        if (outputs->size() != graph->outputs.size()) {
            ADD_FAILURE() << outputs->size() << " outputs for " << graph->outputs.size();
            continue;
        }
        for (std::size_t i = 0; i < outputs->size(); ++i) {
            const auto want = io::readNpy(dir + "/" + name + ".out" + std::to_string(i) + ".npy");
            if (!want.ok()) {
                ADD_FAILURE() << want.error().userMessage();
                continue;
            }
            const std::string why = mismatch((*outputs)[i], *want);
            EXPECT_TRUE(why.empty()) << "output " << graph->outputs[i].name << ": " << why;
        }
        const std::string back = dir + "/" + name + ".bitlens.onnx";
        if (auto r = io::writeOnnxFile(*graph, back); r.ok())
            written.push_back(name);
        else
            ADD_FAILURE() << "writing the converted graph: " << r.error().userMessage();
    }
    return count;
}

// Loads each written file in onnxruntime and compares with the original file's outputs.
constexpr const char* kRecheck = R"(
import sys, numpy as np, onnxruntime as ort
d = sys.argv[1]
bad = 0
for name in open(d + "/written.txt").read().split():
    try:
        s = ort.InferenceSession(f"{d}/{name}.bitlens.onnx", providers=["CPUExecutionProvider"])
        feeds = {i.name: np.load(f"{d}/{name}.in{k}.npy") for k, i in enumerate(s.get_inputs())}
        outs = s.run(None, feeds)
        for k, o in enumerate(outs):
            want = np.load(f"{d}/{name}.out{k}.npy")
            if o.shape != want.shape or not np.allclose(o, want, rtol=1e-5, atol=1e-6):
                print(name, "output", k, "differs"); bad += 1
    except Exception as e:
        print(name, "fails in onnxruntime:", str(e).splitlines()[0]); bad += 1
sys.exit(1 if bad else 0)
)";

} // namespace

TEST(OnnxOps, EveryOpAndOpsetFormMatchesOnnxruntime)
{
    BITLENS_PYTHON_OR_SKIP(python);
    const std::string dir = scratchDir("cases");
    std::string log;
    const std::string script = std::string(BITLENS_TEST_DATA) + "/onnx/make_onnx_op_cases.py";
    ASSERT_EQ(std::system(("'" + python + "' '" + script + "' '" + dir + "' > '" + dir +
                           "/make.log' 2>&1")
                              .c_str()),
              0)
        << [&] {
               const auto lines = readLines(dir + "/make.log");
               return lines.empty() ? std::string("no output") : lines.back();
           }();
    std::vector<std::string> written;
    const int count = runCases(dir, written);
    EXPECT_GE(count, 100);
    RecordProperty("cases", count);

    // The converted graphs are ONNX that onnxruntime runs to the same outputs.
    {
        std::ofstream out(dir + "/written.txt");
        for (const auto& name : written)
            out << name << "\n";
    }
    EXPECT_EQ(bitlens::test::runPython(python, dir, kRecheck, "'" + dir + "'", log), 0) << log;
    std::filesystem::remove_all(dir);
}

// libFuzzer target for the TorchScript / torch.save reader (readTorchArchive on a file, then
// graphFromTorchArchive, then openModel as a user's .pt goes): any bytes give a model or an
// Error naming the file; every tensor read must lie inside its storage, and no pickle may make
// the reader allocate more than the file justifies.

#include "fuzz_common.h"
#include "io/torchscript.h"
#include "model/model.h"
#include "model/torch_rnn.h"

#include <ATen/ATen.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    static bitlens::fuzz::ScratchCleanup cleanup;
    const std::string path = bitlens::fuzz::writeScratch("model.pt", data, size);
    auto archive = bitlens::io::readTorchArchive(path);
    if (!archive.ok()) {
        bitlens::fuzz::checkError(archive.error(), path);
        return 0;
    }
    volatile std::uint64_t sum = 0;
    for (const auto& t : archive->tensors)
        if (t.value.defined())
            sum = sum + bitlens::fuzz::touch(t.value.data_ptr(), t.value.nbytes());
    (void)sum;
    (void)bitlens::io::describeTensors(*archive);
    auto graph = bitlens::model::graphFromTorchArchive(*archive);
    if (!graph.ok()) {
        bitlens::fuzz::checkError(graph.error(), path);
        return 0;
    }
    // Only archives that make a graph go on to openModel (its shape trace runs the executor).
    auto model = bitlens::openModel(path);
    if (!model.ok())
        bitlens::fuzz::checkError(model.error(), path);
    return 0;
}

#include "exec/device.h"

#include "kernels/fake_quant.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <sstream>

namespace bitlens::exec {

bool cudaAvailable() { return at::hasCUDA() && at::detail::getCUDAHooks().deviceCount() > 0; }

std::vector<std::string> availableDevices()
{
    std::vector<std::string> devices{"cpu"};
    if (cudaAvailable())
        devices.emplace_back("cuda");
    return devices;
}

std::string deviceDescription(const std::string& device)
{
    std::ostringstream out;
    if (device == "cuda") {
        if (!cudaAvailable())
            return "CUDA (not available)";
        const std::string name = kernels::cudaDeviceName();
        out << "CUDA: " << (name.empty() ? "GPU" : name);
        return out.str();
    }
    out << "CPU (" << at::get_num_threads() << " threads)";
    return out.str();
}

} // namespace bitlens::exec

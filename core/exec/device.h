#pragma once
// Compute devices, described without LibTorch types so Qt code can show them.

#include <string>
#include <vector>

namespace bitlens::exec {

/// True when LibTorch's CUDA backend is loaded and a GPU is visible.
bool cudaAvailable();
/// "cpu" or "cuda" names the user can pass to --device; "cuda" only when available.
std::vector<std::string> availableDevices();
/// One line for a status bar: "CPU (2 threads)" or "CUDA: NVIDIA H200 (139 GiB)".
std::string deviceDescription(const std::string& device);

} // namespace bitlens::exec

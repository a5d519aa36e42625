#pragma once
// Precompiled header of libbitlens_core and the C++ tests: LibTorch's ATen costs ~20 s per
// translation unit when parsed from scratch, about one second from this header's PCH.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#pragma once
// OpenMP's wait policy for the BitLens programs (bitlens-cli, the window).
//
// With OpenMP's default policy each worker thread of LibTorch's libgomp spins ~300,000 times
// after every parallel region before it sleeps. A model run is thousands of short regions, so
// on a busy machine the spinning takes cores from everything else and from our own next
// region: opening SmolLM2-135M took 5-6 s wall instead of 2.1 s on the shared 2-core VM.
// libgomp reads OMP_WAIT_POLICY once, in a constructor that runs when the library is loaded,
// before main: a setenv() in main comes too late. So main calls usePassiveOpenMp() first; it
// sets OMP_WAIT_POLICY=passive and re-executes the program image, whose libgomp then reads it
// (OMP_DISPLAY_ENV=verbose shows GOMP_SPINCOUNT = '0'). A policy the user set is kept, and
// when the re-exec fails the program runs on with the default.

#include <cstdlib>
#include <unistd.h>

namespace bitlens::exec {

/// Call first thing in main, before anything touches LibTorch or Qt. Returns only when the
/// policy was already set (by the user, or by the re-exec) or the re-exec failed.
inline void usePassiveOpenMp(char** argv)
{
    if (std::getenv("OMP_WAIT_POLICY") != nullptr)
        return;
    if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    // Still here: the exec failed (no /proc); run on with the policy libgomp already read.
}

} // namespace bitlens::exec

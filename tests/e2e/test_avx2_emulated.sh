#!/usr/bin/env bash
# End-to-end on an AVX2-only CPU, emulated: qemu-user (Debian's qemu-user, installed by
# scripts/bootstrap) runs our binaries and onnxruntime with the CPUID of an AMD EPYC-Rome
# (AVX2, FMA, F16C; no AVX-512, no VNNI), so the paths most desktops take are exercised on any
# x86-64 machine, AVX-512 CI runners included:
#  - BitLens detects avx2 as the CPU's highest level and its kernel tests pass at every level
#    that CPU has (scalar, avx2);
#  - onnxruntime's AVX2 kernels (MLAS picks them by CPUID) agree with BitLens on the static-int8
#    QDQ export of fashion-cnn within the bound derived from flipped codes (ort_check.py agree),
#    and its fused u8 x s8 kernels within the no-VNNI bound; a reduce-range export (7-bit
#    weights) within the VNNI bound, and BitLens's own AVX2 row runs it with vpmaddubsw.
# Usage: test_avx2_emulated.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ort="$(dirname "${BASH_SOURCE[0]}")/ort_check.py"
unit="$(dirname "$cli")/bitlens_unit_tests"
data=/usr/share/datasets/fashion-mnist
cpu=EPYC-Rome

if ! command -v qemu-x86_64 > /dev/null; then
  echo "FAIL: qemu-x86_64 is missing (scripts/bootstrap installs Debian's qemu-user)"
  exit 1
fi
emulate() { qemu-x86_64 -cpu "$cpu" "$@" 2> >(grep -v "TCG doesn't support" >&2); }

# The emulated CPU really is AVX2-only: numpy's own cpuid says so.
check cpuid-avx2-only 0 emulate "$py" -c "
from numpy._core._multiarray_umath import __cpu_features__ as f
assert f['AVX2'] and f['FMA3'] and f['F16C'] and not f['AVX512F'], f"

# Kernel tests (every dispatching entry point at every level, against the scalar twins).
check unit-kernels 0 emulate "$unit" \
  --gtest_filter='Isa/*AtIsa*:IsaLevels*:Isa/OwnKernels*:Isa/OwnKernel4Bit*:Isa/OwnKernelInt8.Equals*'
grep -E "tests from .* ran|PASSED|FAILED" "$tmp/out" | tail -3
expect unit-levels-are-avx2 grep -q "/avx2 (" "$tmp/out"
expect unit-no-avx512-level test -z "$(grep -E '/avx512 \(|/avx_vnni \(' "$tmp/out")"

# onnxruntime on the AVX2 CPU vs BitLens (natively; its result does not depend on the CPU).
check export-static-int8 0 "$cli" export fashion-cnn --scheme static-int8 --format onnx \
  --out "$tmp/s.onnx" --limit 200
"$py" "$ort" batch "$tmp/s.onnx" $data/t10k-images-idx3-ubyte.gz 128 "$tmp/ort" "$tmp/x.npy"
"$py" "$ort" probe "$tmp/s.onnx" "$tmp/probe.onnx"
check run-probe 0 "$cli" run "$tmp/probe.onnx" --input "$tmp/x.npy" --out "$tmp/run"
check ort-avx2-vs-bitlens 0 emulate "$py" "$ort" agree "$tmp/probe.onnx" "$tmp/x.npy" "$tmp/run"
cat "$tmp/out"
check ort-avx2-optimized 0 emulate "$py" "$ort" optimized "$tmp/s.onnx" "$tmp/x.npy" \
  "$tmp/run/logits.npy"
cat "$tmp/out"
expect ort-saw-no-vnni grep -q "no VNNI" "$tmp/out"

# reduce-range (weight codes in [-64, 64]): onnxruntime's fused AVX2 kernels cannot saturate,
# so they agree with BitLens as closely as VNNI kernels do (the strict bound), and BitLens's
# own AVX2 row runs the layers with vpmaddubsw (named in the report).
check export-reduce-range 0 "$cli" export fashion-cnn --scheme static-int8:reduce-range=true \
  --format onnx --out "$tmp/r.onnx" --limit 200
"$py" "$ort" probe "$tmp/r.onnx" "$tmp/rprobe.onnx"
check run-reduce-range 0 "$cli" run "$tmp/rprobe.onnx" --input "$tmp/x.npy" --out "$tmp/rrun"
check ort-avx2-optimized-reduce-range 0 emulate "$py" "$ort" optimized "$tmp/r.onnx" \
  "$tmp/x.npy" "$tmp/rrun/logits.npy" strict
cat "$tmp/out"
# bitlens-cli re-executes itself through /proc/self/exe to set OMP_WAIT_POLICY
# (exec/omp_env.h), which would leave qemu-user and run natively: set it here. (~60 s.)
export OMP_WAIT_POLICY=passive
check bench-reduce-range 0 emulate "$cli" bench fashion-cnn \
  --scheme static-int8:reduce-range=true,calib=64 --batch 16 --json
unset OMP_WAIT_POLICY
expect bench-ran-emulated grep -q '"isa": "avx2"' "$tmp/out"
expect bench-names-vpmaddubsw grep -q "avx2 int8 gemm (u8 x s8 -> s32 with vpmaddubsw" "$tmp/out"

finish

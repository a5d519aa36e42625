#!/usr/bin/env bash
# End-to-end: issue #49's probe of hostile input, rerun on every test run (tests/e2e/probe_hostile.py:
# mutated config.json, tokenizer files, safetensors headers and index files, GGUF and ONNX files,
# kill -9 during a folder export, concurrent exports into one folder, odd output paths). Fails on
# any crash, hang, memory kill, exit code outside the contract, message without the path, mixed
# folder or replaced non-regular file, printing each finding with what reproduces it.
# BITLENS_PROBE_COUNT sets the cases per mutation class (default 24; a long local run: 300).
# Usage: test_probe_hostile.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"

if ! "$py" -c "import onnx, numpy, safetensors" 2> /dev/null; then
  echo "FAIL: onnx, numpy or safetensors is missing from $py (scripts/bootstrap installs them)"
  exit 1
fi
# First that the probe can fail (synthetic runs, a CLI that replaces its outputs), then the probe.
"$py" "$here/probe_hostile.py" "$cli" --self-test || exit 1
"$py" "$here/probe_hostile.py" "$cli"

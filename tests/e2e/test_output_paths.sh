#!/usr/bin/env bash
# End-to-end: output paths (--report, --out) are checked before any work (io::checkWritable,
# issue #49 items 1 and 8). A missing folder exits 3 (bad input); a folder where a file is
# meant, a character device, a FIFO, a dangling symbolic link or a loop exits 5 (cannot be
# written or replaced); both at once, naming the path (nothing on stdout, one line on stderr),
# and the node stays what it was. A symbolic link to a file is written at its destination and
# stays a link.
# Usage: test_output_paths.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Refused before the model opens: exit EXIT, the reason naming the path, and no work done (no
# report table on stdout, no progress or zoo build on stderr, only the error line).
refused() { # refused NAME EXIT REASON COMMAND...
  local name=$1 code=$2 reason=$3
  shift 3
  check "$name" "$code" timeout 60 "$@"
  expect "$name-reason" grep -qF -- "$reason" "$tmp/err"
  expect "$name-no-work" test ! -s "$tmp/out" -a "$(wc -l < "$tmp/err")" -eq 1
}
q=(quantize fashion-cnn --scheme dynamic-int8 --limit 100)
x=(export fashion-cnn --scheme dynamic-int8 --format onnx --limit 100)

# A missing folder: found before the quantization, not after it.
missing="cannot write: folder $tmp/missing-dir does not exist"
refused report-missing-dir 3 "error: $tmp/missing-dir/r.json: $missing" \
  "$cli" "${q[@]}" --report "$tmp/missing-dir/r.json"
expect report-missing-dir-not-made test ! -e "$tmp/missing-dir"
refused out-missing-dir 3 "error: $tmp/missing-dir/m.onnx: cannot write" \
  "$cli" "${x[@]}" --out "$tmp/missing-dir/m.onnx"
refused compare-missing-dir 3 "cannot write: folder" \
  "$cli" compare fashion-cnn --schemes fp16 --limit 100 --report "$tmp/missing-dir/c.json"
refused sensitivity-missing-dir 3 "cannot write: folder" \
  "$cli" sensitivity fashion-cnn --scheme w4-int4 --limit 100 --report "$tmp/missing-dir/s.json"
refused report-is-dir 5 "error: $tmp: is a directory, expected a file" \
  "$cli" "${q[@]}" --report "$tmp"

# A character device (a copy of /dev/null) stays a device: a rename over it would leave a
# regular file in its place.
if [ "$(id -u)" = 0 ] && mknod "$tmp/null" c 1 3 2> /dev/null; then
  refused report-chr 5 "error: $tmp/null: is a character device, not a regular file" \
    "$cli" "${q[@]}" --report "$tmp/null"
  expect report-chr-stays test -c "$tmp/null"
  refused out-chr 5 "is a character device" "$cli" "${x[@]}" --out "$tmp/null"
  expect out-chr-stays test -c "$tmp/null"
  ln -s "$tmp/null" "$tmp/to-null.json"
  refused report-link-to-chr 5 "is a character device" "$cli" "${q[@]}" --report "$tmp/to-null.json"
  expect report-link-to-chr-stays test -c "$tmp/null" -a -L "$tmp/to-null.json"
else
  # Not root: /dev/null itself (this user cannot replace it, so a regression fails, not harms).
  refused report-dev-null 5 "error: /dev/null: is a character device, not a regular file" \
    "$cli" "${q[@]}" --report /dev/null
  expect report-dev-null-stays test -c /dev/null
fi

# A FIFO: never opened (that would block), never replaced.
mkfifo "$tmp/pipe.json" "$tmp/pipe.onnx"
refused report-fifo 5 "error: $tmp/pipe.json: is a FIFO (named pipe), not a regular file" \
  "$cli" "${q[@]}" --report "$tmp/pipe.json"
expect report-fifo-stays test -p "$tmp/pipe.json"
refused out-fifo 5 "is a FIFO" "$cli" "${x[@]}" --out "$tmp/pipe.onnx"
expect out-fifo-stays test -p "$tmp/pipe.onnx"
refused run-out-fifo 5 "is a FIFO" \
  "$cli" run fashion-cnn --input "$tmp/x.npy" --out "$tmp/pipe.json"

# Symbolic links: a dangling one and a loop are refused and stay.
ln -s "$tmp/nowhere/m.onnx" "$tmp/dangling.onnx"
refused out-dangling 5 "is a symbolic link to $tmp/nowhere/m.onnx, which does not exist" \
  "$cli" "${x[@]}" --out "$tmp/dangling.onnx"
expect out-dangling-stays test -L "$tmp/dangling.onnx"
ln -s "$tmp/loop-b.onnx" "$tmp/loop-a.onnx"
ln -s "$tmp/loop-a.onnx" "$tmp/loop-b.onnx"
refused out-loop 5 "Too many levels of symbolic links" "$cli" "${x[@]}" --out "$tmp/loop-a.onnx"
expect out-loop-stays test -L "$tmp/loop-a.onnx" -a -L "$tmp/loop-b.onnx"

# The window (bitlens, beside bitlens-cli when built with the GUI) checks --screenshot and
# --export the same way before the model opens, exiting at once, the FIFO untouched.
gui="$(dirname "$cli")/bitlens"
if [ -x "$gui" ]; then
  # Qt warns on stderr without a runtime folder; the check wants the error line alone.
  mkdir -m 700 "$tmp/xdg"
  export XDG_RUNTIME_DIR="$tmp/xdg"
  mkfifo "$tmp/pipe.png"
  refused gui-screenshot-missing-dir 3 "error: $tmp/missing-dir/s.png: $missing" \
    env QT_QPA_PLATFORM=offscreen "$gui" fashion-cnn --screenshot "$tmp/missing-dir/s.png"
  refused gui-screenshot-fifo 5 "error: $tmp/pipe.png: is a FIFO" \
    env QT_QPA_PLATFORM=offscreen "$gui" fashion-cnn --screenshot "$tmp/pipe.png"
  expect gui-screenshot-fifo-stays test -p "$tmp/pipe.png"
  refused gui-export-fifo 5 "error: $tmp/pipe.onnx: is a FIFO" \
    env QT_QPA_PLATFORM=offscreen "$gui" fashion-cnn --scheme dynamic-int8 --export "$tmp/pipe.onnx"
fi

# A symbolic link to a file is written at its destination; the link stays a link.
mkdir "$tmp/real"
echo old > "$tmp/real/r.json"
echo old > "$tmp/real/m.onnx"
ln -s real/r.json "$tmp/r.json"
ln -s real/m.onnx "$tmp/m.onnx"
check quantize-report-link 0 "$cli" "${q[@]}" --quiet --report "$tmp/r.json"
expect report-link-stays test -L "$tmp/r.json"
expect report-link-written report "$tmp/real/r.json" "assert 'scheme' in d, list(d)"
check export-out-link 0 "$cli" "${x[@]}" --quiet --out "$tmp/m.onnx"
expect out-link-stays test -L "$tmp/m.onnx"
expect out-link-written test "$(stat -c %s "$tmp/real/m.onnx")" -gt 1000
expect no-staging-left test -z "$(find "$tmp" -name '.*.tmp*')"

finish

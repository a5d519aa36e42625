#!/usr/bin/env bash
# End-to-end: export fashion-cnn as ONNX QDQ (static-int8, dynamic-int8, w4-int4), run the files
# with onnxruntime, and hold them to BitLens' own numbers: ORT top-1 within 0.2 points of the
# report's quantized top-1 (issue #6), ORT logits equal to `bitlens-cli run` on the same file,
# --verify passing; --verify of an encoder (minilm-l6) and a language model (kjv-llama); failed
# writes leave no file; what ONNX cannot hold exits 4.
# Usage: test_export_onnx.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ort="$(dirname "${BASH_SOURCE[0]}")/ort_check.py"
data=/usr/share/datasets/fashion-mnist
limit=2000   # the full 10k set gives the same verdicts; this keeps the test under a minute

if ! "$py" -c "import onnxruntime" 2> /dev/null; then
  echo "FAIL: onnxruntime is missing from $py (scripts/bootstrap installs it)"
  exit 1
fi

# w4-int4:method=awq: AWQ's per-channel input scale travels as a Div before each dense layer.
for scheme in static-int8 dynamic-int8 w4-int4 w4-int4:method=awq; do
  f=${scheme//[:=]/_}
  out="$tmp/$f.onnx"
  # The full analysis (--report) for static-int8, the issue's must-hold; the others compare
  # with verify's in-app metric, the same computation as the report's metric.quantized.
  extra=()
  [ $scheme = static-int8 ] && extra=(--report "$tmp/report.json")
  check "export-$scheme" 0 "$cli" export fashion-cnn --scheme $scheme --format onnx --out "$out" \
    --verify --limit $limit --json "${extra[@]}"
  cp "$tmp/out" "$tmp/$f.json"
  # 8-bit int8 weights with u8 activations: the note on onnxruntime's saturation without VNNI.
  case $scheme in
    static-int8|dynamic-int8)
      expect "export-$scheme-advice" grep -q "note: onnxruntime's u8 x s8 kernels .*reduce-range=true" "$tmp/err" ;;
    *) expect "export-$scheme-no-advice" test -z "$(grep '^note: onnxruntime' "$tmp/err")" ;;
  esac
  expect "export-$scheme-json" report "$tmp/$f.json" "
e=d; v=e['verify']
assert e['format']=='onnx' and e['path']=='$out' and e['bytes']>0, e
assert v['ok'] and v['weights_mismatched']==0 and v['samples']==$limit, v
assert v['max_abs_diff_same_rounding']==0 and v['metric_app'] is not None, v
assert e['bytes'] < 0.3*1687720, e['bytes']
"
  # onnxruntime's top-1 on the same samples, in the same batches of 256.
  ort_top1=$("$py" "$ort" top1 "$out" $data/t10k-images-idx3-ubyte.gz \
    $data/t10k-labels-idx1-ubyte.gz $limit 256)
  # Without VNNI, MLAS's fused u8 x s8 kernels can saturate (measured on an AVX2 EPYC: 0.3
  # points of top-1 on 10k images); with it they are exact up to requantization rounding.
  tol=$("$py" -c "import sys; sys.path.insert(0, '$(dirname "$ort")'); import ort_check; print(0.002 if ort_check.has_vnni() else 0.006)")
  expect "ort-top1-$scheme" report "$tmp/$f.json" "
q=d['verify']['metric_app']; o=float('$ort_top1')
assert abs(o-q) <= $tol, ('onnxruntime top-1', o, 'BitLens', q, 'tolerance', $tol)
"
  # ORT vs BitLens' executor on the exported file, one batch of 64, with every QuantizeLinear
  # output exposed (ort_check.py probe): the codes agree but for one-step flips on rounding
  # boundaries (the runtimes' float kernels round differently on AVX2 and AVX-512 CPUs), and
  # the logits by exactly what those flips give; ORT's fused integer kernels are held to a
  # bound that depends on the CPU (VNNI or 16-bit saturation).
  "$py" "$ort" batch "$out" $data/t10k-images-idx3-ubyte.gz 64 "$tmp/ort" "$tmp/x.npy"
  "$py" "$ort" probe "$out" "$tmp/probe-$f.onnx"
  check "run-$scheme" 0 "$cli" run "$tmp/probe-$f.onnx" --input "$tmp/x.npy" \
    --out "$tmp/run-$f"
  check "ort-vs-bitlens-$scheme" 0 "$py" "$ort" agree "$tmp/probe-$f.onnx" "$tmp/x.npy" \
    "$tmp/run-$f"
  cat "$tmp/out"
  check "ort-optimized-vs-bitlens-$scheme" 0 "$py" "$ort" optimized "$out" "$tmp/x.npy" \
    "$tmp/run-$f/logits.npy"
  cat "$tmp/out"
done

# The report of static-int8 carries the export object and the same metric as verify.
expect static-report report "$tmp/report.json" "
e=d['export']; v=e['verify']
assert e['format']=='onnx' and v['ok'] and abs(v['metric_app']-d['metric']['quantized']) < 1e-12, e
assert e['bytes'] < 0.3*d['size_bytes']['float'], (e['bytes'], d['size_bytes'])"

# The 4-bit file is smaller than the int8 one (1,687,720 bytes of float weights above).
expect sizes report "$tmp/w4-int4.json" "
import json; s=json.load(open('$tmp/static-int8.json'))
assert d['bytes'] < 0.6*s['bytes'], (d['bytes'], s['bytes'])"

# quantize --out writes the export too (format from the extension); the report says so.
check quantize-out 0 "$cli" quantize fashion-cnn --scheme static-w4a8:calib=300 --limit 300 \
  --out "$tmp/w4a8.onnx" --report "$tmp/w4a8.json"
expect quantize-out-report report "$tmp/w4a8.json" "
e=d['export']; assert e['format']=='onnx' and e['opset']==21 and e['verify'] is None, e"
expect quantize-out-file test -s "$tmp/w4a8.onnx"

# --verify of sequence models (issue #37 item 2), on the data their metric uses, few windows:
# minilm-l6 (an encoder fed input_ids and attention_mask, as its graph declares) compares the
# mean-pooled embeddings; kjv-llama (a language model) the logits, top-1 per token, perplexity
# and KL divergence. Both must print their figures and pass (it exited 4 before: "verification
# runs models with one input" for minilm; no language-model figures for kjv-llama).
if "$cli" zoo path minilm-l6 --quiet > /dev/null 2>&1; then
  check minilm-verify 0 "$cli" export minilm-l6 --scheme dynamic-int8 --format onnx \
    --out "$tmp/minilm.onnx" --verify --limit 4 --seq-len 64
  cat "$tmp/out"
  expect minilm-verify-figures grep -qE "^verify +ok: onnx file vs in-app model on 4 samples: \
([0-9]+)/\\1 quantized weights identical; max \|diff\| 0 with the in-app rounding .*; embedding \
cosine file vs in-app [01]\.?[0-9]* \(min [01]" "$tmp/out"
else
  skip "minilm-l6: not built (offline? bitlens-cli zoo build minilm-l6)"
fi
check kjv-llama-verify 0 "$cli" export kjv-llama --scheme dynamic-int8 --format onnx \
  --out "$tmp/kjv.onnx" --verify --limit 2 --seq-len 64 --json
cp "$tmp/out" "$tmp/kjv.json"
expect kjv-llama-verify-json report "$tmp/kjv.json" "
v = d['verify']
assert v['ok'] and v['task'] == 'lm' and v['samples'] == 2, v
assert v['weights_mismatched'] == 0 and v['max_abs_diff_same_rounding'] == 0, v
assert v['tokens'] == 2 * 63 and v['top1_positions'] == 2 * 64, v
assert v['metric_name'] == 'perplexity' and 1 < v['perplexity_app'] < 2048, v
assert abs(v['perplexity_file'] / v['perplexity_app'] - 1) <= v['metric_tolerance'], v
assert 0 <= v['mean_kld'] < 1e-3 and v['same_top1_rate'] >= 0.98, v
assert 'perplexity' in v['message'] and 'mean KLD' in v['message'], v['message']
"

# Writes that fail leave nothing: a missing folder is bad input (3), a read-only one a runtime
# failure (5; root may write anywhere, so that half runs for other users only).
check missing-folder 3 "$cli" export fashion-cnn --scheme w4-int4 --format onnx \
  --out "$tmp/no/such/m.onnx" --limit 100
expect missing-folder-nofile test ! -e "$tmp/no"
mkdir "$tmp/taken.onnx"
check rename-fails 5 "$cli" export fashion-cnn --scheme w4-int4 --format onnx \
  --out "$tmp/taken.onnx" --limit 100
expect rename-fails-notemp test -z "$(ls -A "$tmp" | grep '\.tmp')"
if [ "$(id -u)" != 0 ]; then
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  check readonly-folder 5 "$cli" export fashion-cnn --scheme w4-int4 --format onnx \
    --out "$tmp/ro/m.onnx" --limit 100
  expect readonly-nofile test -z "$(ls -A "$tmp/ro")"
fi

# What ONNX cannot hold, and formats not written yet: exit 4 before any work, naming the scheme.
check nf4-onnx 4 "$cli" export fashion-cnn --scheme w4-nf4 --format onnx --out "$tmp/nf4.onnx"
expect nf4-message grep -q "scheme w4-nf4 cannot be exported to ONNX" "$tmp/err"
check llm-int8-onnx 4 "$cli" export fashion-cnn --scheme llm-int8 --format onnx --out "$tmp/l.onnx"
check gguf-not-yet 4 "$cli" export fashion-cnn --scheme static-int8 --format gguf --out "$tmp/m.gguf"
check safetensors-nf4 4 "$cli" quantize fashion-cnn --scheme w4-nf4 --out "$tmp/m.safetensors"
check unknown-extension 2 "$cli" quantize fashion-cnn --scheme w4-int4 --out "$tmp/m.bin"
check bad-format 2 "$cli" export fashion-cnn --scheme w4-int4 --format tflite --out "$tmp/m.tfl"
expect no-files-from-refusals test -z "$(ls "$tmp" | grep -E '^(nf4|l|m)\.')"

finish

#!/usr/bin/env bash
# End-to-end: the block engine (quantize --engine block, issue #38 step 1) against the whole-model
# engine. On kjv-llama (four weight schemes) and smollm2-135m (w4-int4, two short windows, under
# the heavy lock) the two report.json files agree: the same layers in the same order with the
# same configuration, bytes and weight hashes (the quantize-dequantized weights, so the same
# codes and scales), local and accumulated SQNR / MSE / cosine / max error, weight SQNR,
# histograms, sizes, perplexities and every KL-divergence statistic within 1e-6 relative; the
# same for the schemes that read calibration data (GPTQ, AWQ, static ranges, SmoothQuant: step 2).
# Then --engine auto, --out after a block run, and what the block engine refuses: models that are
# not stacks, an unknown engine, and a run that does not fit the memory it is given.
# Usage: test_block_engine.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# same NAME WHOLE.json BLOCK.json: the block engine's report equals the whole engine's.
same() {
  expect "$1" "$py" - "$2" "$3" <<'PY'
import json, math, sys
whole, block = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
def close(a, b, where):
    if isinstance(a, dict):
        if set(a) != set(b):
            bad.append(f"{where}: keys {sorted(set(a) ^ set(b))}")
            return
        for k in a:
            close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            bad.append(f"{where}: {len(a)} vs {len(b)} entries")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or not math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12):
            bad.append(f"{where}: {a} vs {b}")
    elif a != b:
        bad.append(f"{where}: {a!r} vs {b!r}")
assert whole["engine"] == "whole" and block["engine"] == "block", (whole["engine"], block["engine"])
layer_keys = ["name", "op", "weight_type", "act_type", "config", "params", "bytes_float",
              "bytes_quantized", "sqnr_db", "mse", "cosine", "max_abs_err", "sqnr_db_accumulated",
              "mse_accumulated", "cosine_accumulated", "max_abs_err_accumulated",
              "weight_sqnr_db", "weight_range", "error_histogram", "weight_histogram",
              "act_histogram", "weight_hash", "calibrators"]
if len(whole["layers"]) != len(block["layers"]):
    bad.append(f"{len(whole['layers'])} vs {len(block['layers'])} layers")
for w, b in zip(whole["layers"], block["layers"]):
    for k in layer_keys:
        if (k in w) != (k in b):
            bad.append(f"{w['name']}.{k}: only in one report")
        elif k in w:
            close(w[k], b[k], f"{w['name']}.{k}")
    # The whole engine appends what the throughput run found; the preparation's note is first.
    note = w.get("note", "").split("; real kernel slower")[0].split("real kernel slower")[0]
    if note.rstrip("; ") != b.get("note", ""):
        bad.append(f"{w['name']}.note: {w.get('note')!r} vs {b.get('note')!r}")
quantized = [l for l in whole["layers"] if l["weight_type"] != "float32"]
assert quantized and all(len(l["weight_hash"]) == 16 for l in quantized), "no weight hashes"
for k in ["size_bytes", "kl_divergence", "analysis_samples", "calib_samples", "scheme"]:
    close(whole.get(k), block.get(k), k)
for k in ["name", "float", "quantized", "samples"]:
    close(whole["metric"][k], block["metric"][k], "metric." + k)
assert whole["kl_divergence"]["tokens"] > 0
if bad:
    print("\n".join(bad[:20]))
    sys.exit(1)
print(f"{len(whole['layers'])} layers, ppl {block['metric']['quantized']:.6f}, "
      f"KLD {block['kl_divergence']['kld']['mean']:.3e}: equal")
PY
}

for scheme in w4-int4 w4-nf4 gguf-q8_0 dynamic-int8; do
  check "whole-$scheme" 0 "$cli" quantize kjv-llama --scheme "$scheme" --limit 4 --quiet \
    --report "$tmp/whole-$scheme.json"
  check "block-$scheme" 0 "$cli" quantize kjv-llama --scheme "$scheme" --limit 4 --quiet \
    --engine block --report "$tmp/block-$scheme.json"
  same "equal-$scheme" "$tmp/whole-$scheme.json" "$tmp/block-$scheme.json"
done
# head=quantize: the LM head is a quantized layer of the last part.
check whole-head 0 "$cli" quantize kjv-llama --scheme w4-int4:head=quantize --limit 2 --quiet \
  --report "$tmp/whole-head.json"
check block-head 0 "$cli" quantize kjv-llama --scheme w4-int4:head=quantize --limit 2 --quiet \
  --engine block --report "$tmp/block-head.json"
same equal-head "$tmp/whole-head.json" "$tmp/block-head.json"

# smollm2-135m (the whole engine holds ~3 GB for it): two windows of 256 tokens.
check whole-smollm2 0 flock /tmp/bitlens-heavy.lock "$cli" quantize smollm2-135m \
  --scheme w4-int4 --limit 2 --seq-len 256 --quiet --report "$tmp/whole-smollm2.json"
check block-smollm2 0 flock /tmp/bitlens-heavy.lock "$cli" quantize smollm2-135m \
  --scheme w4-int4 --limit 2 --seq-len 256 --quiet --engine block \
  --report "$tmp/block-smollm2.json"
same equal-smollm2 "$tmp/whole-smollm2.json" "$tmp/block-smollm2.json"

# Step 2: schemes that read calibration data, each block calibrated on the float model's inputs
# to it (the default calibration data of kjv-llama: 16 windows, four calibration batches).
for scheme in w4-int4:method=gptq w4-int4:method=awq static-int8 smoothquant-int8; do
  name=${scheme//[:=]/-}
  check "whole-$name" 0 "$cli" quantize kjv-llama --scheme "$scheme" --limit 6 --quiet \
    --report "$tmp/whole-$name.json"
  check "block-$name" 0 "$cli" quantize kjv-llama --scheme "$scheme" --limit 6 --quiet \
    --engine block --report "$tmp/block-$name.json"
  same "equal-$name" "$tmp/whole-$name.json" "$tmp/block-$name.json"
done

# --engine auto (the default): the whole engine where its estimate fits, else the block engine
# where its own fits, else the whole engine's refusal. The two estimates are read from their
# refusals, and the memory given sits between them.
needs() { # needs ENGINE: the estimate in MB that ENGINE's refusal names
  BITLENS_MEMORY_AVAILABLE=1M "$cli" quantize kjv-llama --scheme w4-int4 --limit 2 --quiet \
    --engine "$1" 2>&1 | sed -n 's/.*needs ~\([0-9.]*\) MB.*/\1/p'
}
whole_mb=$(needs whole)
block_mb=$(needs block)
expect auto-estimates "$py" -c "assert 0 < float('${block_mb:-0}') < float('${whole_mb:-0}'), ('$block_mb', '$whole_mb')"
mid_mb=$("$py" -c "print(int((float('${block_mb:-0}') + float('${whole_mb:-0}')) / 2))")
check auto-whole 0 "$cli" quantize kjv-llama --scheme w4-int4 --limit 2 --quiet \
  --report "$tmp/auto-whole.json"
expect auto-whole-engine report "$tmp/auto-whole.json" "assert d['engine'] == 'whole', d['engine']"
BITLENS_MEMORY_AVAILABLE=${mid_mb}M check auto-block 0 "$cli" quantize kjv-llama \
  --scheme w4-int4 --limit 2 --quiet --report "$tmp/auto-block.json"
expect auto-block-engine report "$tmp/auto-block.json" "assert d['engine'] == 'block', d['engine']"
same auto-equal "$tmp/auto-whole.json" "$tmp/auto-block.json"
BITLENS_MEMORY_AVAILABLE=1M check auto-refused 5 "$cli" quantize kjv-llama --scheme w4-int4 \
  --limit 2
expect auto-refused-why grep -q "quantize needs" "$tmp/err"

# Refusals, each with its reason.
check refuse-cnn 4 "$cli" quantize fashion-cnn --scheme w4-int4 --limit 8 --engine block
expect refuse-cnn-why grep -q "it runs language models" "$tmp/err"
# --out after a block-engine run: a gguf-* file is streamed from the weights (nothing held whole),
# the same bytes as after a whole-engine run.
check block-out 0 "$cli" quantize kjv-llama --scheme gguf-q4_0 --limit 2 --quiet --engine block \
  --out "$tmp/block.gguf"
check whole-out 0 "$cli" quantize kjv-llama --scheme gguf-q4_0 --limit 2 --quiet --engine whole \
  --out "$tmp/whole.gguf"
expect block-out-same-bytes cmp "$tmp/block.gguf" "$tmp/whole.gguf"
check refuse-engine 2 "$cli" quantize kjv-llama --scheme w4-int4 --engine blocks
BITLENS_MEMORY_AVAILABLE=1M check refuse-memory 5 "$cli" quantize kjv-llama --scheme w4-int4 \
  --limit 2 --engine block
expect refuse-memory-why grep -q "quantize (block engine) needs" "$tmp/err"
finish

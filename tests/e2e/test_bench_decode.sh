#!/usr/bin/env bash
# End-to-end: `bitlens-cli bench MODEL --scheme S --decode` (issue #39): llama-bench's pp / tg
# tokens per second of the float and quantized models on kjv-llama, at the CPU's ISA level and
# under BITLENS_ISA. Checks the JSON keys DESIGN.md lists, that the counts are the ones asked
# for, that every rate is positive and is the mean of tokens / seconds of its repetitions, the
# ISA level reported and the kernels run at it, and the usage errors. No timing thresholds.
# Usage: test_bench_decode.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
export OMP_NUM_THREADS=2

# The report of one run: keys, counts, positive rates consistent with the seconds.
cat > "$tmp/check.py" << 'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
pp, tg, reps, isa = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
keys = {"model", "scheme", "threads", "cpu", "isa", "cpu_isa", "isa_note", "repetitions",
        "float", "quantized", "pp_ratio", "tg_ratio"}
assert keys <= set(d), keys - set(d)
assert d["scheme"] == "w4-int4" and d["repetitions"] == reps and d["threads"] == 2, d
assert d["isa"] == isa, (d["isa"], isa)
for side in ("float", "quantized"):
    s = d[side]
    assert s["pp_tokens"] == pp and s["tg_tokens"] == tg, (side, s)
    for test, n in (("pp", pp), ("tg", tg)):
        secs = s[test + "_seconds"]
        assert len(secs) == reps and all(x > 0 for x in secs), (side, test, secs)
        rates = [n / x for x in secs]
        mean = sum(rates) / reps
        assert s[test + "_tokens_per_s"] > 0, (side, test)
        assert math.isclose(s[test + "_tokens_per_s"], mean, rel_tol=1e-9), (side, test, s)
        assert s[test + "_stddev"] >= 0 and (reps > 1 or s[test + "_stddev"] == 0), s
    assert math.isclose(d["tg_ratio"], d["quantized"]["tg_tokens_per_s"] /
                        d["float"]["tg_tokens_per_s"], rel_tol=1e-9)
assert d["float"]["label"] == "float32" and d["quantized"]["label"] == "w4-int4"
kernels = d["quantized"]["kernels"]
assert kernels, "no quantized layer ran"
int4 = [k for k in kernels.values() if "int4" in k]
# Above scalar the 4-bit layers run the level's own row (at scalar, the reference or simulated).
assert isa == "scalar" or (int4 and all(isa in k for k in int4)), kernels
PY

cpu_isa=$("$cli" bench kjv-llama --scheme w4-int4 --decode --prompt-tokens 16 --gen-tokens 8 \
  --json 2> /dev/null | "$py" -c "import json,sys; print(json.load(sys.stdin)['cpu_isa'])")
echo "CPU ISA level: ${cpu_isa:-unknown}"

check decode_json 0 "$cli" bench kjv-llama --scheme w4-int4 --decode --prompt-tokens 64 \
  --gen-tokens 32 --repetitions 2 --json
cp "$tmp/out" "$tmp/decode.json"
check decode_report 0 "$py" "$tmp/check.py" "$tmp/decode.json" 64 32 2 "$cpu_isa"
report "$tmp/decode.json" "assert d['isa_note'] == '' and d['isa'] == d['cpu_isa'], d['isa_note']" ||
  { failed=$((failed + 1)); echo "FAIL decode_isa_default"; }

for level in scalar avx2 avx512; do
  case "$level:$cpu_isa" in
    avx2:scalar | avx512:scalar | avx512:avx2 | avx512:avx-vnni)
      echo "level $level above this CPU's ($cpu_isa): not run"; continue ;;
  esac
  check "decode_isa_$level" 0 env BITLENS_ISA=$level "$cli" bench kjv-llama --scheme w4-int4 \
    --decode --prompt-tokens 24 --gen-tokens 12 --json
  cp "$tmp/out" "$tmp/decode_$level.json"
  check "decode_report_$level" 0 "$py" "$tmp/check.py" "$tmp/decode_$level.json" 24 12 1 "$level"
done

# The text table: llama-bench's test names.
check decode_text 0 "$cli" bench kjv-llama --scheme w4-int4 --decode --prompt-tokens 20 \
  --gen-tokens 10 --quiet
expect decode_text_rows grep -q "float32 .* pp20 " "$tmp/out"
expect decode_text_tg grep -q "w4-int4 .* tg10 " "$tmp/out"

# kjv-llama's context is 256 positions: the default pp512 does not fit.
check decode_past_context 2 "$cli" bench kjv-llama --scheme w4-int4 --decode
expect decode_past_context_msg grep -q "prompt-tokens 512 exceeds the model's context length 256" "$tmp/err"
check decode_zero_tokens 2 "$cli" bench kjv-llama --scheme w4-int4 --decode --gen-tokens 0
check decode_cuda 2 "$cli" bench kjv-llama --scheme w4-int4 --decode --device cuda
check decode_not_lm 4 "$cli" bench fashion-cnn --scheme w4-int4 --decode --prompt-tokens 4 \
  --gen-tokens 4
finish

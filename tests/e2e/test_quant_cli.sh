#!/usr/bin/env bash
# End-to-end: quantize / compare / sensitivity on the demo model, as a user runs them.
# Accuracy and size targets of the engine issue are checked here (no timings: see bench/).
# Usage: test_quant_cli.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# static-int8, per-channel weights, 1,000 calibration images: drop <= 0.3 points, size <= 0.26
check quantize-static 0 "$cli" quantize fashion-cnn --scheme static-int8 --report "$tmp/static.json"
expect static-keys report "$tmp/static.json" "
for k in ['bitlens_version','model','scheme','metric','size_bytes','layers','throughput']: assert k in d, k
m=d['metric']; assert m['name']=='top1' and m['samples']==10000, m
assert m['float']-m['quantized'] <= 0.003, m
s=d['size_bytes']; assert s['quantized'] <= 0.26*s['float'], s
assert d['calib_samples']==1000, d['calib_samples']
assert [l['op'] for l in d['layers']]==['Conv','Conv','Gemm','Gemm']
for l in d['layers']:
    assert l['weight_type']=='int8' and l['act_type']=='uint8', l['name']
    assert l['sqnr_db'] > 20 and l['sqnr_db_accumulated'] > 20, l['name']
    assert len(l['error_histogram']['edges'])==len(l['error_histogram']['counts'])+1
    assert l['act_clip']['method']=='minmax'
t=d['throughput']; assert t['float_samples_per_s']>0 and t['quantized_samples_per_s']>0
assert d['folded_batchnorms']==['block1.conv<-block1.bn','block2.conv<-block2.bn']
"
expect quantize-text grep -q "top1 " "$tmp/out"

# w4-int4, group 64, weight-only: drop <= 1.0 point
check quantize-w4 0 "$cli" quantize fashion-cnn --scheme w4-int4:group=64 --report "$tmp/w4.json"
expect w4-drop report "$tmp/w4.json" "m=d['metric']; assert m['float']-m['quantized'] <= 0.010, m
assert all(l['act_type']=='float32' for l in d['layers'])"

# a JSON scheme keeps one layer float
cat > "$tmp/scheme.json" <<'JSON'
{"preset": "static-int8", "options": {"observer": "percentile:99.99", "calib": 500},
 "overrides": {"block1.conv": "float"}}
JSON
check quantize-json 0 "$cli" quantize fashion-cnn --scheme "$tmp/scheme.json" --report "$tmp/j.json" --limit 2000
expect json-override report "$tmp/j.json" "l={x['name']:x for x in d['layers']}
assert l['block1.conv']['weight_type']=='float32' and l['block1.conv']['sqnr_db'] is None
assert l['fc1']['act_clip']['method']=='percentile' and d['calib_samples']==500
assert d['metric']['samples']==2000"

# compare writes {"runs": [report, ...]}, one per scheme, options kept together
check compare 0 "$cli" compare fashion-cnn --schemes "static-int8:per=tensor,observer=minmax,fp16" --limit 1000 --report "$tmp/cmp.json"
expect compare-runs report "$tmp/cmp.json" "r=d['runs']; assert len(r)==2
assert r[0]['scheme']['spec']=='static-int8:per=tensor,observer=minmax' and r[1]['scheme']['preset']=='fp16'
assert r[0]['metric']['float']==r[1]['metric']['float']"

# sensitivity ranks every quantized layer
check sensitivity 0 "$cli" sensitivity fashion-cnn --scheme w4-int4 --limit 1000 --report "$tmp/sens.json"
expect sensitivity-rows report "$tmp/sens.json" "r=d['layers']; assert len(r)==4
assert sorted(x['layer'] for x in r)==['block1.conv','block2.conv','fc1','logits']
assert all(r[i]['drop']>=r[i+1]['drop'] for i in range(3))"
expect sensitivity-rank-metric report "$tmp/sens.json" "assert d['rank']=='metric' and all('kld' not in x for x in d['layers'])"
# ranking by KL divergence needs a language model; an unknown ranking is a usage error
check sensitivity-kld-classifier 2 "$cli" sensitivity fashion-cnn --scheme w4-int4 --by kld --limit 100
expect sensitivity-kld-classifier-says grep -q "KL divergence needs a language model" "$tmp/err"
check sensitivity-by-bogus 2 "$cli" sensitivity fashion-cnn --scheme w4-int4 --by sqnr --limit 100
expect sensitivity-by-bogus-says grep -q "\-\-by must be metric or kld" "$tmp/err"
# --estimate: what a sweep costs before it runs (layers, passes, one timed batch scaled), and
# --layers: a sweep of the layers whose name contains one of the filters, exactly those
check sensitivity-estimate 0 "$cli" sensitivity fashion-cnn --scheme w4-int4 --limit 1000 --estimate --json
expect sensitivity-estimate-keys report "$tmp/out" "
assert d['layers']==4 and d['quantized_layers']==4, d
assert d['layer_names']==['block1.conv','block2.conv','fc1','logits'], d['layer_names']
assert d['eval_units']==1000 and d['unit']=='samples' and d['measured_units']==64, d
assert d['passes']==5 and d['float_pass_needed'] and not d['by_kld'] and not d['needs_calibration'], d
assert d['seconds_per_unit']>0 and abs(d['seconds']-5*1000*d['seconds_per_unit'])<1e-9*d['seconds'], d"
check sensitivity-estimate-text 0 "$cli" sensitivity fashion-cnn --scheme w4-int4 --limit 1000 --layers conv --estimate
expect sensitivity-estimate-says grep -q "2 of 4 quantized layers, each alone: 3 evaluation passes over 1000 samples" "$tmp/out"
check sensitivity-layers 0 "$cli" sensitivity fashion-cnn --scheme w4-int4 --limit 200 --layers conv,logits --report "$tmp/sens-some.json"
expect sensitivity-layers-rows report "$tmp/sens-some.json" "
assert sorted(x['layer'] for x in d['layers'])==['block1.conv','block2.conv','logits'], d['layers']
assert d['layers_filter']==['conv','logits'], d.get('layers_filter')"
check sensitivity-layers-none 2 "$cli" sensitivity fashion-cnn --scheme w4-int4 --limit 100 --layers attn
expect sensitivity-layers-none-says grep -q "no quantized layer's name contains 'attn' (4 layers are quantized)" "$tmp/err"

# bench --json gives the report's "throughput" object
check bench 0 "$cli" bench fashion-cnn --scheme static-int8 --batch 32 --json
expect bench-keys report "$tmp/out" "assert set(d)>={'device','isa','cpu','batch','float_samples_per_s','quantized_samples_per_s','kernels','layers_ms'}, d
assert d['batch']==32 and d['float_samples_per_s']>0 and len(d['kernels'])==4
assert set(d['layers_ms'])==set(d['kernels']) and all(v['float']>0 and v['quantized']>0 for v in d['layers_ms'].values())"
# BITLENS_ISA caps the own kernels' level: the report names it, and the kernel per layer
# follows it (at scalar no own kernel runs for speed; LibTorch's does, and is named).
cp "$tmp/out" "$tmp/bench-default.json"
check bench-isa-scalar 0 env BITLENS_ISA=scalar "$cli" bench fashion-cnn --scheme static-int8 --batch 32 --json
expect bench-isa-scalar-json report "$tmp/out" "
assert d['isa']=='scalar' and d['isa_note']=='BITLENS_ISA=scalar', d
assert not any(k.startswith('bitlens ') for k in d['kernels'].values()), d['kernels']"
check bench-isa-avx2 0 env BITLENS_ISA=avx2 "$cli" bench fashion-cnn --scheme static-int8 --batch 32 --json
expect bench-isa-avx2-json report "$tmp/out" "
import json; full=json.load(open('$tmp/bench-default.json'))
want='avx2' if full['isa'] in ('avx2','avx-vnni','avx512') else full['isa']
assert d['isa']==want, (d['isa'], full['isa'])
assert all('avx512' not in k for k in d['kernels'].values()), d['kernels']"
check bench-isa-bogus 0 env BITLENS_ISA=sse9 "$cli" bench fashion-cnn --scheme static-int8 --batch 32
expect bench-isa-bogus-note grep -q "BITLENS_ISA=sse9 ignored (not one of scalar, avx2, avx-vnni, avx512)" "$tmp/out"
check bench-bad-batch 2 "$cli" bench fashion-cnn --scheme static-int8 --batch 0

# bad input
check bad-scheme 2 "$cli" quantize fashion-cnn --scheme int3-magic
expect bad-scheme-message grep -q "^error: unknown scheme 'int3-magic'" "$tmp/err"
check bad-option 2 "$cli" quantize fashion-cnn --scheme "w4-int4:group=abc"
check missing-calib 3 "$cli" quantize fashion-cnn --scheme static-int8 --calib "$tmp/none.npy"
expect missing-calib-message grep -q "^error: $tmp/none.npy: " "$tmp/err"
"$py" -c "import numpy as np; x=np.random.rand(50,1,28,28).astype('f4'); x[17,0,3,3]=np.nan; np.save('$tmp/nan.npy', x)"
check nan-calib 3 "$cli" quantize fashion-cnn --scheme static-int8 --calib "$tmp/nan.npy"
expect nan-calib-message grep -q "^error: $tmp/nan.npy: contains NaN at sample 17" "$tmp/err"
"$py" -c "import numpy as np; np.save('$tmp/wrong.npy', np.random.rand(20,3,28,28).astype('f4'))"
check wrong-shape-calib 3 "$cli" quantize fashion-cnn --scheme static-int8 --calib "$tmp/wrong.npy"
expect wrong-shape-message grep -q "the model expects \[N, 1, 28, 28\]" "$tmp/err"
# A 1-D array is named with its own shape, not the shape of a batch cut from it.
"$py" -c "import numpy as np; np.save('$tmp/flat.npy', np.random.rand(784).astype('f4'))"
check flat-calib 3 "$cli" quantize fashion-cnn --scheme static-int8 --calib "$tmp/flat.npy"
expect flat-message grep -q "^error: $tmp/flat.npy: holds an array of shape \[784\]; the model expects \[N, 1, 28, 28\]" "$tmp/err"
"$py" -c "import numpy as np; np.save('$tmp/empty.npy', np.zeros((0,1,28,28),'f4'))"
check empty-calib 3 "$cli" quantize fashion-cnn --scheme static-int8 --calib "$tmp/empty.npy"
expect empty-calib-message grep -q "^error: $tmp/empty.npy: holds no samples; calibration needs inputs shaped \[N, 1, 28, 28\]" "$tmp/err"
# --out exports (tests/e2e/test_export_onnx.sh); a format without a writer yet is refused first.
check out-not-yet 4 "$cli" quantize fashion-cnn --scheme static-int8 --out "$tmp/q.gguf"
expect out-no-file test ! -e "$tmp/q.gguf"

finish

#!/usr/bin/env bash
# End-to-end: quantization-aware training from the command line on the demo model, small
# (a few hundred training samples): the run writes an ordinary report with the "qat" object,
# compare runs QAT beside a post-training scheme, and bad QAT options are usage errors.
# The accuracy targets of issue #6 are measured at full size in bench/RESULTS.md.
# Usage: test_qat_cli.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

small="epochs=2,samples=640,holdout=200,batch=64,calib=200"
sup="$small,distill=false"
check qat-int8 0 "$cli" quantize fashion-cnn --scheme "qat-int8:$sup" --limit 1000 \
  --report "$tmp/qat.json"
expect qat-keys report "$tmp/qat.json" "
for k in ['bitlens_version','model','scheme','metric','size_bytes','layers','throughput','qat']: assert k in d, k
q=d['qat']
for k in ['epochs','steps','final_loss','best_metric','seconds','best_step','start_metric','loss_curve','metric_curve']: assert k in q, k
assert q['epochs']==2 and q['steps']==20, q
assert q['loss']=='cross_entropy' and q['metric']=='top1' and q['holdout_samples']==200
assert 0 < q['final_loss'] < 5 and 0.5 < q['best_metric'] <= 1 and q['seconds'] > 0
assert len(q['loss_curve']['step'])==20 and q['metric_curve']['step'][0]==0
assert q['best_metric']==max(q['metric_curve']['value'])
assert d['scheme']['preset']=='qat-int8' and d['scheme']['qat']['epochs']==2
m=d['metric']; assert m['samples']==1000 and m['float']-m['quantized'] <= 0.02, m
assert d['folded_batchnorms']==['block1.conv<-block1.bn','block2.conv<-block2.bn']
for l in d['layers']:
    assert l['weight_type']=='int8' and l['act_type']=='uint8' and l['sqnr_db'] > 20, l['name']
"
expect qat-text grep -q "^qat " "$tmp/out"

# bench prepares a qat-* scheme as quantize does: it trains first (the QAT progress on stderr).
check bench-qat 0 "$cli" bench fashion-cnn --scheme "qat-int8:$sup" --batch 16
expect bench-qat-trains grep -q "QAT epoch 2/2" "$tmp/err"
expect bench-qat-text grep -q "^qat-int8:.* on CPU.*, batch 16$" "$tmp/out"

# Label-free distillation and learned scales on the 4-bit preset; compare runs it beside PTQ.
check compare-qat 0 "$cli" compare fashion-cnn \
  --schemes "static-w4a8,qat-w4a8:$small,lsq=true,distill=true" --limit 1000 --report "$tmp/cmp.json"
expect compare-qat-runs report "$tmp/cmp.json" "r=d['runs']; assert len(r)==2
assert 'qat' not in r[0] and r[1]['qat']['loss']=='kl_distill', r[1]['qat']
assert r[1]['scheme']['qat']['lsq'] is True
assert all(l['act_clip']['method']=='qat-lsq' for l in r[1]['layers'])
assert r[0]['metric']['float']==r[1]['metric']['float']"

check bad-option 2 "$cli" quantize fashion-cnn --scheme "qat-int8:optimizer=rmsprop"
expect bad-option-text grep -q "optimizer takes adam or sgd" "$tmp/err"
check qat-option-on-ptq 2 "$cli" quantize fashion-cnn --scheme "static-int8:epochs=2"
finish

#!/usr/bin/env bash
# End-to-end: kjv-llama, the zoo's float language model that BitLens trains itself
# (zoo/kjv_llama: a small Llama and its byte-level BPE, learned from the KJV Old Testament).
# Checked against the world: transformers loads the folder (AutoModelForCausalLM and
# AutoTokenizer) with no missing or unexpected weight; its logits on New Testament windows equal
# BitLens's `run` within 1e-4 of the largest logit; its perplexity over the windows BitLens's
# `eval` scores equals BitLens's; and it has learned the language (held-out perplexity far below
# the 2048-token vocabulary, and below a unigram model of the same text). Then AWQ on it.
# Usage: test_kjv_llama.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
if ! "$py" -c "import transformers, torch" 2> /dev/null; then
  echo "FAIL: the venv python has no transformers/torch (scripts/bootstrap installs them)"
  exit 1
fi
model=$("$cli" zoo path kjv-llama --quiet)
dir=$(dirname "$model")
kjv=${BITLENS_CACHE:-$HOME/.cache/bitlens}/zoo/kjv

check info 0 "$cli" info kjv-llama --json
expect info-llama report "$tmp/out" "
assert d['format'] == 'safetensors' and 3.0e6 < d['params'] < 4.5e6, d['params']
assert sum(1 for l in d['layers'] if l['op'] == 'MatMul' and l['params'] > 0) == 4 * 7 + 1, d['layers']"
check eval 0 "$cli" eval kjv-llama --json
cp "$tmp/out" "$tmp/eval.json"
expect eval-perplexity report "$tmp/eval.json" "
m = d['metric']
assert m['name'] == 'perplexity' and 1.0 < m['value'] < 100.0, m
assert d['data_shape'] == [32, 256] and d['samples'] == 32 * 255, d"

# The first 4 of those windows (256 tokens, no BOS: the tokenizer adds none) as a run input.
check tokenize 0 "$cli" tokenize kjv-llama --text "$kjv/kjv-eval.txt" --json --no-special
"$py" -c "
import json, numpy as np
ids = np.array(json.load(open('$tmp/out'))['ids'][:4 * 256], dtype=np.int64).reshape(4, 256)
np.save('$tmp/ids.npy', ids)"
check run 0 "$cli" run kjv-llama --input "$tmp/ids.npy" --out "$tmp/bitlens"
check transformers 0 "$py" - "$dir" "$tmp" "$kjv/kjv-eval.txt" <<'PY'
import contextlib, glob, io, json, logging, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging
folder, tmp, text_path = sys.argv[1:4]
captured = io.StringIO()
hf_logging.set_verbosity_warning()
hf_logging.get_logger().addHandler(logging.StreamHandler(captured))
with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(folder)
log = captured.getvalue()
assert "MISSING" not in log and "UNEXPECTED" not in log and "newly initialized" not in log, log[-2000:]
assert model.config.model_type == "llama" and model.config.tie_word_embeddings
torch.set_num_threads(2)
model.eval()
ids = np.load(tmp + "/ids.npy")
# The tokenizer transformers builds from tokenizer.json gives BitLens's ids.
text = open(text_path, encoding="utf-8").read()
hf_ids = tok(text[:200000], add_special_tokens=False)["input_ids"]
assert hf_ids[:ids.size] == ids.reshape(-1).tolist(), "tokenizer ids differ"
with torch.no_grad():
    logits = model(input_ids=torch.tensor(ids)).logits.numpy()
bitlens = np.load(glob.glob(tmp + "/bitlens/*.npy")[0]).reshape(logits.shape)
rel = np.abs(logits - bitlens).max() / np.abs(logits).max()
print(f"logits: max |transformers - BitLens| / max |logit| = {rel:.3g}")
assert rel <= 1e-4, rel
# Perplexity over the windows BitLens's eval scores (32 non-overlapping windows of 256 from the
# start of the text, every position after the first scored).
windows = torch.tensor(hf_ids[:32 * 256]).reshape(32, 256)
nll, count = 0.0, 0
with torch.no_grad():
    for w in windows.split(4):
        lp = torch.log_softmax(model(input_ids=w).logits.double(), -1)
        nll -= lp[:, :-1].gather(-1, w[:, 1:, None]).sum().item()
        count += w[:, 1:].numel()
ppl = float(np.exp(nll / count))
mine = json.load(open(tmp + "/eval.json"))["metric"]["value"]
print(f"perplexity: transformers {ppl:.4f}, BitLens {mine:.4f}")
assert abs(ppl - mine) <= 1e-3 * ppl, (ppl, mine)
# It learned more than word frequencies: a unigram model of the same ids scores far worse.
counts = np.bincount(np.array(hf_ids), minlength=model.config.vocab_size) + 1
unigram = float(np.exp(-np.log(counts / counts.sum())[windows[:, 1:].numpy()].mean()))
print(f"unigram perplexity of the same tokens: {unigram:.1f}")
assert ppl < 0.5 * unigram, (ppl, unigram)
PY
cat "$tmp/out"

# AWQ on the float LM (method=awq): every quantized projection reports its method and a layer
# output error below round-to-nearest's; the compressed-tensors export refuses it (the input
# scale has no place there), leaving nothing behind.
check quantize-awq 0 "$cli" quantize kjv-llama --scheme w4-int4:group=128,method=awq --limit 4 \
  --report "$tmp/awq.json"
expect awq-layers report "$tmp/awq.json" "
ls = [l for l in d['layers'] if l.get('method')]
assert len(ls) == 28 and all(l['method']['name'] == 'awq' for l in ls), [l.get('method') for l in d['layers']]
assert all(l['method']['loss'] < l['method']['loss_rtn'] for l in ls), [l['method'] for l in ls]
assert all('AWQ scale ratio' in l['note'] for l in ls), [l['note'] for l in ls]"
check export-awq-safetensors 4 "$cli" export kjv-llama --scheme w4-int4:method=awq \
  --format safetensors --out "$tmp/awq-folder" --limit 2
expect export-awq-message grep -q "AWQ's per-channel input scale" "$tmp/err"
expect export-awq-nothing-left test ! -e "$tmp/awq-folder"
finish

#!/usr/bin/env bash
# End-to-end: `bitlens-cli tokenize` — exit codes, JSON keys, and identical ids to the pip
# `tokenizers` package on the real zoo vocabularies (MiniLM's WordPiece, SmolLM2's BPE from its
# GGUF) over the King James Bible plus tricky strings. The real-vocabulary part runs when the
# zoo models are built (`bitlens-cli zoo build minilm-l6` / `smollm2-135m`) and skips otherwise.
# Usage: test_tokenize.sh path/to/bitlens-cli
set -uo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
src=${BITLENS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
data=$src/tests/data/text

printf 'In the beginning God created the heaven and the earth.\n' > "$tmp/gen.txt"

# Usage and bad input
check no-text 2 "$cli" tokenize "$data/bpe_gpt2.json"
check no-model 2 "$cli" tokenize --text "$tmp/gen.txt"
check missing-tokenizer 3 "$cli" tokenize "$tmp/nothing.json" --text "$tmp/gen.txt"
expect missing-message grep -q "nothing.json: cannot open file" "$tmp/err"
check missing-text 3 "$cli" tokenize "$data/bpe_gpt2.json" --text "$tmp/none.txt"
printf '{"model": {"type": "Unigram"}}' > "$tmp/uni.json"
check unsupported-model 4 "$cli" tokenize "$tmp/uni.json" --text "$tmp/gen.txt"
expect unsupported-message grep -q "tokenizer model type 'Unigram'" "$tmp/err"
printf 'GGUF' > "$tmp/m.gguf"
check gguf-truncated 3 "$cli" tokenize "$tmp/m.gguf" --text "$tmp/gen.txt"
expect gguf-truncated-message grep -q "m.gguf" "$tmp/err"
mkdir -p "$tmp/model"
cp "$data/wp_vocab.txt" "$tmp/model/vocab.txt"
printf 'weights' > "$tmp/model/model.safetensors"

# Output: "id<TAB>token" lines, or JSON {"tokens","ids","count"}
check text-out 0 "$cli" tokenize "$data/wp_vocab.txt" --text "$tmp/gen.txt"
expect text-first-is-cls grep -q $'^2\t\\[CLS\\]$' <(head -1 "$tmp/out")
check json-out 0 "$cli" tokenize "$data/bpe_gpt2.json" --text "$tmp/gen.txt" --json
expect json-keys report "$tmp/out" "assert d['count'] == len(d['ids']) == len(d['tokens']) > 5; assert d['tokenizer'] == 'bpe'"
check model-file-beside 0 "$cli" tokenize "$tmp/model/model.safetensors" --text "$tmp/gen.txt" --json
expect model-file-wordpiece report "$tmp/out" "assert d['tokenizer'] == 'wordpiece' and d['tokens'][0] == '[CLS]' and d['tokens'][-1] == '[SEP]'"
check no-special 0 "$cli" tokenize "$tmp/model" --text "$tmp/gen.txt" --json --no-special
expect no-special-no-cls report "$tmp/out" "assert '[CLS]' not in d['tokens']"

# Golden: the pip tokenizers package on the real vocabularies.
if ! "$py" -c "import tokenizers, gguf" 2> /dev/null; then
  echo "FAIL golden: the venv python has no tokenizers/gguf (scripts/bootstrap installs them)"
  exit 1
fi
"$cli" zoo list --json > "$tmp/zoo.json" 2> /dev/null
built() { "$py" -c "import json,sys; sys.exit(0 if any(e['name'] == '$1' and e['built'] for e in json.load(open('$tmp/zoo.json'))) else 1)"; }

# Corpus: 3000 verses of the calibration text, the last 1000 of the held-out text, tricky lines.
corpus() {
  local kjv=${BITLENS_CACHE:-$HOME/.cache/bitlens}/zoo/kjv
  { head -3000 "$kjv/kjv-calib.txt"; tail -1000 "$kjv/kjv-eval.txt"
    "$py" - <<'PY'
import json
print("Héllo wörld! Ça va? naïve café résumé Ångström İstanbul ΣΑΣ Straße ﬁne Ⅻ ¹²³ ½")
print("中文字符测试，日本語のテキスト、한국어 텍스트 emoji 😀👍🏽 👨‍👩‍👧 ❤️ 🇫🇷")
print("numbers 1234567 3.14159 1,000,000 ١٢٣ 2024-01-01 don't I'm we've they're DON'T")
print("multiple   spaces\tand\ttabs  \n\nnewlines\r\nwindows   \n  indented\n")
print("<|endoftext|> special <|im_start|>user\nhello<|im_end|> [CLS] x [SEP] [MASK]")
print("zero\u200bwidth soft\u00adhyphen nbsp\u00a0here e\u0301 a\u0308 o\u0302\u0323 control\x07bell")
PY
  } > "$tmp/corpus.txt"
}
compare_ids() { # compare_ids NAME TOKENIZER_FOR_CLI TOKENIZER_JSON_FOR_HF
  check "$1-cli" 0 "$cli" tokenize "$2" --text "$tmp/corpus.txt" --json
  cp "$tmp/out" "$tmp/$1.ids.json"
  expect "$1-identical" "$py" - "$3" "$tmp/corpus.txt" "$tmp/$1.ids.json" <<'PY'
import json, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1]); tok.no_truncation(); tok.no_padding()
text = open(sys.argv[2], encoding="utf-8", newline="").read()
want = tok.encode(text).ids
got = json.load(open(sys.argv[3]))["ids"]
if got != want:
    i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    print("first difference at token %d of %d/%d: bitlens %s, tokenizers %s" %
          (i, len(got), len(want), got[i:i + 8], want[i:i + 8]))
    sys.exit(1)
print("%d ids identical" % len(got))
PY
}

if built minilm-l6; then
  corpus
  dir=$("$cli" zoo path minilm-l6 --quiet | xargs dirname)
  compare_ids minilm-vocab "$dir/vocab.txt" "$dir/tokenizer.json"
  compare_ids minilm-json minilm-l6 "$dir/tokenizer.json"
else
  skip "minilm-l6 golden: not built (offline? bitlens-cli zoo build minilm-l6)"
fi
if built smollm2-135m; then
  corpus
  gguf=$("$cli" zoo path smollm2-135m --quiet)
  # SmolLM2's tokenizer as Hugging Face builds it from the GGUF's vocabulary and merges
  # (tokenizer.ggml.pre = smollm: Digits(individual) + ByteLevel with the GPT-2 regex).
  expect smollm-tokenizer-json "$py" - "$gguf" "$tmp/smollm.json" <<'PY'
import sys
from gguf import GGUFReader
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
f = GGUFReader(sys.argv[1]).fields
assert f["tokenizer.ggml.model"].contents() == "gpt2" and f["tokenizer.ggml.pre"].contents() == "smollm"
toks = f["tokenizer.ggml.tokens"].contents()
types = f["tokenizer.ggml.token_type"].contents()
merges = [tuple(m.split(" ")) for m in f["tokenizer.ggml.merges"].contents()]
tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(toks)}, merges=merges))
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False)])
tok.decoder = decoders.ByteLevel()
tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                        for t, ty in zip(toks, types) if ty == 3])
tok.save(sys.argv[2])
PY
  compare_ids smollm "$tmp/smollm.json" "$tmp/smollm.json"
  # The same ids from the GGUF itself (tokenizer.ggml.* read by BitLens' GGUF hook).
  compare_ids smollm-gguf smollm2-135m "$tmp/smollm.json"
else
  skip "smollm2-135m golden: not built (offline? bitlens-cli zoo build smollm2-135m)"
fi
# kjv-llama's tokenizer, learned by BitLens from the Old Testament (text/bpe_train): the
# tokenizer.json it wrote reads the same in the tokenizers package. Trained here, never skipped.
corpus
dir=$("$cli" zoo path kjv-llama --quiet | xargs dirname)
compare_ids kjv-llama kjv-llama "$dir/tokenizer.json"
finish

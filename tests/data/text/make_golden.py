#!/usr/bin/env python3
"""Writes the tokenizer golden data of tests/unit/test_text.cpp (run from anywhere):

    ~/.cache/bitlens/venv/bin/python tests/data/text/make_golden.py

Small tokenizers are trained with the pip `tokenizers` package (the oracle) on Genesis 1-3 of
the King James Bible (Debian bible-kjv) plus tricky strings, then the same package encodes the
tricky strings; the C++ tokenizers must give identical ids. Outputs (all small):
  wp_vocab.txt            WordPiece vocabulary (BERT uncased pipeline via vocab.txt)
  wp_cased.json           WordPiece tokenizer.json, cased (lowercase false, strip_accents false)
  bpe_gpt2.json           byte-level BPE, GPT-2 regex, <|endoftext|> <|im_start|> <|im_end|>
  bpe_llama3.json         same vocabulary, Llama 3 Split regex + ByteLevel(use_regex false),
                          ignore_merges, a TemplateProcessing BOS
  bpe_smollm.json         same vocabulary, Digits(individual) + ByteLevel (SmolLM2's pipeline)
  golden.json             {"cases": [{"tokenizer", "text", "ids", "decoded"?}], "strings": [...]}
  pkg_ok.whl, pkg_ok.tar.gz, pkg_evil.whl   tiny archives for the zoo package unpacker
"""
import io
import json
import os
import subprocess
import tarfile
import zipfile

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))

TRICKY = [
    "Héllo wörld! Ça va? naïve café résumé Ångström",
    "İstanbul ΣΑΣ Straße ǅemal ﬁne ℌello Ⅻ ¹²³ ½",
    "中文字符测试，日本語のテキスト、한국어 텍스트",
    "emoji 😀👍🏽 👨‍👩‍👧 ❤️ 🇫🇷",
    "numbers 1234567 3.14159 1,000,000 ١٢٣ ४५६ 0x1F 2024-01-01",
    "contractions: don't I'm we've they're she'll he'd it's DON'T I'M 'S",
    "multiple   spaces\tand\ttabs  \n\nnewlines\r\nwindows   ",
    "   leading and trailing   ",
    "punctuation!!! ...??? --- (parens) [brackets] \"quotes\" «guillemets» „low“",
    "code: def f(x): return x**2 + 3*x - 1 # a[i] = b->c && d || e",
    "zero\u200bwidth soft\u00adhyphen nbsp\u00a0here ideographic\u3000space",
    "combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0335\u0321",
    "control\x07bell\x1bescape\x7fdel\x85nel",
    "<|endoftext|> special <|im_start|>user\nhello<|im_end|> [CLS] x [SEP] [MASK]",
    "a" * 120,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "ALL CAPS SHOUTING AND MiXeD CaSe",
    "Ελληνικά Русский текст עברית العربية हिन्दी ไทย",
    "'tis 'Twas rock'n'roll o'clock ma'am",
    "",
    " ",
    "x\n y\n\n  z",
    "tab\t\tx \u2028 ls \u2029 ps",
    "In the beginning God created the heaven and the earth.",
]

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def corpus():
    out = subprocess.run(["bible", "-f", "Gen1:1-Gen3:24"], check=True, capture_output=True,
                         text=True).stdout
    verses = [line.split(" ", 1)[1] for line in out.splitlines() if " " in line]
    return verses + TRICKY


def train_wordpiece(lines):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(
        vocab_size=420, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.train_from_iterator(lines, trainer)
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    with open(os.path.join(HERE, "wp_vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    # The uncased pipeline as HF builds it from that vocab.txt.
    uncased = Tokenizer(models.WordPiece.from_file(os.path.join(HERE, "wp_vocab.txt"),
                                                   unk_token="[UNK]"))
    uncased.normalizer = normalizers.BertNormalizer(lowercase=True)
    uncased.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    uncased.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    cls, sep = uncased.token_to_id("[CLS]"), uncased.token_to_id("[SEP]")
    uncased.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    uncased.decoder = decoders.WordPiece()
    cased = Tokenizer.from_str(uncased.to_str())
    cased.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    cased.save(os.path.join(HERE, "wp_cased.json"))
    return {"wp_vocab.txt": uncased, "wp_cased.json": cased}


def train_bpe(lines):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    tok.train_from_iterator(lines, trainer)
    gpt2 = tok
    gpt2.save(os.path.join(HERE, "bpe_gpt2.json"))

    base = json.loads(gpt2.to_str())
    llama = dict(base)
    llama["model"] = dict(base["model"], ignore_merges=True)
    llama["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    start = gpt2.token_to_id("<|im_start|>")
    llama["post_processor"] = {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                                        {"Sequence": {"id": "B", "type_id": 1}}],
                               "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [start],
                                                                   "tokens": ["<|im_start|>"]}}}
    smollm = dict(base)
    smollm["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    out = {"bpe_gpt2.json": gpt2}
    for name, j in (("bpe_llama3.json", llama), ("bpe_smollm.json", smollm)):
        text = json.dumps(j, ensure_ascii=False)
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(text)
        out[name] = Tokenizer.from_str(text)
    return out


def archives():
    def wheel(path, members):
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in members.items():
                z.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data)
    wheel(os.path.join(HERE, "pkg_ok.whl"), {
        "pkg/__init__.py": b"",
        "pkg/model/model.bin": b"\x00\x01\x02\x03" * 8,
        "pkg/model/sub/config.json": b'{"a": 1}\n',
        "pkg-0.1.dist-info/METADATA": b"Name: pkg\n"})
    wheel(os.path.join(HERE, "pkg_evil.whl"), {"pkg/model/../../evil.txt": b"gotcha\n"})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as t:
        for name, data in {"pkg-0.1/pkg/model/model.bin": b"\x00\x01\x02\x03" * 8,
                           "pkg-0.1/pkg/model/" + "long_name_" * 12 + ".json": b"{}\n",
                           "pkg-0.1/setup.py": b""}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1704067200
            t.addfile(info, io.BytesIO(data))
    with open(os.path.join(HERE, "pkg_ok.tar.gz"), "wb") as f:
        f.write(buf.getvalue())


def main():
    lines = corpus()
    tokenizers = {}
    tokenizers.update(train_wordpiece(lines))
    tokenizers.update(train_bpe(lines))
    cases = []
    for name, tok in tokenizers.items():
        for text in TRICKY + lines[:12]:
            for special in (True, False):
                enc = tok.encode(text, add_special_tokens=special)
                case = {"tokenizer": name, "text": text, "special": special, "ids": enc.ids,
                        "tokens": enc.tokens}
                if name.startswith("bpe"):
                    case["decoded"] = tok.decode(enc.ids, skip_special_tokens=True)
                cases.append(case)
    with open(os.path.join(HERE, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"cases": cases}, f, ensure_ascii=False, indent=0)
    archives()
    print("wrote %d cases" % len(cases))


if __name__ == "__main__":
    main()

# Independent check of BitLens' SmolLM2 perplexities (bench/RESULTS.md, "Real models"): the GGUF
# dequantized by gguf-py, a llama forward pass in plain PyTorch, the windows tokenized by the HF
# `tokenizers` BPE built from the GGUF's vocabulary, and NF4 / int4 group fake-quantization of
# every projection and the tied head (NF4 without double quantization), or LLM.int8() as
# bitsandbytes defines it: int8 absmax per token (row of X, scale absmax / 127) and per output
# channel of W, input feature columns with |x| >= 6.0 in any token of the batch kept in 16-bit
# in X and in W (the per-token absmax taken without them), the rest an int8 product.
# A scheme ending in "/head-float" keeps the tied output head float, as transformers does
# for 8-bit and 4-bit bitsandbytes models (lm_head is never converted).
# Windows run in batches of 2, as `bitlens-cli eval` does (LLM.int8's outlier columns are
# found per batch).
# Usage: python bench/ref_perplexity.py MODEL.gguf TEXT.txt WINDOWS SEQ
#            [nf4:64,int4:64,llm-int8,nf4:64/head-float,llm-int8/head-float,...]
# llm-int8-w / llm-int8-x quantize only the weights / only the activations of LLM.int8's int8
# product (the outlier columns still 16-bit), to split its error.
import sys, numpy as np, torch
from gguf import GGUFReader
from gguf.quants import dequantize
from tokenizers import Tokenizer, models, pre_tokenizers, AddedToken
torch.set_num_threads(2)
path, text_path, nwin, seq = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
schemes = sys.argv[5].split(",") if len(sys.argv) > 5 else []
r = GGUFReader(path); f = r.fields
toks = f["tokenizer.ggml.tokens"].contents(); types = f["tokenizer.ggml.token_type"].contents()
merges = [tuple(m.split(" ")) for m in f["tokenizer.ggml.merges"].contents()]
tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(toks)}, merges=merges))
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)])
tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(toks, types) if ty == 3])
text = open(text_path, encoding="utf-8").read()[: nwin * seq * 8]
ids = tok.encode(text).ids[: nwin * seq]
windows = torch.tensor(ids).reshape(nwin, seq)
W = {}
for t in r.tensors:
    a = dequantize(t.data, t.tensor_type)
    W[t.name] = torch.from_numpy(np.array(a, dtype=np.float32))
hid = int(f["llama.embedding_length"].contents()); L = int(f["llama.block_count"].contents())
H = int(f["llama.attention.head_count"].contents()); KV = int(f["llama.attention.head_count_kv"].contents())
eps = float(f["llama.attention.layer_norm_rms_epsilon"].contents()); theta = float(f["llama.rope.freq_base"].contents())
hd = hid // H
def unperm(w, n): return w.reshape(n, hd // 2, 2, w.shape[1]).transpose(1, 2).reshape(w.shape)
for i in range(L):
    W[f"blk.{i}.attn_q.weight"] = unperm(W[f"blk.{i}.attn_q.weight"], H)
    W[f"blk.{i}.attn_k.weight"] = unperm(W[f"blk.{i}.attn_k.weight"], KV)
NF4 = torch.tensor([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0])
def fq(w, scheme):
    kind, g = scheme.split(":")
    g = int(g); out, inn = w.shape; x = w.reshape(out, inn // g, g)
    if kind == "nf4":
        s = x.abs().amax(-1, keepdim=True).clamp_min(1e-12)
        q = (x / s).unsqueeze(-1).sub(NF4).abs().argmin(-1)
        return (NF4[q] * s).reshape(out, inn)
    lo = x.amin(-1, keepdim=True).clamp(max=0); hi = x.amax(-1, keepdim=True).clamp(min=0)
    s = ((hi - lo) / 15).clamp_min(1e-12); zp = torch.round(-lo / s)
    return ((torch.clamp(torch.round(x / s) + zp, 0, 15) - zp) * s).reshape(out, inn)
def int8_rows(t):  # symmetric absmax per row, codes in [-127, 127] (bitsandbytes' vector-wise)
    s = t.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 127
    return torch.clamp(torch.round(t / s), -127, 127) * s
def llm_int8(h, w, thr=6.0, quant_w=True, quant_x=True):
    x = h.reshape(-1, h.shape[-1])
    cols = (x.abs() >= thr).any(0)
    xr = x.masked_fill(cols, 0.0)
    y = (int8_rows(xr) if quant_x else xr) @ (int8_rows(w) if quant_w else w).T
    if cols.any():
        y = y + x[:, cols].half().float() @ w[:, cols].half().float().T
    return y.reshape(*h.shape[:-1], w.shape[0])
def rms(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
B = 2
def ppl(Wq, act=None, **parts):
    # act: set of weight names whose products run LLM.int8 (weights float in Wq); parts:
    # quant_w / quant_x = False leaves that operand unquantized (to split the error).
    act = act or set()
    def mm(h, name):
        w = Wq[name] if name in Wq else Wq["token_embd.weight"]
        return llm_int8(h, w, **parts) if name in act else h @ w.T
    nll, n = 0.0, 0
    inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd)
    with torch.inference_mode():
        for b0 in range(0, nwin, B):
            ids = windows[b0 : b0 + B]; nb = ids.shape[0]
            x = Wq["token_embd.weight"][ids]
            S = x.shape[1]; ang = torch.arange(S).float()[:, None] * inv[None]
            cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)
            def rope(t):
                t1, t2 = t[..., : hd // 2], t[..., hd // 2 :]
                return t * cos + torch.cat([-t2, t1], -1) * sin
            mask = torch.full((S, S), float("-inf")).triu(1)
            for i in range(L):
                p = f"blk.{i}."
                h = rms(x, Wq[p + "attn_norm.weight"])
                q = mm(h, p + "attn_q.weight").view(nb, S, H, hd).transpose(1, 2)
                k = mm(h, p + "attn_k.weight").view(nb, S, KV, hd).transpose(1, 2)
                v = mm(h, p + "attn_v.weight").view(nb, S, KV, hd).transpose(1, 2)
                q, k = rope(q), rope(k)
                k = k.repeat_interleave(H // KV, 1); v = v.repeat_interleave(H // KV, 1)
                a = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + mask, -1) @ v
                x = x + mm(a.transpose(1, 2).reshape(nb, S, hid), p + "attn_output.weight")
                h = rms(x, Wq[p + "ffn_norm.weight"])
                x = x + mm(torch.nn.functional.silu(mm(h, p + "ffn_gate.weight")) * mm(h, p + "ffn_up.weight"), p + "ffn_down.weight")
            x = rms(x, Wq["output_norm.weight"])
            logits = mm(x, "output.weight")
            lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(2, ids[:, 1:, None])
            nll -= lp.sum().item(); n += nb * (S - 1)
    return float(np.exp(nll / n)), n
base, n = ppl(W)
print("float", base, n, flush=True)
for spec in schemes:
    sc, _, head = spec.partition("/")
    headFloat = head == "head-float"
    proj = [name for name, w in W.items()
            if w.dim() == 2 and name not in ("token_embd.weight", "output.weight") and "norm" not in name]
    Wq = dict(W)
    if "output.weight" not in Wq:
        Wq["output.weight"] = W["token_embd.weight"]  # the tied head
    heads = [] if headFloat else ["output.weight"]
    if sc == "llm-int8":
        p, _ = ppl(Wq, set(proj + heads))
    elif sc in ("llm-int8-w", "llm-int8-x"):  # only W int8 per row / only X int8 per token
        p, _ = ppl(Wq, set(proj + heads), quant_w=sc.endswith("w"), quant_x=sc.endswith("x"))
    else:
        for name in proj + heads:
            Wq[name] = fq(Wq[name], sc)
        p, _ = ppl(Wq)
    sc = spec
    print(sc, p, "%+.2f%%" % (100 * (p / base - 1)), flush=True)

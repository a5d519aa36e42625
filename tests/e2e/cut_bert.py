# Writes the first N encoder layers of a BERT folder (config.json, model.safetensors, tokenizer
# files) as a folder of its own: a model whose quantized outputs do not amplify rounding
# differences through many layers. Usage: cut_bert.py SOURCE_FOLDER DEST_FOLDER N
import json, os, shutil, sys
from safetensors.torch import load_file, save_file
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(dst, exist_ok=True)
for f in os.listdir(src):
    if os.path.isfile(os.path.join(src, f)) and f not in ("model.safetensors", "config.json"):
        shutil.copy(os.path.join(src, f), dst)
cfg = json.load(open(os.path.join(src, "config.json")))
assert n <= cfg["num_hidden_layers"], (n, cfg["num_hidden_layers"])
cfg["num_hidden_layers"] = n
json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
w = load_file(os.path.join(src, "model.safetensors"))
keep = {k: v.contiguous() for k, v in w.items()
        if ".layer." not in k or int(k.split(".layer.")[1].split(".")[0]) < n}
save_file(keep, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
print(len(w), "->", len(keep), "tensors")

# The semantics a dynamic-int8 compressed-tensors export of a BERT declares, in plain torch: the
# float model (SOURCE_FOLDER) with each Linear's weight replaced by the exported int8 codes times
# their per-channel scales, and its input fake-quantized per tensor to uint8 from the batch's own
# min / max (dynamic, asymmetric, as config.json says), padded positions included, as BitLens and
# compressed-tensors compute it. With --valid-only-range the range is taken over the unpadded
# positions only (the semantics BitLens does not have: the test shows this differs).
# Compared with BitLens's output on the unpadded positions; fails below the MEAN / MIN cosine.
# Usage: bert_int8_reference.py EXPORT_FOLDER SOURCE_FOLDER IDS.npy MASK.npy BITLENS.npy MEAN MIN
#        [--valid-only-range] [--below]   (--below: fail unless the mean cosine is below MEAN)
import json, sys, numpy as np, torch
from safetensors.torch import load_file
from transformers import AutoModel
folder, source, ids_path, mask_path, bl_path = sys.argv[1:6]
want_mean, want_min = float(sys.argv[6]), float(sys.argv[7])
valid_only = "--valid-only-range" in sys.argv
acts = json.load(open(folder + "/config.json"))["quantization_config"]["config_groups"]["group_0"]["input_activations"]
assert acts["dynamic"] and acts["strategy"] == "tensor" and not acts["symmetric"], acts
q = load_file(folder + "/model.safetensors")
model = AutoModel.from_pretrained(source)
ids = torch.tensor(np.load(ids_path)); mask = torch.tensor(np.load(mask_path))
valid = mask.bool()
def fq(x):
    r = x[valid] if valid_only else x
    lo, hi = min(r.min().item(), 0.0), max(r.max().item(), 0.0)
    s = (hi - lo) / 255.0
    zp = max(0, min(255, round(-lo / s)))
    return (torch.clamp(torch.round(x / s) + zp, 0, 255) - zp) * s
done = 0
for name, mod in model.named_modules():
    if isinstance(mod, torch.nn.Linear) and name + ".weight_scale" in q:
        mod.weight.data = q[name + ".weight"].float() * q[name + ".weight_scale"].float().reshape(-1, 1)
        mod.register_forward_pre_hook(lambda m, a: (fq(a[0]),))
        done += 1
assert done == 6 * model.config.num_hidden_layers, done
with torch.no_grad():
    r = model(input_ids=ids, attention_mask=mask).last_hidden_state.numpy()
b = np.load(bl_path)
m = valid.numpy(); r, b = r[m], b[m]
cos = (r * b).sum(1) / np.linalg.norm(r, axis=1) / np.linalg.norm(b, axis=1)
print("reference%s vs bitlens, %d layer(s): mean cosine %.6f, min %.6f, max |diff| %.3g of max |x| %.3g"
      % (" (range over valid positions only)" if valid_only else "", model.config.num_hidden_layers,
         cos.mean(), cos.min(), np.abs(r - b).max(), np.abs(r).max()))
if "--below" in sys.argv:
    assert cos.mean() < want_mean, (cos.mean(), cos.min())
else:
    assert cos.mean() >= want_mean and cos.min() >= want_min, (cos.mean(), cos.min())

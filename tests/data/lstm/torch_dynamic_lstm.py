"""Where PyTorch's quantized dynamic LSTM (torch.ao, fbgemm) quantizes its activations.

The design note "Quantized LSTM / GRU" (docs/DESIGN.md) rests on this check, run with the venv's
torch: the input sequence X gets one dynamic range for all steps (ATen's FullLayer projects the
whole sequence with one linear_dynamic call on the CPU), the hidden state one range per step,
and fbgemm reduces the activation range to 7 bits (reduce_range). BitLens' dynamic-int8 keeps
the first two and uses the full 8-bit range, as its other dynamic layers (onnxruntime's rule).
Usage: python torch_dynamic_lstm.py   (exit 1 if torch ever computes it differently)
"""
import torch, warnings
warnings.filterwarnings("ignore")
torch.manual_seed(0)
torch.backends.quantized.engine = 'fbgemm'
m = torch.nn.LSTM(6, 8)
q = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(m), {torch.nn.LSTM}, dtype=torch.qint8)[0]
x = torch.randn(9, 4, 6) * 1.5
with torch.no_grad():
    yq, _ = q(x)
    yf, _ = m(x)
# weights as the quantized module holds them
def wq(w):
    o = torch.ao.quantization.MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric); o(w)
    sc, zp = o.calculate_qparams()
    return torch.fake_quantize_per_tensor_affine(w, sc.item(), int(zp.item()), -128, 127)
def act(t, reduce):
    o = torch.ao.quantization.MinMaxObserver(dtype=torch.quint8, reduce_range=reduce); o(t)
    sc, zp = o.calculate_qparams()
    qmax = 127 if reduce else 255
    return torch.fake_quantize_per_tensor_affine(t, sc.item(), int(zp.item()), 0, qmax)
def ref(xmode, hmode, reduce):
    Wi, Wh = wq(m.weight_ih_l0), wq(m.weight_hh_l0)
    H = 8
    if xmode == 'seq':
        xw = act(x, reduce) @ Wi.t() + m.bias_ih_l0
    h = torch.zeros(4, H); c = torch.zeros(4, H); ys = []
    for t in range(x.size(0)):
        xt = xw[t] if xmode == 'seq' else act(x[t], reduce) @ Wi.t() + m.bias_ih_l0
        hh = (act(h, reduce) if hmode == 'step' else h) @ Wh.t() + m.bias_hh_l0
        i, f, g, o = (xt + hh).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g); h = torch.sigmoid(o) * torch.tanh(c); ys.append(h)
    return torch.stack(ys)
with torch.no_grad():
    print("quantized vs float LSTM: max |diff| %.3g" % (yq - yf).abs().max().item())
    diffs = {}
    for xm in ("seq", "step"):
        for red in (False, True):
            diffs[(xm, red)] = (yq - ref(xm, "step", red)).abs().max().item()
            print("X range per %-4s, h per step, reduce_range=%-5s: max |diff| %.3g"
                  % (xm, red, diffs[(xm, red)]))
    # Only X per sequence + h per step (+ fbgemm's 7-bit reduce_range) reproduces torch.
    assert diffs[("seq", True)] < 1e-6, diffs
    assert min(v for k, v in diffs.items() if k != ("seq", True)) > 1e-4, diffs

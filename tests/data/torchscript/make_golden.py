"""Golden TorchScript / torch.save archives for tests/unit/test_torchscript.cpp.

Run with the venv's python (torch 2.13):  python make_golden.py
Writes small archives made by torch itself (torch.jit.script / torch.jit.trace / torch.save),
corrupt variants of one of them, and expected.json: every tensor's name, dtype, shape and
values, plus the RNNs' outputs on a fixed input (BitLens must reproduce them from the weights).
"""
import json
import os
import pickletools
import zipfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(5, 4)
        self.fc2 = torch.nn.Linear(4, 2)
        base = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8
        self.register_buffer("table", base)
        # A strided view into the same storage: offset 4, stride (4, 2).
        self.register_buffer("table_view", base[1:, ::2])
        self.register_buffer("halves", torch.tensor([0.5, -1.25, 3.0], dtype=torch.float16))
        self.register_buffer("steps", torch.tensor([3, -7, 11], dtype=torch.int64))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))) + self.table_view.sum() + self.halves.float().sum()


def tensors_of(module):
    out = []
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        out.append({"name": name, "dtype": str(t.dtype).replace("torch.", ""),
                    "shape": list(t.shape), "values": t.detach().double().flatten().tolist()})
    return out


def rnn_case(module, x):
    with torch.no_grad():
        y, h = module(x)
    if isinstance(h, tuple):
        h = h[0]
    return {"input": x.flatten().tolist(), "input_shape": list(x.shape),
            "output": y.flatten().tolist(), "output_shape": list(y.shape),
            "h_n": h.flatten().tolist(), "h_n_shape": list(h.shape)}


def rewrite(src, dst, member_suffix, edit):
    """Copies the zip `src` to `dst`, passing the member ending in member_suffix through edit."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith(member_suffix):
                data = edit(data)
            zout.writestr(info.filename, data)


def patch_int1(data, pattern, value):
    """Sets the BININT1 that starts the first run of opcodes matching `pattern` to `value`."""
    ops = [(op.name, arg, pos) for op, arg, pos in pickletools.genops(data)
           if op.name not in ("BINPUT", "LONG_BINPUT", "MEMOIZE")]
    for i in range(len(ops) - len(pattern) + 1):
        if all(ops[i + k][0] == name and (arg is None or ops[i + k][1] == arg)
               for k, (name, arg) in enumerate(pattern)):
            pos = ops[i][2]
            return data[: pos + 1] + bytes([value]) + data[pos + 2:]
    raise RuntimeError("opcode pattern not found")


def main():
    torch.manual_seed(20261201)
    expected = {}

    lstm = torch.nn.LSTM(4, 3, num_layers=2, batch_first=True)
    torch.jit.script(lstm).save(path("lstm_script.pt"))
    expected["lstm_script.pt"] = {"tensors": tensors_of(lstm),
                                  "rnn": rnn_case(lstm, torch.randn(2, 5, 4))}

    gru = torch.nn.GRU(3, 2, bidirectional=True)
    x = torch.randn(4, 2, 3)
    torch.jit.trace(gru, x).save(path("gru_trace.pt"))
    expected["gru_trace.pt"] = {"tensors": tensors_of(gru), "rnn": rnn_case(gru, x)}

    state_lstm = torch.nn.LSTM(2, 3)
    torch.save(state_lstm.state_dict(), path("lstm_state_dict.pt"))
    expected["lstm_state_dict.pt"] = {"tensors": tensors_of(state_lstm),
                                      "rnn": rnn_case(state_lstm, torch.randn(3, 1, 2))}

    mlp = Mlp()
    torch.jit.trace(mlp, torch.zeros(1, 5)).save(path("mlp_trace.pt"))
    expected["mlp_trace.pt"] = {"tensors": tensors_of(mlp)}

    # Corrupt variants of mlp_trace.pt (each a valid zip, so the reader gets to the defect).
    src = path("mlp_trace.pt")
    rewrite(src, path("bad_opcode.pt"), "/data.pkl", lambda d: d[:2] + b"\xfe" + d[2:])
    # fc1.weight's storage claims 200 floats; its member holds 20.
    rewrite(src, path("storage_past_end.pt"), "/data.pkl",
            lambda d: patch_int1(d, [("BININT1", 20), ("TUPLE", None), ("BINPERSID", None)], 200))
    # fc1.weight viewed as [40, 5] over its storage of 20 elements.
    rewrite(src, path("view_past_end.pt"), "/data.pkl",
            lambda d: patch_int1(d, [("BININT1", 4), ("BININT1", 5), ("TUPLE", None)], 40))
    with open(src, "rb") as f:
        data = f.read()
    with open(path("truncated.pt"), "wb") as f:
        f.write(data[: len(data) // 2])

    with open(path("expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()

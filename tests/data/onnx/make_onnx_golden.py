#!/usr/bin/env python3
"""Builds the ONNX golden files for tests/unit/test_onnx.cpp with another tool than BitLens.

The model is written by the `onnx` package (onnx.helper), not by BitLens, and the expected
output comes from torch.nn.functional, so the test checks our protobuf reader and our executor
against two independent references. Run from anywhere:

    ~/.cache/bitlens/venv/bin/pip install onnx     # only needed to regenerate
    ~/.cache/bitlens/venv/bin/python tests/data/onnx/make_onnx_golden.py

Writes, next to this script:
  small_cnn.onnx           opset 17: Conv (pads 1, strides 2) > BatchNormalization (eps 1e-3)
                           > Relu (unnamed node) > MaxPool 2x2 > Flatten > Gemm (transB=1,
                           bias from a Constant node) > Softmax(axis=1). The conv bias is
                           stored as float_data, every other weight as raw_data; the conv
                           weight is also listed as a graph input, as pre-IR-4 exporters did.
  small_cnn_input.npy      float32 [2, 1, 8, 8]
  small_cnn_expected.npy   float32 [2, 3], computed with torch.nn.functional
"""
import os

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    rng = np.random.default_rng(20240517)
    x = rng.standard_normal((2, 1, 8, 8)).astype(np.float32)
    conv_w = (rng.standard_normal((4, 1, 3, 3)) * 0.5).astype(np.float32)
    conv_b = rng.standard_normal(4).astype(np.float32)
    bn_scale = rng.uniform(0.5, 1.5, 4).astype(np.float32)
    bn_bias = rng.standard_normal(4).astype(np.float32)
    bn_mean = (rng.standard_normal(4) * 0.1).astype(np.float32)
    bn_var = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    fc_w = (rng.standard_normal((3, 16)) * 0.3).astype(np.float32)
    fc_b = rng.standard_normal(3).astype(np.float32)

    initializers = [
        numpy_helper.from_array(conv_w, "conv1.weight"),  # raw_data
        # float_data (raw=False): the packed repeated-float encoding.
        helper.make_tensor("conv1.bias", TensorProto.FLOAT, [4], conv_b.tolist(), raw=False),
        numpy_helper.from_array(bn_scale, "bn1.weight"),
        numpy_helper.from_array(bn_bias, "bn1.bias"),
        numpy_helper.from_array(bn_mean, "bn1.running_mean"),
        numpy_helper.from_array(bn_var, "bn1.running_var"),
        numpy_helper.from_array(fc_w, "fc.weight"),
    ]
    nodes = [
        helper.make_node("Constant", [], ["fc.bias"], name="fc_bias_const",
                         value=numpy_helper.from_array(fc_b, "fc_bias_value")),
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1_out"],
                         name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization",
                         ["conv1_out", "bn1.weight", "bn1.bias", "bn1.running_mean",
                          "bn1.running_var"],
                         ["bn1_out"], name="bn1", epsilon=1e-3),
        helper.make_node("Relu", ["bn1_out"], ["relu_out"]),  # no name: BitLens names it
        helper.make_node("MaxPool", ["relu_out"], ["pool_out"], name="pool",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool_out"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        inputs=[helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 8, 8]),
                helper.make_tensor_value_info("conv1.weight", TensorProto.FLOAT, [4, 1, 3, 3])],
        outputs=[helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 3])],
        initializer=initializers)
    model = helper.make_model(graph, producer_name="make_onnx_golden.py",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    helper.set_model_props(model, {"source": "make_onnx_golden.py"})
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(HERE, "small_cnn.onnx"))

    t = torch.from_numpy
    y = F.conv2d(t(x), t(conv_w), t(conv_b), stride=2, padding=1)
    y = F.batch_norm(y, t(bn_mean), t(bn_var), t(bn_scale), t(bn_bias), training=False, eps=1e-3)
    y = F.relu(y)
    y = F.max_pool2d(y, kernel_size=2, stride=2)
    y = torch.flatten(y, 1)
    y = F.linear(y, t(fc_w), t(fc_b))
    expected = F.softmax(y, dim=1).numpy().astype(np.float32)

    # Cross-check the model itself with ONNX's reference evaluator.
    from onnx.reference import ReferenceEvaluator
    (ref,) = ReferenceEvaluator(model).run(None, {"input": x})
    assert np.allclose(ref, expected, atol=1e-6), (ref, expected)

    np.save(os.path.join(HERE, "small_cnn_input.npy"), x)
    np.save(os.path.join(HERE, "small_cnn_expected.npy"), expected)
    print("wrote small_cnn.onnx, small_cnn_input.npy, small_cnn_expected.npy; output:")
    print(expected)


if __name__ == "__main__":
    main()

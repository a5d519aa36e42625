#!/usr/bin/env python3
"""Writes tiny ONNX models, one per op and opset form BitLens reads, with random inputs and
onnxruntime's outputs: OUTDIR/<case>.onnx, <case>.in<i>.npy, <case>.out<i>.npy and cases.txt
(one case name a line). test_onnx_ops.cpp runs each model in BitLens and compares.

Usage: make_onnx_op_cases.py OUTDIR
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
RNG = np.random.default_rng(20261201)
CASES = []


def ir_version(opset):
    # The IR version that came with each opset range (onnxruntime wants a plausible pair).
    return 7 if opset <= 13 else 8 if opset <= 17 else 9 if opset <= 20 else 10


def case(name, opset, nodes, inputs, outputs, inits=()):
    """inputs: [(name, array)]; outputs: [(name, TensorProto type)]; inits: [(name, array)]."""
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=ir_version(opset))
    # Outputs carry no shape (onnx.checker would want one); onnxruntime checks the rest.
    path = os.path.join(OUT, name + ".onnx")
    onnx.save(model, path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    results = session.run([n for n, _ in outputs], {n: a for n, a in inputs})
    for i, (_, a) in enumerate(inputs):
        np.save(os.path.join(OUT, f"{name}.in{i}.npy"), a)
    for i, r in enumerate(results):
        np.save(os.path.join(OUT, f"{name}.out{i}.npy"), np.asarray(r))
    CASES.append(name)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ints(values):
    return np.array(values, dtype=np.int64)


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=op.lower() + "_node", **attrs)


F = TensorProto.FLOAT
X4 = randn(2, 3, 5, 6)

# ---- Clip: min / max attributes before 11, inputs from 11 --------------------------------
case("clip_attrs_op7", 7, [node("Clip", ["x"], ["y"], min=-0.5, max=0.7)], [("x", X4)],
     [("y", F)])
case("clip_min_attr_op10", 10, [node("Clip", ["x"], ["y"], min=-0.2)], [("x", X4)], [("y", F)])
case("clip_inputs_op11", 11, [node("Clip", ["x", "lo", "hi"], ["y"])], [("x", X4)], [("y", F)],
     [("lo", np.float32(-0.3)), ("hi", np.float32(0.4))])
case("clip_max_only_op13", 13, [node("Clip", ["x", "", "hi"], ["y"])], [("x", X4)], [("y", F)],
     [("hi", np.float32(0.25))])
case("clip_relu6_op13", 13, [node("Clip", ["x", "lo", "hi"], ["y"])], [("x", X4 * 5)],
     [("y", F)], [("lo", np.float32(0)), ("hi", np.float32(6))])

# ---- Pad: attributes before 11 -----------------------------------------------------------
case("pad_constant_attrs_op7", 7,
     [node("Pad", ["x"], ["y"], pads=[0, 0, 1, 2, 0, 0, 2, 1], value=1.5)], [("x", X4)],
     [("y", F)])
case("pad_reflect_attrs_op7", 7,
     [node("Pad", ["x"], ["y"], pads=[0, 0, 2, 1, 0, 0, 1, 3], mode="reflect")], [("x", X4)],
     [("y", F)])
case("pad_edge_op11", 11, [node("Pad", ["x", "p"], ["y"], mode="edge")], [("x", X4)], [("y", F)],
     [("p", ints([0, 0, 1, 0, 0, 0, 3, 2]))])
case("pad_constant_value_op13", 13, [node("Pad", ["x", "p", "v"], ["y"])], [("x", X4)],
     [("y", F)], [("p", ints([0, 1, 1, 1, 0, 0, 1, 1])), ("v", np.float32(-2.0))])
case("pad_negative_op13", 13, [node("Pad", ["x", "p"], ["y"])], [("x", X4)], [("y", F)],
     [("p", ints([0, 0, -1, 2, 0, 0, 1, -2]))])
case("pad_wrap_op19", 19, [node("Pad", ["x", "p"], ["y"], mode="wrap")], [("x", X4)],
     [("y", F)], [("p", ints([0, 0, 2, 3, 0, 0, 1, 4]))])
case("pad_axes_reflect_op18", 18, [node("Pad", ["x", "p", "", "a"], ["y"], mode="reflect")],
     [("x", X4)], [("y", F)], [("p", ints([2, 1, 1, 2])), ("a", ints([2, -1]))])

# ---- Slice, Split, Squeeze, Unsqueeze: attributes that became inputs ---------------------
case("slice_attrs_op7", 7,
     [node("Slice", ["x"], ["y"], starts=[1, -4], ends=[3, 100], axes=[1, 3])], [("x", X4)],
     [("y", F)])
case("slice_steps_op10", 10, [node("Slice", ["x", "s", "e", "a", "st"], ["y"])], [("x", X4)],
     [("y", F)], [("s", ints([4, 0])), ("e", ints([0, 6])), ("a", ints([2, 3])),
                  ("st", ints([-2, 2]))])
case("split_attr_op7", 7, [node("Split", ["x"], ["a", "b"], axis=3, split=[2, 4])], [("x", X4)],
     [("a", F), ("b", F)])
case("split_equal_op11", 11, [node("Split", ["x"], ["a", "b", "c"], axis=-3)], [("x", X4)],
     [("a", F), ("b", F), ("c", F)])
case("split_input_op13", 13, [node("Split", ["x", "s"], ["a", "b"], axis=2)], [("x", X4)],
     [("a", F), ("b", F)], [("s", ints([1, 4]))])
case("split_num_outputs_op18", 18, [node("Split", ["x"], ["a", "b"], axis=3, num_outputs=2)],
     [("x", X4)], [("a", F), ("b", F)])
X1 = randn(2, 1, 5, 1)
case("squeeze_attr_op7", 7, [node("Squeeze", ["x"], ["y"], axes=[1, 3])], [("x", X1)], [("y", F)])
case("squeeze_input_op13", 13, [node("Squeeze", ["x", "a"], ["y"])], [("x", X1)], [("y", F)],
     [("a", ints([-1]))])
case("unsqueeze_attr_op11", 11, [node("Unsqueeze", ["x"], ["y"], axes=[0, -1])], [("x", X4)],
     [("y", F)])
case("unsqueeze_input_op13", 13, [node("Unsqueeze", ["x", "a"], ["y"])], [("x", X4)], [("y", F)],
     [("a", ints([1]))])

# ---- Reductions: axes attribute, then input (ReduceSum at 13, the others at 18) ----------
case("reducemean_attr_op7", 7, [node("ReduceMean", ["x"], ["y"], axes=[2, 3])], [("x", X4)],
     [("y", F)])
case("reducemean_input_op18", 18, [node("ReduceMean", ["x", "a"], ["y"], keepdims=0)],
     [("x", X4)], [("y", F)], [("a", ints([1]))])
case("reducesum_attr_op11", 11, [node("ReduceSum", ["x"], ["y"], axes=[-1], keepdims=0)],
     [("x", X4)], [("y", F)])
case("reducesum_input_op13", 13, [node("ReduceSum", ["x", "a"], ["y"])], [("x", X4)], [("y", F)],
     [("a", ints([0, 2]))])
case("reducesum_all_op13", 13, [node("ReduceSum", ["x"], ["y"], keepdims=0)], [("x", X4)],
     [("y", F)])
case("reducemax_attr_op11", 11, [node("ReduceMax", ["x"], ["y"], axes=[1])], [("x", X4)],
     [("y", F)])
case("reducemin_input_op18", 18, [node("ReduceMin", ["x", "a"], ["y"], keepdims=0)],
     [("x", X4)], [("y", F)], [("a", ints([2, 3]))])

# ---- Upsample / Resize -------------------------------------------------------------------
XS = randn(1, 2, 4, 5)
case("upsample_nearest_attr_op7", 7,
     [node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])], [("x", XS)], [("y", F)])
case("upsample_linear_attr_op8", 8,
     [node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 2.0], mode="linear")], [("x", XS)],
     [("y", F)])
case("upsample_nearest_input_op9", 9, [node("Upsample", ["x", "s"], ["y"])], [("x", XS)],
     [("y", F)], [("s", np.array([1, 1, 2, 2], np.float32))])
case("resize_nearest_op10", 10, [node("Resize", ["x", "s"], ["y"])], [("x", XS)], [("y", F)],
     [("s", np.array([1, 1, 3, 2], np.float32))])
case("resize_linear_op10", 10, [node("Resize", ["x", "s"], ["y"], mode="linear")], [("x", XS)],
     [("y", F)], [("s", np.array([1, 1, 2, 2], np.float32))])
case("resize_nearest_shrink_op10", 10, [node("Resize", ["x", "s"], ["y"])],
     [("x", randn(1, 2, 8, 8))], [("y", F)], [("s", np.array([1, 1, 0.5, 0.75], np.float32))])
case("resize_nearest_shrink_and_enlarge_op10", 10, [node("Resize", ["x", "s"], ["y"])],
     [("x", randn(1, 2, 8, 5))], [("y", F)], [("s", np.array([1, 1, 0.75, 2.5], np.float32))])
case("resize_linear_shrink_op10", 10, [node("Resize", ["x", "s"], ["y"], mode="linear")],
     [("x", randn(1, 2, 8, 8))], [("y", F)], [("s", np.array([1, 1, 0.5, 0.75], np.float32))])
case("resize_nearest_tf_half_pixel_op13", 13,
     [node("Resize", ["x", "", "s"], ["y"], coordinate_transformation_mode="tf_half_pixel_for_nn")],
     [("x", XS)], [("y", F)], [("s", np.array([1, 1, 1.5, 2], np.float32))])
case("resize_linear_half_pixel_symmetric_op19", 19,
     [node("Resize", ["x", "", "s"], ["y"], mode="linear",
           coordinate_transformation_mode="half_pixel_symmetric")], [("x", XS)], [("y", F)],
     [("s", np.array([1, 1, 1.7, 2.3], np.float32))])
case("resize_cubic_half_pixel_op13", 13, [node("Resize", ["x", "", "s"], ["y"], mode="cubic")],
     [("x", XS)], [("y", F)], [("s", np.array([1, 1, 2, 1.5], np.float32))])
case("resize_cubic_exclude_outside_op11", 11,
     [node("Resize", ["x", "roi", "s"], ["y"], mode="cubic", cubic_coeff_a=-0.5,
           exclude_outside=1, coordinate_transformation_mode="align_corners")], [("x", XS)],
     [("y", F)], [("roi", np.zeros(0, np.float32)), ("s", np.array([1, 1, 1.5, 2], np.float32))])
case("resize_cubic_pytorch_down_op13", 13,
     [node("Resize", ["x", "", "s"], ["y"], mode="cubic",
           coordinate_transformation_mode="pytorch_half_pixel")], [("x", randn(1, 2, 8, 9))],
     [("y", F)], [("s", np.array([1, 1, 0.5, 0.7], np.float32))])
case("resize_linear_align_corners_sizes_op11", 11,
     [node("Resize", ["x", "roi", "s", "sz"], ["y"], mode="linear",
           coordinate_transformation_mode="align_corners")], [("x", XS)], [("y", F)],
     [("roi", np.zeros(0, np.float32)), ("s", np.zeros(0, np.float32)),
      ("sz", ints([1, 2, 7, 9]))])
case("resize_nearest_half_pixel_op13", 13, [node("Resize", ["x", "", "s"], ["y"])], [("x", XS)],
     [("y", F)], [("s", np.array([1, 1, 2.5, 1.5], np.float32))])
case("resize_nearest_asymmetric_floor_op13", 13,
     [node("Resize", ["x", "", "s"], ["y"], coordinate_transformation_mode="asymmetric",
           nearest_mode="floor")], [("x", XS)], [("y", F)],
     [("s", np.array([1, 1, 2, 2], np.float32))])
case("resize_nearest_ceil_align_corners_op13", 13,
     [node("Resize", ["x", "", "", "sz"], ["y"], coordinate_transformation_mode="align_corners",
           nearest_mode="ceil")], [("x", XS)], [("y", F)], [("sz", ints([1, 2, 6, 11]))])
case("resize_nearest_prefer_ceil_op13", 13,
     [node("Resize", ["x", "", "s"], ["y"], nearest_mode="round_prefer_ceil")], [("x", XS)],
     [("y", F)], [("s", np.array([1, 1, 2, 2], np.float32))])
case("resize_linear_pytorch_half_pixel_op13", 13,
     [node("Resize", ["x", "", "s"], ["y"], mode="linear",
           coordinate_transformation_mode="pytorch_half_pixel")], [("x", XS)], [("y", F)],
     [("s", np.array([1, 1, 2, 2], np.float32))])
case("resize_linear_half_pixel_down_op13", 13,
     [node("Resize", ["x", "", "s"], ["y"], mode="linear")], [("x", randn(1, 2, 8, 10))],
     [("y", F)], [("s", np.array([1, 1, 0.5, 0.6], np.float32))])
case("resize_linear_axes_op18", 18,
     [node("Resize", ["x", "", "", "sz"], ["y"], mode="linear", axes=[2, 3])], [("x", XS)],
     [("y", F)], [("sz", ints([8, 7]))])

# ---- BatchNormalization, Dropout, Softmax, Flatten, Gemm --------------------------------
C = 3
BN = [("sc", RNG.uniform(0.5, 1.5, C).astype(np.float32)), ("b", randn(C)),
      ("m", randn(C) * 0.1), ("v", RNG.uniform(0.5, 1.5, C).astype(np.float32))]
case("batchnorm_spatial_op7", 7,
     [node("BatchNormalization", ["x", "sc", "b", "m", "v"], ["y"], epsilon=1e-3, spatial=1)],
     [("x", X4)], [("y", F)], BN)
BN_ACT = [("sc", RNG.uniform(0.5, 1.5, (C, 5, 6)).astype(np.float32)), ("b", randn(C, 5, 6)),
          ("m", randn(C, 5, 6) * 0.1), ("v", RNG.uniform(0.5, 1.5, (C, 5, 6)).astype(np.float32))]
case("batchnorm_per_activation_op7", 7,
     [node("BatchNormalization", ["x", "sc", "b", "m", "v"], ["y"], spatial=0)], [("x", X4)],
     [("y", F)], BN_ACT)
case("batchnorm_op9", 9, [node("BatchNormalization", ["x", "sc", "b", "m", "v"], ["y"])],
     [("x", X4)], [("y", F)], BN)
case("batchnorm_op15", 15, [node("BatchNormalization", ["x", "sc", "b", "m", "v"], ["y"])],
     [("x", X4)], [("y", F)], BN)
case("dropout_ratio_mask_op7", 7, [node("Dropout", ["x"], ["y", "mask"], ratio=0.3)],
     [("x", X4)], [("y", F), ("mask", F)])
case("dropout_mask_op10", 10, [node("Dropout", ["x"], ["y", "mask"])], [("x", X4)],
     [("y", F), ("mask", TensorProto.BOOL)])
case("dropout_mask_op13", 13, [node("Dropout", ["x"], ["y", "mask"])], [("x", X4)],
     [("y", F), ("mask", TensorProto.BOOL)])
case("dropout_ratio_input_op12", 12, [node("Dropout", ["x", "r"], ["y"])], [("x", X4)],
     [("y", F)], [("r", np.float32(0.2))])
X3 = randn(2, 3, 4)
case("softmax_default_axis_op7", 7, [node("Softmax", ["x"], ["y"])], [("x", X3)], [("y", F)])
case("softmax_axis0_op11", 11, [node("Softmax", ["x"], ["y"], axis=0)], [("x", X3)], [("y", F)])
case("softmax_axis_last_op11", 11, [node("Softmax", ["x"], ["y"], axis=-1)], [("x", X3)],
     [("y", F)])
case("softmax_axis1_op13", 13, [node("Softmax", ["x"], ["y"], axis=1)], [("x", X3)], [("y", F)])
case("logsoftmax_default_axis_op9", 9, [node("LogSoftmax", ["x"], ["y"])], [("x", X3)],
     [("y", F)])
case("logsoftmax_op13", 13, [node("LogSoftmax", ["x"], ["y"])], [("x", X3)], [("y", F)])
case("flatten_axis2_op7", 7, [node("Flatten", ["x"], ["y"], axis=2)], [("x", X4)], [("y", F)])
case("flatten_negative_axis_op11", 11, [node("Flatten", ["x"], ["y"], axis=-1)], [("x", X4)],
     [("y", F)])
case("gemm_broadcast_c_op7", 7,
     [node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
     [("a", randn(4, 3))], [("y", F)], [("b", randn(4, 5)), ("c", randn(5))])
case("gemm_no_c_op11", 11, [node("Gemm", ["a", "b"], ["y"], transB=1)], [("a", randn(3, 4))],
     [("y", F)], [("b", randn(5, 4))])

# ---- Constant in every attribute form ------------------------------------------------------
case("constant_tensor_op9", 9,
     [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(randn(3, 5, 6))),
      node("Add", ["x", "c"], ["y"])], [("x", X4)], [("y", F)])
case("constant_value_float_op12", 12,
     [helper.make_node("Constant", [], ["c"], value_float=2.5), node("Mul", ["x", "c"], ["y"])],
     [("x", X4)], [("y", F)])
case("constant_value_floats_op12", 12,
     [helper.make_node("Constant", [], ["c"], value_floats=[1.0, -2.0, 0.5, 3.0, 4.0, 5.0]),
      node("Sub", ["x", "c"], ["y"])], [("x", X4)], [("y", F)])
case("constant_value_ints_op13", 13,
     [helper.make_node("Constant", [], ["shape"], value_ints=[2, -1]),
      node("Reshape", ["x", "shape"], ["y"])], [("x", X4)], [("y", F)])
case("constant_value_int_op13", 13,
     [helper.make_node("Constant", [], ["c"], value_int=7),
      node("Add", ["i", "c"], ["y"])], [("i", ints([[1, 2], [3, -4]]))], [("y", TensorProto.INT64)])

# ---- Activations and elementwise ops ------------------------------------------------------
for op, opset, attrs in [("HardSigmoid", 7, {"alpha": 0.3, "beta": 0.4}),
                         ("HardSigmoid", 22, {}), ("HardSwish", 14, {}),
                         ("LeakyRelu", 7, {"alpha": 0.1}), ("LeakyRelu", 16, {}),
                         ("Elu", 7, {"alpha": 0.8}), ("Selu", 7, {}),
                         ("Selu", 7, {"alpha": 1.5, "gamma": 1.2}), ("Softplus", 7, {}),
                         ("Abs", 7, {}), ("Exp", 7, {}), ("Reciprocal", 13, {}),
                         ("Floor", 7, {}), ("Ceil", 13, {})]:
    tag = "_".join(f"{k}" for k in attrs) or "default"
    case(f"{op.lower()}_{tag}_op{opset}", opset, [node(op, ["x"], ["y"], **attrs)],
         [("x", X4 * 3)], [("y", F)])
case("log_op7", 7, [node("Log", ["x"], ["y"])], [("x", np.abs(X4) + 0.05)], [("y", F)])
case("prelu_channel_op7", 7, [node("PRelu", ["x", "s"], ["y"])], [("x", X4)], [("y", F)],
     [("s", randn(3, 1, 1))])
case("prelu_scalar_op16", 16, [node("PRelu", ["x", "s"], ["y"])], [("x", X4)], [("y", F)],
     [("s", np.array([0.25], np.float32))])
for op in ["Min", "Max", "Sum", "Mean"]:
    case(f"{op.lower()}_broadcast_op8", 8, [node(op, ["a", "b", "c"], ["y"])],
         [("a", randn(2, 3, 4)), ("b", randn(3, 1)), ("c", randn(4))], [("y", F)])
    case(f"{op.lower()}_same_shape_op7", 7, [node(op, ["a", "b"], ["y"])],
         [("a", randn(2, 3)), ("b", randn(2, 3))], [("y", F)])
case("max_single_op13", 13, [node("Max", ["a"], ["y"])], [("a", randn(2, 3))], [("y", F)])

# ---- ConvTranspose --------------------------------------------------------------------------
XC = randn(1, 4, 5, 6)
case("convtranspose_stride2_pads_outpad_op7", 7,
     [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
           output_padding=[1, 1])], [("x", XC)], [("y", F)],
     [("w", randn(4, 3, 3, 3)), ("b", randn(3))])
case("convtranspose_group_dilation_asym_op11", 11,
     [node("ConvTranspose", ["x", "w"], ["y"], group=2, dilations=[2, 1], pads=[0, 1, 2, 0],
           strides=[1, 2])], [("x", XC)], [("y", F)], [("w", randn(4, 2, 3, 2))])
case("convtranspose_output_shape_op11", 11,
     [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], output_shape=[10, 12],
           kernel_shape=[3, 3])], [("x", XC)], [("y", F)],
     [("w", randn(4, 2, 3, 3)), ("b", randn(2))])
case("convtranspose_same_upper_op11", 11,
     [node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], auto_pad="SAME_UPPER")],
     [("x", XC)], [("y", F)], [("w", randn(4, 2, 4, 4))])
case("convtranspose_1d_op13", 13,
     [node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[3], pads=[1, 2])],
     [("x", randn(2, 3, 7))], [("y", F)], [("w", randn(3, 2, 4)), ("b", randn(2))])

# ---- InstanceNormalization, Tile, DepthToSpace, SpaceToDepth, GlobalMaxPool -------------
case("instancenorm_op7", 7,
     [node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)], [("x", X4)],
     [("y", F)], [("s", randn(3)), ("b", randn(3))])
case("tile_op7", 7, [node("Tile", ["x", "r"], ["y"])], [("x", randn(2, 3, 1))], [("y", F)],
     [("r", ints([2, 1, 3]))])
case("depthtospace_dcr_op7", 7, [node("DepthToSpace", ["x"], ["y"], blocksize=2)],
     [("x", randn(1, 8, 2, 3))], [("y", F)])
case("depthtospace_crd_op13", 13, [node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")],
     [("x", randn(2, 8, 3, 2))], [("y", F)])
case("spacetodepth_op7", 7, [node("SpaceToDepth", ["x"], ["y"], blocksize=2)],
     [("x", randn(1, 2, 4, 6))], [("y", F)])
case("globalmaxpool_op7", 7, [node("GlobalMaxPool", ["x"], ["y"])], [("x", X4)], [("y", F)])

# ---- LRN and ImageScaler (ONNX model zoo classics: AlexNet, GoogLeNet, tiny-YOLOv2) -------
case("lrn_op7", 7, [node("LRN", ["x"], ["y"], size=3, alpha=1e-3, beta=0.6, bias=2.0)],
     [("x", randn(2, 6, 3, 4))], [("y", F)])
case("lrn_size5_op13", 13, [node("LRN", ["x"], ["y"], size=5)], [("x", randn(1, 4, 3, 3))],
     [("y", F)])
X_IMG = RNG.uniform(0, 255, (1, 3, 4, 5)).astype(np.float32)
case("imagescaler_op8", 8,
     [node("ImageScaler", ["x"], ["y"], bias=[-100.0, -110.0, -120.0], scale=1 / 255)],
     [("x", X_IMG)], [("y", F)])

# ---- Mish, GroupNormalization, Round, logical ops ---------------------------------------
B = TensorProto.BOOL
I64 = TensorProto.INT64
case("mish_op18", 18, [node("Mish", ["x"], ["y"])], [("x", X4 * 3)], [("y", F)])
XG = randn(2, 6, 3, 4)
case("groupnorm_per_group_op18", 18,
     [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, epsilon=1e-3)],
     [("x", XG)], [("y", F)], [("s", randn(3)), ("b", randn(3))])
case("groupnorm_per_channel_op21", 21,
     [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2)], [("x", XG)], [("y", F)],
     [("s", randn(6)), ("b", randn(6))])
case("groupnorm_3d_op21", 21,
     [node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3, stash_type=1)],
     [("x", randn(2, 6, 7))], [("y", F)], [("s", randn(6)), ("b", randn(6))])
HALVES = np.concatenate([np.arange(-3.5, 4.0, 0.5, dtype=np.float32), randn(9) * 4])
case("round_halves_op11", 11, [node("Round", ["x"], ["y"])], [("x", HALVES)], [("y", F)])
BA = RNG.random((2, 3, 4)) > 0.5
BB = RNG.random((3, 4)) > 0.5
case("not_op7", 7, [node("Not", ["a"], ["y"])], [("a", BA)], [("y", B)])
for op in ["And", "Or", "Xor"]:
    case(f"{op.lower()}_broadcast_op7", 7, [node(op, ["a", "b"], ["y"])], [("a", BA), ("b", BB)],
         [("y", B)])
case("and_from_compare_op13", 13,
     [node("Greater", ["x", "z"], ["g"]), node("Less", ["x", "o"], ["l"]),
      node("And", ["g", "l"], ["y"])], [("x", X4)], [("y", B)],
     [("z", np.float32(0)), ("o", np.float32(1))])

# ---- Mod: fmod 0 takes the divisor's sign (integers), fmod 1 the dividend's ------------
IA = RNG.integers(-20, 21, (3, 4)).astype(np.int64)
IB = np.array([3, -3, 7, -5], np.int64)
case("mod_int64_broadcast_op13", 13, [node("Mod", ["a", "b"], ["y"])], [("a", IA), ("b", IB)],
     [("y", I64)])
case("mod_int32_fmod_op10", 10, [node("Mod", ["a", "b"], ["y"], fmod=1)],
     [("a", IA.astype(np.int32)), ("b", IB.astype(np.int32))], [("y", TensorProto.INT32)])
case("mod_float_fmod_op13", 13, [node("Mod", ["a", "b"], ["y"], fmod=1)],
     [("a", randn(3, 4) * 10), ("b", np.float32([1.5, -2.5, 3.0, -0.75]))], [("y", F)])
# A shape computed with Mod on shape values, as torch.onnx.export writes for ViT's heads.
case("mod_shape_value_op13", 13,
     [node("Shape", ["x"], ["s"]), node("Mod", ["s", "m"], ["r"]), node("Add", ["s", "r"], ["t"]),
      node("ConstantOfShape", ["t"], ["y"], value=numpy_helper.from_array(np.float32([2.0])))],
     [("x", randn(2, 3))], [("y", F)], [("m", ints([2]))])

# ---- More reductions: axes attribute before 18, input from 18 --------------------------
XP = RNG.uniform(0.5, 1.5, (2, 3, 4, 5)).astype(np.float32)
case("reduceprod_attr_op13", 13, [node("ReduceProd", ["x"], ["y"], axes=[1, 3])], [("x", XP)],
     [("y", F)])
case("reduceprod_input_op18", 18, [node("ReduceProd", ["x", "a"], ["y"], keepdims=0)],
     [("x", XP)], [("y", F)], [("a", ints([0, -1]))])
case("reduceprod_int64_all_op11", 11, [node("ReduceProd", ["x"], ["y"], keepdims=0)],
     [("x", RNG.integers(-3, 4, (2, 3)).astype(np.int64))], [("y", I64)])
case("reducel2_attr_op11", 11, [node("ReduceL2", ["x"], ["y"], axes=[2, 3])], [("x", X4)],
     [("y", F)])
case("reducel2_input_op18", 18, [node("ReduceL2", ["x", "a"], ["y"], keepdims=0)], [("x", X4)],
     [("y", F)], [("a", ints([1]))])
case("reducel2_empty_axes_noop_op18", 18,
     [node("ReduceL2", ["x", "a"], ["y"], noop_with_empty_axes=1)], [("x", X4)], [("y", F)],
     [("a", np.zeros(0, np.int64))])
case("reducel1_op13", 13, [node("ReduceL1", ["x"], ["y"], axes=[-1], keepdims=0)], [("x", X4)],
     [("y", F)])
case("reducel1_input_op18", 18, [node("ReduceL1", ["x", "a"], ["y"])], [("x", X4)], [("y", F)],
     [("a", ints([0, 2]))])
case("reducelogsumexp_attr_op7", 7, [node("ReduceLogSumExp", ["x"], ["y"], axes=[1])],
     [("x", X4 * 4)], [("y", F)])
case("reducelogsumexp_input_op18", 18, [node("ReduceLogSumExp", ["x", "a"], ["y"], keepdims=0)],
     [("x", X4 * 4)], [("y", F)], [("a", ints([2, 3]))])
case("reducesumsquare_attr_op13", 13, [node("ReduceSumSquare", ["x"], ["y"], axes=[0, 2])],
     [("x", X4)], [("y", F)])
case("reducesumsquare_all_op18", 18, [node("ReduceSumSquare", ["x"], ["y"], keepdims=0)],
     [("x", X4)], [("y", F)])

# ---- ArgMax / ArgMin, TopK --------------------------------------------------------------
TIES = RNG.integers(0, 3, (3, 4, 5)).astype(np.int32)
case("argmax_default_op7", 7, [node("ArgMax", ["x"], ["y"])], [("x", X4)], [("y", I64)])
case("argmax_axis_no_keepdims_op11", 11, [node("ArgMax", ["x"], ["y"], axis=-1, keepdims=0)],
     [("x", X4)], [("y", I64)])
case("argmax_ties_first_op13", 13, [node("ArgMax", ["x"], ["y"], axis=1)], [("x", TIES)],
     [("y", I64)])
case("argmax_ties_last_op13", 13,
     [node("ArgMax", ["x"], ["y"], axis=2, keepdims=0, select_last_index=1)], [("x", TIES)],
     [("y", I64)])
case("argmin_op7", 7, [node("ArgMin", ["x"], ["y"], axis=2)], [("x", X4)], [("y", I64)])
case("argmin_ties_last_op12", 12, [node("ArgMin", ["x"], ["y"], axis=0, select_last_index=1)],
     [("x", TIES)], [("y", I64)])
XT = randn(3, 7, 4)
case("topk_attr_op7", 7, [node("TopK", ["x"], ["v", "i"], k=3, axis=1)], [("x", XT)],
     [("v", F), ("i", I64)])
case("topk_input_op10", 10, [node("TopK", ["x", "k"], ["v", "i"])], [("x", XT)],
     [("v", F), ("i", I64)], [("k", ints([2]))])
case("topk_smallest_op11", 11, [node("TopK", ["x", "k"], ["v", "i"], axis=0, largest=0)],
     [("x", XT)], [("v", F), ("i", I64)], [("k", ints([2]))])
case("topk_ties_int_op11", 11, [node("TopK", ["x", "k"], ["v", "i"], axis=-1)],
     [("x", TIES.astype(np.int64))], [("v", I64), ("i", I64)], [("k", ints([3]))])
# Unsorted output may come in any order: the indices are sorted (by a second TopK) and the
# values summed before they are compared.
case("topk_unsorted_op11", 11,
     [node("TopK", ["x", "k"], ["v", "i"], axis=1, sorted=0),
      helper.make_node("TopK", ["i", "k"], ["i_sorted", "where"], axis=1, largest=0,
                       name="sort_indices"),
      helper.make_node("ReduceSum", ["v"], ["v_sum"], axes=[1], name="sum_values")],
     [("x", XT)], [("i_sorted", I64), ("v_sum", F)], [("k", ints([5]))])

# ---- CumSum, Trilu ----------------------------------------------------------------------
case("cumsum_op11", 11, [node("CumSum", ["x", "a"], ["y"])], [("x", X4)], [("y", F)],
     [("a", np.int32(2))])
case("cumsum_exclusive_op11", 11, [node("CumSum", ["x", "a"], ["y"], exclusive=1)],
     [("x", X4)], [("y", F)], [("a", ints(-1))])
case("cumsum_reverse_op14", 14, [node("CumSum", ["x", "a"], ["y"], reverse=1)], [("x", X4)],
     [("y", F)], [("a", ints(1))])
case("cumsum_exclusive_reverse_int_op14", 14,
     [node("CumSum", ["x", "a"], ["y"], exclusive=1, reverse=1)],
     [("x", RNG.integers(-5, 6, (3, 6)).astype(np.int64))], [("y", I64)], [("a", ints(1))])
case("trilu_upper_op14", 14, [node("Trilu", ["x"], ["y"])], [("x", randn(4, 5))], [("y", F)])
case("trilu_lower_k_op14", 14, [node("Trilu", ["x", "k"], ["y"], upper=0)],
     [("x", randn(2, 4, 5))], [("y", F)], [("k", ints(-1))])
case("trilu_upper_k_batched_op14", 14, [node("Trilu", ["x", "k"], ["y"])],
     [("x", randn(2, 3, 5, 4))], [("y", F)], [("k", ints(2))])

# ---- GatherElements, GatherND, ScatterND, NonZero -----------------------------------------
XE = randn(3, 4, 5)
case("gatherelements_op11", 11, [node("GatherElements", ["x", "i"], ["y"], axis=1)],
     [("x", XE)], [("y", F)], [("i", RNG.integers(-4, 4, (3, 2, 5)).astype(np.int64))])
case("gatherelements_int32_axis0_op13", 13, [node("GatherElements", ["x", "i"], ["y"])],
     [("x", XE)], [("y", F)], [("i", RNG.integers(0, 3, (2, 4, 5)).astype(np.int32))])
case("gathernd_op11", 11, [node("GatherND", ["x", "i"], ["y"])], [("x", XE)], [("y", F)],
     [("i", ints([[[0, 1], [2, -1]], [[1, 3], [0, 0]]]))])
case("gathernd_full_index_op13", 13, [node("GatherND", ["x", "i"], ["y"])], [("x", XE)],
     [("y", F)], [("i", ints([[0, 1, 2], [2, 3, 4], [1, 0, -1]]))])
case("gathernd_batch_dims_op12", 12, [node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
     [("x", XE)], [("y", F)], [("i", ints([[[1], [3]], [[0], [0]], [[2], [1]]]))])
case("gathernd_batch_dims2_op13", 13, [node("GatherND", ["x", "i"], ["y"], batch_dims=2)],
     [("x", XE)], [("y", F)], [("i", RNG.integers(0, 5, (3, 4, 2, 1)).astype(np.int64))])
case("scatternd_op11", 11, [node("ScatterND", ["x", "i", "u"], ["y"])], [("x", XE)],
     [("y", F)], [("i", ints([[0, 1], [2, 3]])), ("u", randn(2, 5))])
case("scatternd_add_duplicates_op16", 16,
     [node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")], [("x", XE)], [("y", F)],
     [("i", ints([[1], [0], [1]])), ("u", randn(3, 4, 5))])
case("scatternd_mul_op16", 16, [node("ScatterND", ["x", "i", "u"], ["y"], reduction="mul")],
     [("x", XE)], [("y", F)], [("i", ints([[2, 0, 1], [0, 3, 4], [2, 0, 1]])), ("u", randn(3))])
case("scatternd_max_op18", 18, [node("ScatterND", ["x", "i", "u"], ["y"], reduction="max")],
     [("x", XE)], [("y", F)], [("i", ints([[0, 2], [0, 2], [1, 1]])), ("u", randn(3, 5))])
case("scatternd_data_input_op13", 13, [node("ScatterND", ["x", "i", "u"], ["y"])],
     [("x", XE), ("u", randn(2, 4, 5))], [("y", F)], [("i", ints([[2], [0]]))])
XZ = np.where(RNG.random((3, 4)) > 0.6, randn(3, 4), 0).astype(np.float32)
case("nonzero_op9", 9, [node("NonZero", ["x"], ["y"])], [("x", XZ)], [("y", I64)])
case("nonzero_bool_op13", 13, [node("NonZero", ["x"], ["y"])], [("x", BA)], [("y", I64)])

# ---- Einsum: the forms exporters write --------------------------------------------------
for tag, eq, shapes in [("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
                        ("batched_matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                        ("transpose", "ij->ji", [(3, 4)]),
                        ("reduce", "bij->bj", [(2, 3, 4)]),
                        ("trace_like_implicit", "ij,ij", [(3, 4), (3, 4)]),
                        ("attention_scores", "bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
                        ("attention_values", "bhij,bhjd->bhid", [(2, 3, 4, 6), (2, 3, 6, 5)]),
                        ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
                        ("outer", "i,j->ij", [(3,), (4,)]),
                        ("spaced", "b i j , b j k -> b i k", [(2, 3, 4), (2, 4, 5)])]:
    names = [f"x{i}" for i in range(len(shapes))]
    case(f"einsum_{tag}_op12", 12, [node("Einsum", names, ["y"], equation=eq)],
         [(n, randn(*sh)) for n, sh in zip(names, shapes)], [("y", F)])

# ---- ConstantOfShape: static and computed shapes ------------------------------------------
case("constantofshape_default_op9", 9,
     [helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill"),
      node("Add", ["x", "c"], ["y"])], [("x", X4)], [("y", F)], [("s", ints([3, 5, 6]))])
case("constantofshape_int_from_shape_op13", 13,
     [node("Shape", ["x"], ["s"]),
      helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill",
                       value=numpy_helper.from_array(ints([7])))], [("x", X4)], [("y", I64)])
case("constantofshape_float_op20", 20,
     [node("Shape", ["x"], ["s"]),
      helper.make_node("ConstantOfShape", ["s"], ["c"], name="fill",
                       value=numpy_helper.from_array(np.array([2.5], np.float32))),
      node("Mul", ["x", "c"], ["y"])], [("x", X4)], [("y", F)])

# ---- If with a condition known before the run: the branch taken is read ------------------
def branch(name, nodes, outputs, inits=()):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(o, F, None)
                                               for o in outputs],
                             [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])


THEN = branch("then", [helper.make_node("Relu", ["x"], ["t"], name="relu")], ["t"])
ELSE = branch("else", [helper.make_node("Mul", ["x", "w"], ["e"], name="scale"),
                       helper.make_node("Constant", [], ["one"], name="one",
                                        value=numpy_helper.from_array(np.float32(1.0))),
                       helper.make_node("Add", ["e", "one"], ["e1"], name="shift")],
              ["e1"], [("w", np.float32(-2.0))])
case("if_initializer_true_op13", 13,
     [node("If", ["c"], ["y"], then_branch=THEN, else_branch=ELSE)], [("x", X4)], [("y", F)],
     [("c", np.array(True))])
case("if_constant_false_op11", 11,
     [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(False))),
      node("If", ["c"], ["y"], then_branch=THEN, else_branch=ELSE)], [("x", X4)], [("y", F)])
case("if_folded_condition_op13", 13,
     [node("Equal", ["p", "q"], ["eq"]), helper.make_node("Not", ["eq"], ["c"], name="not"),
      node("If", ["c"], ["y", "z"],
           then_branch=branch("then2", [helper.make_node("Neg", ["x"], ["n"], name="neg"),
                                        helper.make_node("Abs", ["x"], ["a"], name="abs")],
                              ["n", "a"]),
           else_branch=branch("else2", [helper.make_node("Identity", ["x"], ["i"], name="id"),
                                        helper.make_node("Exp", ["x"], ["x2"], name="exp")],
                              ["i", "x2"]))],
     [("x", X4)], [("y", F), ("z", F)], [("p", ints([2])), ("q", ints([3]))])

# ---- RNN: opset 7 and 14 (layout) forms --------------------------------------------------
S, NB, FI, H = 4, 2, 3, 5
XR = randn(S, NB, FI)
case("rnn_forward_op7", 7, [node("RNN", ["x", "w", "r"], ["y", "yh"], hidden_size=H)],
     [("x", XR)], [("y", F), ("yh", F)], [("w", randn(1, H, FI)), ("r", randn(1, H, H) * 0.5)])
case("rnn_bidirectional_bias_h0_op7", 7,
     [node("RNN", ["x", "w", "r", "b", "", "h0"], ["y", "yh"], hidden_size=H,
           direction="bidirectional")], [("x", XR)], [("y", F), ("yh", F)],
     [("w", randn(2, H, FI)), ("r", randn(2, H, H) * 0.5), ("b", randn(2, 2 * H)),
      ("h0", randn(2, NB, H))])
case("rnn_reverse_relu_op14", 14,
     [node("RNN", ["x", "w", "r", "b"], ["y"], hidden_size=H, direction="reverse",
           activations=["Relu"])], [("x", XR)], [("y", F)],
     [("w", randn(1, H, FI)), ("r", randn(1, H, H) * 0.3), ("b", randn(1, 2 * H))])
# (onnxruntime runs no RNN with layout = 1, so that form has no case here.)
case("rnn_only_yh_two_activations_op14", 14,
     [node("RNN", ["x", "w", "r"], ["", "yh"], hidden_size=H, direction="bidirectional",
           activations=["Tanh", "Relu"], clip=1.5)],
     [("x", XR)], [("yh", F)],
     [("w", randn(2, H, FI)), ("r", randn(2, H, H) * 0.3)])
case("rnn_leakyrelu_alpha_op7", 7,
     [node("RNN", ["x", "w", "r"], ["y"], hidden_size=H, activations=["LeakyRelu"],
           activation_alpha=[0.2])], [("x", XR)], [("y", F)],
     [("w", randn(1, H, FI)), ("r", randn(1, H, H) * 0.3)])

# ---- The newest opsets: ops whose definitions did not change read the same --------------
case("flatten_op24", 24, [node("Flatten", ["x"], ["y"], axis=1)], [("x", X4)], [("y", F)])
case("unsqueeze_op25", 25, [node("Unsqueeze", ["x", "a"], ["y"])], [("x", X4)], [("y", F)],
     [("a", ints([-1]))])
case("conv_hardswish_op22", 22,
     [node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), node("HardSwish", ["c"], ["y"])],
     [("x", X4)], [("y", F)], [("w", randn(4, 3, 3, 3))])

with open(os.path.join(OUT, "cases.txt"), "w") as f:
    f.write("\n".join(CASES) + "\n")
print(len(CASES), "cases")

"""The reader's onnx-free pieces against onnx itself: the carried descriptor is the pinned onnx's
(so the message classes are onnx's, whichever is imported first) and ``arrays.to_array`` gives
what ``numpy_helper.to_array`` gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper, onnx_ml_pb2

from dashboard.intake import arrays, proto

ROOT = Path(__file__).resolve().parent.parent


def test_the_carried_descriptor_and_constants_are_the_installed_onnxs():
    """After an onnx upgrade: ``python -m dashboard.intake.proto`` rewrites them."""
    assert proto.DESCRIPTOR_FILE.read_bytes() == onnx_ml_pb2.DESCRIPTOR.serialized_pb
    assert proto.LATEST_OPSET == onnx.defs.onnx_opset_version()
    assert proto.IR_VERSION == onnx.IR_VERSION


def test_the_message_classes_are_onnxs():
    """Here onnx or the reader came first (whichever the test session imported first)."""
    assert proto.ModelProto is onnx.ModelProto and proto.TensorProto is onnx.TensorProto


def test_the_message_classes_are_onnxs_when_the_reader_comes_first():
    script = ("from dashboard.intake import proto\nimport onnx\n"
              "print(proto.ModelProto is onnx.ModelProto and proto.TensorProto is onnx.TensorProto)")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr[-2000:]


def tensors() -> list[TensorProto]:
    """Every way a small tensor is stored: raw bytes and each typed field, scalars, strings,
    complex numbers, half floats as bits."""
    out = []
    for dtype in (np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                  np.uint32, np.uint64, np.bool_, np.complex64, np.complex128):
        values = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
        out.append(numpy_helper.from_array(values, f"raw_{np.dtype(dtype).name}"))
        out.append(helper.make_tensor(f"typed_{np.dtype(dtype).name}", helper.np_dtype_to_tensor_dtype(values.dtype),
                                      values.shape, values.flatten().tolist()))
    out.append(numpy_helper.from_array(np.array(0.5, dtype=np.float32), "scalar"))
    out.append(helper.make_tensor("strings", TensorProto.STRING, [2], [b"ab", "c\u00e9".encode()]))
    return out


@pytest.mark.parametrize("tensor", tensors(), ids=lambda t: t.name)
def test_to_array_matches_numpy_helper(tensor):
    ours, theirs = arrays.to_array(tensor), numpy_helper.to_array(tensor)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("raw", [True, False])
def test_bfloat16_comes_back_as_the_same_numbers_in_float32(raw):
    values = np.array([1.0, -2.5, 0.15625, 3e38], dtype=np.float32)
    tensor = helper.make_tensor("b", TensorProto.BFLOAT16, [4], values.tolist())
    if raw:
        tensor = numpy_helper.from_array(numpy_helper.to_array(tensor), "b")
    assert arrays.to_array(tensor).dtype == np.float32
    assert arrays.to_array(tensor).tolist() == numpy_helper.to_array(tensor).astype(np.float32).tolist()


def test_tensors_numpy_cannot_hold_or_whose_data_does_not_fill_them_are_refused():
    """The reader then keeps the header without values (``graph._tensor_value``)."""
    four_bit = helper.make_tensor("q", TensorProto.INT4, [4], [1, 2, 3, 4])
    short = helper.make_tensor("s", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    del short.float_data[2]
    for tensor in (four_bit, short):
        with pytest.raises(ValueError):
            arrays.to_array(tensor)

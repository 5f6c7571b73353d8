"""The values of a small tensor as a numpy array, without onnx's ``numpy_helper``.

Why not ``onnx.numpy_helper.to_array``: importing it imports onnx and ``ml_dtypes`` (about a
second), and the reader needs values only for the small tensors nodes carry (a Constant's value, a
ConstantOfShape's fill, a one-element scale). Same results for the element types numpy has; a
``bfloat16`` tensor comes back as ``float32`` (exactly: bfloat16 is float32's upper half). The
8-, 6-, 4- and 2-bit types, which numpy lacks, are ``ValueError``, as is a tensor whose data does
not fill its dims: the reader then keeps the header without values, as for a weight.
"""

from __future__ import annotations

import sys

import numpy as np

from dashboard.intake.proto import TensorProto

_T = TensorProto
# element type -> (numpy dtype of its values, the typed field it is stored in without raw_data)
_NUMPY = {
    _T.FLOAT: (np.float32, "float_data"), _T.DOUBLE: (np.float64, "double_data"),
    _T.INT64: (np.int64, "int64_data"), _T.INT32: (np.int32, "int32_data"),
    _T.INT16: (np.int16, "int32_data"), _T.INT8: (np.int8, "int32_data"),
    _T.UINT64: (np.uint64, "uint64_data"), _T.UINT32: (np.uint32, "uint64_data"),
    _T.UINT16: (np.uint16, "int32_data"), _T.UINT8: (np.uint8, "int32_data"),
    _T.BOOL: (np.bool_, "int32_data"), _T.FLOAT16: (np.float16, "int32_data"),
    _T.COMPLEX64: (np.complex64, "float_data"), _T.COMPLEX128: (np.complex128, "double_data"),
}
# types whose typed field holds the bits of each element, not its value
_BITS_IN_INT32 = {_T.FLOAT16: np.uint16, _T.BFLOAT16: np.uint16}


def to_array(tensor: TensorProto) -> np.ndarray:
    """The tensor's values, shaped by its dims (data in the message itself, not external)."""
    data_type, dims = tensor.data_type, tuple(tensor.dims)
    if tensor.HasField("segment") or tensor.data_location == TensorProto.EXTERNAL:
        raise ValueError("segmented or external tensor")
    if data_type == TensorProto.STRING:
        return np.asarray([s.decode("utf-8") for s in tensor.string_data]).astype(object).reshape(dims)
    if data_type == TensorProto.BFLOAT16:
        bits = _raw(tensor, np.uint16) if tensor.HasField("raw_data") else \
            np.array(tensor.int32_data, dtype=np.int32).astype(np.uint16)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(dims)
    if data_type not in _NUMPY:
        raise ValueError(f"element type {data_type} has no numpy dtype")
    dtype, field = _NUMPY[data_type]
    if tensor.HasField("raw_data"):
        return _raw(tensor, dtype).reshape(dims)
    values = getattr(tensor, field)
    if data_type in _BITS_IN_INT32:
        return np.array(values, dtype=np.int32).astype(_BITS_IN_INT32[data_type]).view(dtype).reshape(dims)
    if data_type in (TensorProto.COMPLEX64, TensorProto.COMPLEX128):
        pairs = np.array(values, dtype=np.float32 if data_type == TensorProto.COMPLEX64 else np.float64)
        return pairs.view(dtype).reshape(dims)
    return np.array(values).astype(dtype).reshape(dims)


def _raw(tensor: TensorProto, dtype) -> np.ndarray:
    values = np.frombuffer(tensor.raw_data, dtype=np.dtype(dtype).newbyteorder("<"))
    return values.astype(dtype) if sys.byteorder == "big" else values

"""ONNX's protobuf messages (``ModelProto``, ``GraphProto`` ...) without importing ``onnx``.

Why: ``import onnx`` costs about a second of CPU (most of it ``ml_dtypes``' extension, which onnx
imports for its numpy helpers), paid by every process that reads a model, while reading one needs
only the message classes. This module builds them with ``google.protobuf`` from the descriptor of
``onnx/onnx-ml.proto`` that the package carries (``onnx-ml.pb``, the serialized
``FileDescriptorProto`` of the pinned onnx, byte for byte).

The descriptor is added to protobuf's default pool under onnx's own file name, so the classes
*are* onnx's: whichever of this module and ``onnx`` comes first defines them, the other finds the
identical file and reuses it, and an ``onnx.ModelProto`` passes wherever this module's is expected
(tests and sample generators use onnx's helpers freely). That holds while the carried descriptor is
onnx's: ``tests/test_proto.py`` checks it against the installed onnx, and ``python -m
dashboard.intake.proto`` rewrites it after an onnx upgrade.
"""

from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf import descriptor_pool, message_factory

DESCRIPTOR_FILE = Path(__file__).with_name("onnx-ml.pb")
PROTO_NAME = "onnx/onnx-ml.proto"
# onnx.defs.onnx_opset_version() of the pinned onnx (an onnx upgrade rewrites it, see main()).
LATEST_OPSET = 28


def _file():
    pool = descriptor_pool.Default()
    try:
        return pool.FindFileByName(PROTO_NAME)  # onnx, or this module, came first
    except KeyError:
        return pool.AddSerializedFile(DESCRIPTOR_FILE.read_bytes())


FILE = _file()
SERIALIZED = FILE.serialized_pb

_messages = FILE.message_types_by_name
AttributeProto = message_factory.GetMessageClass(_messages["AttributeProto"])
FunctionProto = message_factory.GetMessageClass(_messages["FunctionProto"])
GraphProto = message_factory.GetMessageClass(_messages["GraphProto"])
ModelProto = message_factory.GetMessageClass(_messages["ModelProto"])
NodeProto = message_factory.GetMessageClass(_messages["NodeProto"])
OperatorSetIdProto = message_factory.GetMessageClass(_messages["OperatorSetIdProto"])
SparseTensorProto = message_factory.GetMessageClass(_messages["SparseTensorProto"])
TensorProto = message_factory.GetMessageClass(_messages["TensorProto"])
TensorShapeProto = message_factory.GetMessageClass(_messages["TensorShapeProto"])
TypeProto = message_factory.GetMessageClass(_messages["TypeProto"])
ValueInfoProto = message_factory.GetMessageClass(_messages["ValueInfoProto"])
IR_VERSION = FILE.enum_types_by_name["Version"].values_by_name["IR_VERSION"].number


def main() -> int:
    """Rewrite the carried descriptor and ``LATEST_OPSET`` from the installed onnx (after an
    upgrade). In a child process: here the carried descriptor already defines onnx's file, and a
    different one would make ``import onnx`` fail."""
    import re
    import subprocess

    script = ("import sys, onnx, onnx.defs; from onnx import onnx_ml_pb2; "
              "open(sys.argv[1], 'wb').write(onnx_ml_pb2.DESCRIPTOR.serialized_pb); "
              "print(onnx.defs.onnx_opset_version(), onnx.__version__)")
    done = subprocess.run([sys.executable, "-c", script, str(DESCRIPTOR_FILE)], capture_output=True, text=True,
                          check=True)
    opset, version = done.stdout.split()
    source = Path(__file__).read_text(encoding="utf-8")
    source = re.sub(r"^LATEST_OPSET = \d+$", f"LATEST_OPSET = {opset}", source, flags=re.M)
    Path(__file__).write_text(source, encoding="utf-8")
    print(f"wrote {DESCRIPTOR_FILE.name} and LATEST_OPSET = {opset} from onnx {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

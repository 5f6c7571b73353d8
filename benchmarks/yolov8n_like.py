"""A structural stand-in for Ultralytics YOLOv8n, built with ``onnx.helper`` and numpy only.

    .venv/bin/python benchmarks/yolov8n_like.py --out /tmp/yolov8n_like_320.onnx [--imgsz 320]

What it is: the graph ``yolo export model=yolov8n.pt format=onnx opset=17 imgsz=320`` writes, layer
for layer: the same ops (Conv with BatchNorm folded into its bias, SiLU as ``Sigmoid`` + ``Mul``,
C2f's Split / Add / Concat, SPPF's three 5x5 MaxPools, nearest Resize x2, the Detect head with DFL
and dist2bbox on constant anchors and strides), the same channel counts, tensor shapes, node names
(``/model.0/conv/Conv``, ``/model.22/dfl/Softmax``, ...) and metadata (``imgsz``, ``stride``,
``task``, ``names``); input ``images`` [1, 3, imgsz, imgsz], output ``output0`` [1, 84, N] with
N = (imgsz/8)^2 + (imgsz/16)^2 + (imgsz/32)^2 (2100 at 320), about 3.15 M parameters. Its weights
are random (seeded, He-scaled so activations stay finite), so figures about compile time,
partitioning and latency transfer to the real model; figures about accuracy do not.

Why it exists: no YOLOv8n ONNX ships in any package reachable here, and exporting one needs torch,
ultralytics and the trained checkpoint download.
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET, IR_VERSION = 17, 8
NC, REG_MAX, STRIDES = 80, 16, (8, 16, 32)
COCO = ("person|bicycle|car|motorcycle|airplane|bus|train|truck|boat|traffic light|fire hydrant|stop sign|"
        "parking meter|bench|bird|cat|dog|horse|sheep|cow|elephant|bear|zebra|giraffe|backpack|umbrella|handbag|"
        "tie|suitcase|frisbee|skis|snowboard|sports ball|kite|baseball bat|baseball glove|skateboard|surfboard|"
        "tennis racket|bottle|wine glass|cup|fork|knife|spoon|bowl|banana|apple|sandwich|orange|broccoli|carrot|"
        "hot dog|pizza|donut|cake|chair|couch|potted plant|bed|dining table|toilet|tv|laptop|mouse|remote|keyboard|"
        "cell phone|microwave|oven|toaster|sink|refrigerator|book|clock|vase|scissors|teddy bear|hair drier|"
        "toothbrush").split("|")


class _Graph:
    """Collects nodes and initializers; each ``op`` call adds one node named in the exporter's style."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, name: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x: str, p: str, c1: int, c2: int, k: int = 1, s: int = 1, bias: bool = True) -> str:
        """A plain Conv ``p + "/Conv"``: He-scaled weights (std sqrt(2 / fan_in): activations shrink a
        little with depth, while a gain of 1.7 / sqrt(fan_in) or more already grows them past fp16's
        range by the neck), a small bias standing in for the folded BatchNorm."""
        w = self.rng.normal(0.0, np.sqrt(2.0 / (c1 * k * k)), (c2, c1, k, k)).astype(np.float32)
        segs = p.strip("/").split("/")  # "/model.22/cv2.0/cv2.0.0/conv" -> "model.22.cv2.0.0.conv"
        module = ".".join(a for a, b in zip(segs, segs[1:] + [""]) if not b.startswith(a + "."))
        ins = [x, self.const(f"{module}.weight", w)]
        if bias:
            ins.append(self.const(f"{module}.bias", self.rng.normal(0.0, 0.05, c2).astype(np.float32)))
        return self.op("Conv", f"{p}/Conv", ins, kernel_shape=[k, k], strides=[s, s], pads=[k // 2] * 4,
                       dilations=[1, 1], group=1)


def cbs(g: _Graph, x: str, p: str, c1: int, c2: int, k: int = 1, s: int = 1) -> str:
    """Ultralytics ``Conv``: Conv2d (BN folded in) + SiLU, exported as Sigmoid and Mul."""
    y = g.conv(x, f"{p}/conv", c1, c2, k, s)
    return g.op("Mul", f"{p}/act/Mul", [y, g.op("Sigmoid", f"{p}/act/Sigmoid", [y])])


def c2f(g: _Graph, x: str, p: str, c1: int, c2: int, n: int, shortcut: bool) -> str:
    """C2f: cv1, Split in halves, n Bottlenecks (3x3, 3x3, optional Add) on the last part, Concat, cv2."""
    c = c2 // 2
    y = cbs(g, x, f"{p}/cv1", c1, 2 * c)
    ys = g.op("Split", f"{p}/Split", [y, g.const(f"{p}/split_sizes", np.array([c, c]))], n_out=2, axis=1)
    for i in range(n):
        m = f"{p}/m.{i}"
        y = cbs(g, cbs(g, ys[-1], f"{m}/cv1", c, c, 3), f"{m}/cv2", c, c, 3)
        ys.append(g.op("Add", f"{m}/Add", [ys[-1], y]) if shortcut else y)
    return cbs(g, g.op("Concat", f"{p}/Concat", ys, axis=1), f"{p}/cv2", (2 + n) * c, c2)


def sppf(g: _Graph, x: str, p: str, c1: int, c2: int, k: int = 5) -> str:
    """SPPF: cv1 to c1/2, three chained MaxPool k x k (stride 1, same size), Concat of all four, cv2."""
    ys = [cbs(g, x, f"{p}/cv1", c1, c1 // 2)]
    for suffix in ("", "_1", "_2"):
        ys.append(g.op("MaxPool", f"{p}/m{suffix}/MaxPool", [ys[-1]], kernel_shape=[k, k], strides=[1, 1],
                       pads=[k // 2] * 4, dilations=[1, 1], ceil_mode=0))
    return cbs(g, g.op("Concat", f"{p}/Concat", ys, axis=1), f"{p}/cv2", 2 * c1, c2)


def upsample(g: _Graph, x: str, p: str) -> str:
    """nn.Upsample(scale_factor=2, mode="nearest") as torch exports it."""
    return g.op("Resize", f"{p}/Resize", [x, "", g.const(f"{p}/scales", np.array([1, 1, 2, 2], np.float32))],
                coordinate_transformation_mode="asymmetric", mode="nearest", nearest_mode="floor",
                cubic_coeff_a=-0.75)


def anchors(imgsz: int) -> tuple[np.ndarray, np.ndarray]:
    """make_anchors(offset 0.5), transposed as Detect keeps them: points [1, 2, N] and strides [1, N]."""
    pts, strd = [], []
    for s in STRIDES:
        h = w = imgsz // s
        sy, sx = np.meshgrid(np.arange(h) + 0.5, np.arange(w) + 0.5, indexing="ij")
        pts.append(np.stack([sx.ravel(), sy.ravel()], 0))
        strd.append(np.full(h * w, s))
    return np.concatenate(pts, 1)[None].astype(np.float32), np.concatenate(strd)[None].astype(np.float32)


def detect(g: _Graph, xs: list[str], chs: tuple[int, ...], imgsz: int) -> str:
    """Detect (YOLOv8): per scale box and class branches, Concat, Reshape, Concat; Split; DFL;
    dist2bbox on constant anchors; Sigmoid on classes; Concat to [1, 4 + nc, N]."""
    p, c2, c3, no = "/model.22", max(16, chs[0] // 4, 4 * REG_MAX), max(chs[0], min(NC, 100)), NC + 4 * REG_MAX
    flat = []
    for i, (x, c) in enumerate(zip(xs, chs)):
        branches = []
        for cv, cm, cout in (("cv2", c2, 4 * REG_MAX), ("cv3", c3, NC)):
            b = f"{p}/{cv}.{i}/{cv}.{i}"
            y = cbs(g, cbs(g, x, f"{b}.0", c, cm, 3), f"{b}.1", cm, cm, 3)
            branches.append(g.conv(y, f"{b}.2", cm, cout))
        cat = g.op("Concat", f"{p}/Concat" + (f"_{i}" if i else ""), branches, axis=1)
        flat.append(g.op("Reshape", f"{p}/Reshape" + (f"_{i}" if i else ""),
                         [cat, g.const(f"{p}/shape_{i}", np.array([1, no, -1]))]))
    x_cat = g.op("Concat", f"{p}/Concat_3", flat, axis=2)
    n = sum((imgsz // s) ** 2 for s in STRIDES)
    box, cls = g.op("Split", f"{p}/Split", [x_cat, g.const(f"{p}/split_sizes", np.array([4 * REG_MAX, NC]))],
                    n_out=2, axis=1)
    # DFL: softmax over the 16 bins, expectation by a fixed 1x1 conv with weights 0..15
    d = g.op("Reshape", f"{p}/dfl/Reshape", [box, g.const(f"{p}/dfl/shape", np.array([1, 4, REG_MAX, n]))])
    d = g.op("Transpose", f"{p}/dfl/Transpose", [d], perm=[0, 2, 1, 3])
    d = g.op("Softmax", f"{p}/dfl/Softmax", [d], axis=1)
    d = g.op("Conv", f"{p}/dfl/conv/Conv",
             [d, g.const("model.22.dfl.conv.weight", np.arange(REG_MAX, dtype=np.float32).reshape(1, REG_MAX, 1, 1))],
             kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
    d = g.op("Reshape", f"{p}/dfl/Reshape_1", [d, g.const(f"{p}/dfl/shape_1", np.array([1, 4, n]))])
    # dist2bbox(xywh=True): lt, rb = chunk(2); centre = (a - lt + a + rb) / 2, wh = rb + lt; times stride
    pts, strd = anchors(imgsz)
    a, s = g.const(f"{p}/anchors", pts), g.const(f"{p}/strides", strd)
    ax, two = g.const(f"{p}/slice_axes", np.array([1])), g.const(f"{p}/two", np.array(2.0, np.float32))
    cut = [g.const(f"{p}/slice_{v}", np.array([v])) for v in (0, 2, 4)]
    lt = g.op("Slice", f"{p}/Slice", [d, cut[0], cut[1], ax])
    rb = g.op("Slice", f"{p}/Slice_1", [d, cut[1], cut[2], ax])
    x1y1, x2y2 = g.op("Sub", f"{p}/Sub", [a, lt]), g.op("Add", f"{p}/Add", [a, rb])
    c_xy = g.op("Div", f"{p}/Div", [g.op("Add", f"{p}/Add_1", [x1y1, x2y2]), two])
    wh = g.op("Sub", f"{p}/Sub_1", [x2y2, x1y1])
    dbox = g.op("Mul", f"{p}/Mul", [g.op("Concat", f"{p}/Concat_4", [c_xy, wh], axis=1), s])
    g.op("Concat", f"{p}/Concat_5", [dbox, g.op("Sigmoid", f"{p}/Sigmoid", [cls])], axis=1)
    g.nodes[-1].output[0] = "output0"
    return "output0"


def build_yolov8n(imgsz: int = 320, seed: int = 0) -> onnx.ModelProto:
    """YOLOv8n (yolov8.yaml, scale n: depth 0.33, width 0.25) at ``imgsz`` (a multiple of 32), as
    the Ultralytics ONNX export lays it out, with random weights drawn from ``seed``."""
    if imgsz % 32:
        raise ValueError(f"imgsz must be a multiple of 32, not {imgsz}")
    g = _Graph(seed)
    x = "images"
    # backbone
    x = cbs(g, x, "/model.0", 3, 16, 3, 2)
    x = cbs(g, x, "/model.1", 16, 32, 3, 2)
    x = c2f(g, x, "/model.2", 32, 32, 1, True)
    x = cbs(g, x, "/model.3", 32, 64, 3, 2)
    p3 = c2f(g, x, "/model.4", 64, 64, 2, True)
    x = cbs(g, p3, "/model.5", 64, 128, 3, 2)
    p4 = c2f(g, x, "/model.6", 128, 128, 2, True)
    x = cbs(g, p4, "/model.7", 128, 256, 3, 2)
    x = c2f(g, x, "/model.8", 256, 256, 1, True)
    p5 = sppf(g, x, "/model.9", 256, 256)
    # head: FPN top-down, then PAN bottom-up
    x = g.op("Concat", "/model.11/Concat", [upsample(g, p5, "/model.10"), p4], axis=1)
    h12 = c2f(g, x, "/model.12", 384, 128, 1, False)
    x = g.op("Concat", "/model.14/Concat", [upsample(g, h12, "/model.13"), p3], axis=1)
    out3 = c2f(g, x, "/model.15", 192, 64, 1, False)
    x = g.op("Concat", "/model.17/Concat", [cbs(g, out3, "/model.16", 64, 64, 3, 2), h12], axis=1)
    out4 = c2f(g, x, "/model.18", 192, 128, 1, False)
    x = g.op("Concat", "/model.20/Concat", [cbs(g, out4, "/model.19", 128, 128, 3, 2), p5], axis=1)
    out5 = c2f(g, x, "/model.21", 384, 256, 1, False)
    detect(g, [out3, out4, out5], (64, 128, 256), imgsz)

    n = sum((imgsz // s) ** 2 for s in STRIDES)
    graph = helper.make_graph(
        g.nodes, "main_graph",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, imgsz, imgsz])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 4 + NC, n])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="qnn-backend-lab", producer_version="yolov8n_like")
    model.ir_version = IR_VERSION
    helper.set_model_props(model, {
        "description": "Structural stand-in for Ultralytics YOLOv8n (random weights; benchmarks/yolov8n_like.py)",
        "author": "QNN Backend Lab", "license": "AGPL-3.0 License (https://ultralytics.com/license)",
        "stride": "32", "task": "detect", "batch": "1", "imgsz": f"[{imgsz}, {imgsz}]",
        "names": str(dict(enumerate(COCO)))})
    return model


def param_count(model: onnx.ModelProto) -> int:
    """Weights and biases (anchor, stride and shape constants excluded), as Ultralytics counts them."""
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.name.startswith("model."))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to save the .onnx")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    m = build_yolov8n(args.imgsz, args.seed)
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, args.out)
    print(f"{args.out}: {len(m.graph.node)} nodes, {param_count(m):,} parameters, "
          f"output0 {[d.dim_value for d in m.graph.output[0].type.tensor_type.shape.dim]}")

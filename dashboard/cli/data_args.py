"""The data flags every command that reads samples takes (``--data`` and its preprocessing), in
the manner of Polygraphy's argument groups: this group owns the flags and their parsing into a
``Preprocess`` (``accuracy.preprocess``), so ``accuracy``, ``quantize`` and the sweep spell and check
them the same way. Nothing is guessed silently: a value not given comes from the model (its
metadata, its name, its input shape) or the preset, and the ``Preprocess`` record says which."""

from __future__ import annotations

import argparse


def floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be numbers separated by commas, got {text!r}") from None
    if not values or len(values) > 4:
        raise argparse.ArgumentTypeError(f"one to four numbers, got {text!r}")
    return values


def size(text: str) -> tuple[int, int]:
    parts = text.lower().replace("x", ",").split(",")
    try:
        height, width = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be HEIGHTxWIDTH (e.g. 224x224), got {text!r}") from None
    if not (0 < height <= 8192 and 0 < width <= 8192):
        raise argparse.ArgumentTypeError(f"sides between 1 and 8192, got {text!r}")
    return height, width


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not 1 <= value <= 4096:
        raise argparse.ArgumentTypeError(f"must be between 1 and 4096, got {value}")
    return value


class _PresetNames:
    """The preprocessing presets' names, read when argparse first needs them (to check a
    ``--preset``, or for the help): their module imports numpy, which a command given no data (a
    first ``partition``, whose worker is starting meanwhile) would otherwise import for nothing."""

    def _names(self) -> list[str]:
        from dashboard.accuracy.preprocess import PRESETS

        return sorted(PRESETS)

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


class DataArgs:
    """``--data`` and the preprocessing flags; ``parse`` gives (path or None, Preprocess or None, limit)."""

    def __init__(self, required: bool = False) -> None:
        self.required = required

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("data", "the samples, and how images become input tensors (never guessed: "
                                                  "what is not given comes from the model or the preset, and is said)")
        group.add_argument("--data", metavar="PATH", required=self.required,
                           help="a folder of images (PNG/JPEG), a .npy/.npz (named arrays, one sample per leading "
                                "index) or a folder of them, or WAV" + ("" if self.required else
                                                                       "; without it: random inputs, said on every figure"))
        group.add_argument("--preset", choices=_PresetNames(), help="image preprocessing preset")
        group.add_argument("--resize", type=size, metavar="HxW", help="resize images to HEIGHTxWIDTH")
        group.add_argument("--layout", choices=("NCHW", "NHWC"), help="the input's layout")
        group.add_argument("--scale", type=float, help="multiply raw 0-255 pixels by this before mean/std")
        group.add_argument("--mean", type=floats, metavar="M[,M,M]", help="per-channel mean, after --scale")
        group.add_argument("--std", type=floats, metavar="S[,S,S]", help="per-channel std, after --scale")
        group.add_argument("--channels", choices=("RGB", "BGR", "GRAY"), help="channel order")
        group.add_argument("--limit", type=count, help="read at most this many samples (default 256)")

    def parse(self, args: argparse.Namespace, model_path: str):
        """(data path or None, Preprocess or None, limit). The preprocessing is prefilled from the
        model and the preset, then the flags given override it (``preprocess.preprocess_given``)."""
        from dashboard.errors import UserError

        given = {k: getattr(args, k) for k in ("resize", "layout", "scale", "mean", "std", "channels")
                 if getattr(args, k) is not None}
        if args.data is None:
            if given or args.preset:
                raise UserError("the preprocessing flags describe --data: give --data PATH (or leave them out)")
            return None, None, args.limit
        from dashboard.accuracy.preprocess import preprocess_given  # (numpy: only with data)

        return args.data, preprocess_given(model_path, args.preset, given), args.limit

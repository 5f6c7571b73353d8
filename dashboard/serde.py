"""One serializer: dataclasses to JSON and back, validated against their type hints when read.

Why one: reports, options, timelines and worker messages all cross a boundary as JSON (the worker
protocol, the on-disk cache, ``--json`` output, device reports a user uploads), and everything read
back may be hostile or stale: a cache file edited by hand, a forged worker reply, a report of
another version. Hand-written ``from_json`` methods each checked a little; this module checks every
field of every record the same way, so a wrong shape is one ``SchemaError`` line naming the field
(``backends.htp.nodes['conv0'].supported: expected bool, got str``), never a ``KeyError`` or a
traceback from deep inside a page.

A record is a dataclass that inherits ``Record``. Its fields' type hints are the schema:
``str``/``int``/``float``/``bool``, ``X | None``, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``,
``Literal[...]``, nested records, and ``dict``/``list``/``Any`` for free-form JSON (checked to be
plain JSON of bounded depth). Unknown keys are refused; a missing field takes its default or is an
error. ``__post_init__`` runs as for any construction, so a record's own checks apply to JSON too.
A record may name read-only properties in ``JSON_EXTRAS``: they are written (derived figures such
as metrics) and ignored when read back.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from functools import lru_cache
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from dashboard.errors import UserError

T = TypeVar("T")
MAX_DEPTH = 64  # free-form JSON nests no deeper than this (a cache entry 100,000 deep is hostile)


class SchemaError(UserError):
    """JSON that does not have the shape of the record it should be."""


class Record:
    """Mixin for dataclasses that cross a JSON boundary."""

    JSON_EXTRAS: ClassVar[tuple[str, ...]] = ()

    def to_json(self) -> dict:
        return dump(self)

    @classmethod
    def from_json(cls: type[T], data: Any) -> T:
        return load(cls, data)


# -- writing ------------------------------------------------------------------------------------------
def dump(value: Any) -> Any:
    """``value`` as plain JSON data (records and dataclasses as objects, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
        for name in getattr(value, "JSON_EXTRAS", ()):
            out[name] = dump(getattr(value, name))
        return out
    if isinstance(value, dict):
        return {str(k): dump(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [dump(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinity
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return dump(value.item())
    return value


def dumps(value: Any, **kwargs) -> str:
    return json.dumps(dump(value), **kwargs)


# -- reading ------------------------------------------------------------------------------------------
def loads(cls: type[T], text: str | bytes, what: str = "JSON") -> T:
    """Parse ``text`` and ``load`` it as ``cls``; bad JSON is a ``SchemaError`` too."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise SchemaError(f"{what}: nested too deeply") from None
    except ValueError as exc:
        raise SchemaError(f"{what}: not JSON ({exc})") from None
    return load(cls, data, what)


def load(cls: type[T], data: Any, path: str = "$") -> T:
    """``data`` (parsed JSON) as an instance of ``cls``, every field checked."""
    try:
        return _load(cls, data, path, 0)
    except RecursionError:
        raise SchemaError(f"{path}: nested too deeply") from None


def _load(tp: Any, data: Any, path: str, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise SchemaError(f"{path}: nested too deeply")
    origin = get_origin(tp)
    if tp is Any or tp is object:
        return _free_form(data, path, depth)
    if dataclasses.is_dataclass(tp):
        return _record(tp, data, path, depth)
    if origin in (Union, types.UnionType):
        return _union(tp, data, path, depth)
    if origin is Literal:
        if data not in get_args(tp):
            raise SchemaError(f"{path}: expected one of {', '.join(map(repr, get_args(tp)))}, got {_show(data)}")
        return data
    if tp in (dict, list) or origin in (dict, list, tuple):
        return _container(tp, origin or tp, data, path, depth)
    return _scalar(tp, data, path)


def _scalar(tp: Any, data: Any, path: str) -> Any:
    if tp is type(None):
        if data is not None:
            raise SchemaError(f"{path}: expected null, got {_show(data)}")
        return None
    if tp is bool:
        ok = isinstance(data, bool)
    elif tp is int:
        ok = isinstance(data, int) and not isinstance(data, bool)
    elif tp is float:
        ok = isinstance(data, (int, float)) and not isinstance(data, bool)
        data = float(data) if ok else data
    elif tp is str:
        ok = isinstance(data, str)
    else:
        raise TypeError(f"serde cannot read type {tp!r} at {path}")
    if not ok:
        raise SchemaError(f"{path}: expected {tp.__name__}, got {_show(data)}")
    return data


def _union(tp: Any, data: Any, path: str, depth: int) -> Any:
    members = get_args(tp)
    if data is None and type(None) in members:
        return None
    if type(data) in members and type(data) in (bool, int, float, str):  # an exact scalar match wins (int | float)
        return data
    errors = []
    for member in members:
        if member is type(None):
            continue
        try:
            return _load(member, data, path, depth)
        except SchemaError as exc:
            errors.append(str(exc))
    raise SchemaError(errors[0] if len(errors) == 1 else f"{path}: matches none of its types ({'; '.join(errors)})")


def _container(tp: Any, origin: Any, data: Any, path: str, depth: int) -> Any:
    args = get_args(tp)
    if origin is dict:
        if not isinstance(data, dict):
            raise SchemaError(f"{path}: expected an object, got {_show(data)}")
        value_type = args[1] if len(args) == 2 else Any
        if args and args[0] is not str:
            raise TypeError(f"serde reads only str-keyed dicts, not {tp!r}")
        return {k: _load(value_type, v, f"{path}[{k!r}]", depth + 1) for k, v in data.items()}
    if not isinstance(data, list):
        raise SchemaError(f"{path}: expected a list, got {_show(data)}")
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_load(args[0], v, f"{path}[{i}]", depth + 1) for i, v in enumerate(data))
        if len(args) != len(data):
            raise SchemaError(f"{path}: expected {len(args)} items, got {len(data)}")
        return tuple(_load(a, v, f"{path}[{i}]", depth + 1) for i, (a, v) in enumerate(zip(args, data)))
    item_type = args[0] if args else Any
    return [_load(item_type, v, f"{path}[{i}]", depth + 1) for i, v in enumerate(data)]


def _record(cls: type, data: Any, path: str, depth: int) -> Any:
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: expected an object, got {_show(data)}")
    fields, hints = _schema(cls)
    extras = set(getattr(cls, "JSON_EXTRAS", ()))
    unknown = sorted(k for k in data if k not in fields and k not in extras)
    if unknown:
        raise SchemaError(f"{path}: unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    values = {}
    for name, field in fields.items():
        if name in data:
            values[name] = _load(hints[name], data[name], f"{path}.{name}", depth + 1)
        elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise SchemaError(f"{path}: missing field {name!r}")
    try:
        return cls(**values)
    except (TypeError, ValueError, UserError) as exc:  # the record's own checks (``__post_init__``)
        raise SchemaError(f"{path}: {exc}") from None


@lru_cache(maxsize=None)
def _schema(cls: type) -> tuple[dict[str, dataclasses.Field], dict[str, Any]]:
    """The init fields of a record and their resolved type hints (cached per class)."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    return fields, {name: hints[name] for name in fields}


def _free_form(data: Any, path: str, depth: int) -> Any:
    """Plain JSON of bounded depth (what ``json.loads`` can produce, nothing else)."""
    if depth > MAX_DEPTH:
        raise SchemaError(f"{path}: nested too deeply")
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                raise SchemaError(f"{path}: object keys must be strings")
            _free_form(value, f"{path}[{key!r}]", depth + 1)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _free_form(value, f"{path}[{i}]", depth + 1)
    elif not isinstance(data, (str, int, float, bool, type(None))):
        raise SchemaError(f"{path}: not JSON data ({type(data).__name__})")
    return data


def _show(data: Any) -> str:
    """A value in an error message: its JSON type, and the value itself when short."""
    kind = {dict: "an object", list: "a list", str: "str", bool: "bool", int: "int", float: "float",
            type(None): "null"}.get(type(data), type(data).__name__)
    if isinstance(data, (dict, list)):
        return kind
    text = repr(data)
    return f"{kind} {text if len(text) <= 40 else text[:39] + '…'}"

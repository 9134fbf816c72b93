"""The admin results as JSON values: what ``--json`` prints and what a dashboard API answers.

Dataclass fields become camelCase keys (RocketMQ's own JSON spelling, e.g. ``maxOffset``), the
protocol's bodies their wire JSON, enums their names and bytes the text ``encode_bytes`` makes
(base64 unless told otherwise). A client connection also gets ``versionDesc``, its ``version``
ordinal by name (``V3_4_9``), what mqadmin shows and a reader of the JSON needs.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import Any

from rocketlite.protocol.admin_bodies import ClientConnection, ConsumerConnection, ProducerConnection
from rocketlite.protocol.bodies import JsonBody
from rocketlite.protocol.versions import version_desc

BytesEncoder = Callable[[bytes], str]


def camel(name: str) -> str:
    """``max_offset`` -> ``maxOffset``."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def jsonable(obj: Any, encode_bytes: BytesEncoder = b64) -> Any:
    """``obj`` as plain JSON values (dicts, lists, str, int, float, bool, None)."""
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, bytes | bytearray | memoryview):
        return encode_bytes(bytes(obj))
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, JsonBody):
        return _body(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {camel(f.name): jsonable(getattr(obj, f.name), encode_bytes)
                for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v, encode_bytes) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        items = [jsonable(v, encode_bytes) for v in obj]
        return sorted(items, key=repr) if isinstance(obj, set | frozenset) else items
    raise TypeError(f"{type(obj).__name__} is not an admin result")


def _body(obj: JsonBody) -> dict[str, Any]:
    out = obj.to_obj()
    if isinstance(obj, ClientConnection):
        out["versionDesc"] = version_desc(obj.version)
    elif isinstance(obj, ConsumerConnection | ProducerConnection):
        for c in out.get("connectionSet", ()):
            c["versionDesc"] = version_desc(c.get("version", 0))
    return out

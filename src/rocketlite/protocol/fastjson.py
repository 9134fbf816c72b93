"""JSON as RocketMQ's fastjson 1.x writes and reads it.

Reading (:func:`loads`): standard JSON goes through orjson. When orjson refuses the text, a small
lenient parser takes over that accepts what fastjson writes beyond JSON:

- **Bare map keys**: integer (or any number, ``true``/``false``/``null``) keys without quotes, as
  in ``{"brokerAddrs":{0:"127.0.0.1:10911"}}``; the key becomes a Python ``int`` (``float``, ``bool``,
  ``None``). Quoted keys stay strings: ``{"0":...}`` gives ``"0"``.
- **Object and array keys**: maps keyed by an object, as in
  ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}``. Python dicts cannot be keys, so
  such a key becomes an :class:`ObjectKey`: a tuple of ``(name, value)`` pairs sorted by name, with
  nested objects again as :class:`ObjectKey` and arrays as tuples. It is hashable and equal to any
  other ObjectKey with the same members (never to a plain tuple); ``key.to_dict()`` gives the
  members back.

Both paths are bounded: ``max_size`` (characters or bytes of input, default 16 MiB, the Remoting
frame limit) and ``max_depth`` (lenient parser, default 512; orjson stops at 1024). Every failure,
hostile input included, raises :class:`~rocketlite.common.errors.BodyError` with the position, never
``RecursionError`` or ``ValueError``. Note that orjson reads integers beyond 64 bits as floats.

Writing (:func:`dumps`): keys sorted, no spaces. Standard form (``legacy=False``) quotes integer map
keys (``{"0":"..."}``, what the NameServer sends with ``BrowserCompatible``/``MapSortField``);
``legacy=True`` writes them bare (``{0:"..."}``, plain fastjson, for clients older than V4_9_4).
:class:`ObjectKey` keys are written as objects in both forms, as fastjson does; that output is not
standard JSON. Sets are written as sorted arrays.
"""

from __future__ import annotations

import json.decoder
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from rocketlite.common.errors import BodyError

# The C scanner behind ``json``: string body after the opening quote -> (text, end). Not in typeshed.
_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

MAX_SIZE = 16 * 1024 * 1024
MAX_DEPTH = 512

__all__ = ["MAX_DEPTH", "MAX_SIZE", "ObjectKey", "dumps", "freeze", "loads"]


class ObjectKey(tuple[tuple[Any, Any], ...]):
    """A JSON object used as a map key: its ``(name, value)`` pairs, sorted by name (hashable)."""

    __slots__ = ()

    @classmethod
    def from_mapping(cls, mapping: Mapping[Any, Any]) -> ObjectKey:
        """The frozen form of ``mapping`` (nested dicts and lists frozen too)."""
        return cls(sorted(((k, freeze(v)) for k, v in mapping.items()), key=_member_order))

    def to_dict(self) -> dict[Any, Any]:
        """The members as a dict (one level: nested objects stay ObjectKeys)."""
        return dict(self)

    # Not equal to a plain tuple with the same items: ``{}`` and ``[]`` are different keys.
    def __eq__(self, other: object) -> bool:
        return type(other) is ObjectKey and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((ObjectKey, tuple(self)))

    def __repr__(self) -> str:
        return f"ObjectKey({dict(self)!r})"


def _member_order(item: tuple[Any, Any]) -> tuple[int, str]:
    k = item[0]
    return (0, k) if isinstance(k, str) else (1, repr(k))


def freeze(value: Any) -> Any:
    """A hashable form of a parsed JSON value: dicts become ObjectKeys, lists tuples."""
    if isinstance(value, dict):
        return ObjectKey.from_mapping(value)
    if isinstance(value, list | tuple) and not isinstance(value, ObjectKey):
        return tuple(freeze(v) for v in value)
    return value


# ---------------------------------------------------------------------------------------------- loads


def loads(
    data: bytes | bytearray | memoryview | str, *, max_size: int = MAX_SIZE, max_depth: int = MAX_DEPTH
) -> Any:
    """Parse standard JSON or fastjson's output (see the module docstring)."""
    if len(data) > max_size:
        raise BodyError(f"JSON of {len(data)} bytes exceeds the limit of {max_size}")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise BodyError(f"JSON is not valid UTF-8 at byte {e.start}") from None
    return _parse_lenient(text, max_depth)


_WS_CHARS = " \t\n\r"
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS: dict[str, tuple[str, Any]] = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}


class _Frame:
    """One open container of the lenient parser."""

    __slots__ = ("awaiting_key", "frozen", "items", "key", "obj")

    def __init__(self, is_obj: bool, frozen: bool) -> None:
        self.obj: dict[Any, Any] | None = {} if is_obj else None
        self.items: list[Any] | None = None if is_obj else []
        self.awaiting_key = is_obj
        self.key: Any = None
        self.frozen = frozen  # inside a map key: finish as ObjectKey / tuple

    def finish(self) -> Any:
        if self.obj is not None:
            if self.frozen:
                return ObjectKey(sorted(self.obj.items(), key=_member_order))
            return self.obj
        assert self.items is not None
        return tuple(self.items) if self.frozen else self.items


def _error(text: str, pos: int, what: str) -> BodyError:
    snippet = text[max(0, pos - 20) : pos + 20]
    return BodyError(f"malformed JSON at char {pos}: {what} (near {snippet!r})")


def _parse_lenient(text: str, max_depth: int) -> Any:  # noqa: C901  (one state machine)
    """Iterative parser: JSON plus bare number/literal keys and object/array keys."""
    n = len(text)

    def ws(pos: int) -> int:
        while pos < n and text[pos] in _WS_CHARS:
            pos += 1
        return pos

    stack: list[_Frame] = []
    pos = ws(0)
    while True:
        # -- one value (or map key) starts at pos
        if pos >= n:
            raise _error(text, pos, "unexpected end")
        c = text[pos]
        in_key = bool(stack) and (stack[-1].frozen or stack[-1].awaiting_key)
        value: Any
        if c == "{" or c == "[":
            if len(stack) >= max_depth:
                raise _error(text, pos, f"nested deeper than {max_depth}")
            frame = _Frame(c == "{", in_key)
            pos = ws(pos + 1)
            if pos < n and text[pos] == ("}" if c == "{" else "]"):
                value = frame.finish()
                pos += 1
            else:
                stack.append(frame)
                continue
        elif c == '"':
            try:
                value, pos = _scanstring(text, pos + 1, False)
            except ValueError as e:
                raise _error(text, pos, str(e).split(":", 1)[0]) from None
        elif c in _LITERALS:
            word, value = _LITERALS[c]
            if not text.startswith(word, pos):
                raise _error(text, pos, "unknown literal")
            pos += len(word)
        else:
            m = _NUMBER.match(text, pos)
            if m is None:
                raise _error(text, pos, f"unexpected character {c!r}")
            value = float(m.group()) if m.group(1) or m.group(2) else int(m.group())
            pos = m.end()
        # -- deliver the finished value to the open containers
        while True:
            if not stack:
                pos = ws(pos)
                if pos != n:
                    raise _error(text, pos, "trailing data")
                return value
            top = stack[-1]
            if top.items is not None:
                top.items.append(value)
            elif top.awaiting_key:
                top.key = value if not isinstance(value, list | dict) else freeze(value)
                pos = ws(pos)
                if pos >= n or text[pos] != ":":
                    raise _error(text, pos, "expected ':' after a map key")
                pos = ws(pos + 1)
                top.awaiting_key = False
                break
            else:
                assert top.obj is not None
                top.obj[top.key] = value
                top.awaiting_key = True
            pos = ws(pos)
            if pos < n and text[pos] == ",":
                pos = ws(pos + 1)
                break
            closer = "]" if top.items is not None else "}"
            if pos < n and text[pos] == closer:
                pos += 1
                stack.pop()
                value = top.finish()
                continue
            raise _error(text, pos, f"expected ',' or {closer!r}")


# ---------------------------------------------------------------------------------------------- dumps

_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def dumps(obj: Any, *, legacy: bool = False) -> bytes:
    """Serialize like fastjson: sorted keys; integer keys quoted unless ``legacy``."""
    if not legacy:
        try:
            return orjson.dumps(obj, option=_ORJSON_OPTIONS)
        except orjson.JSONEncodeError:
            pass  # ObjectKey or tuple keys, sets, integers beyond 64 bits: write it ourselves
    out: list[str] = []
    _encode(obj, legacy, out)
    return "".join(out).encode("utf-8")


def _key_text(key: Any, legacy: bool) -> str:
    if isinstance(key, str):
        return orjson.dumps(key).decode()
    if isinstance(key, ObjectKey):
        out: list[str] = []
        _encode_object(key, legacy, out)
        return "".join(out)
    if isinstance(key, tuple):
        out = []
        _encode_array(key, legacy, out)
        return "".join(out)
    if key is None or isinstance(key, bool | int | float):
        text = "null" if key is None else "true" if key is True else "false" if key is False else repr(key)
        return text if legacy else orjson.dumps(text).decode()
    raise TypeError(f"cannot write a map key of type {type(key).__name__}")


def _key_sort(item: tuple[str, Any]) -> str:
    return item[0]


def _encode_object(items: Iterable[tuple[Any, Any]], legacy: bool, out: list[str]) -> None:
    pairs: list[tuple[str, Any]] = [(_key_text(k, legacy), v) for k, v in items]
    if legacy:
        # fastjson (HashMap order for small Long keys) writes integer keys in numeric order
        pairs.sort(key=lambda p: (0, int(p[0]), "") if _INT_KEY.fullmatch(p[0]) else (1, 0, p[0]))
    else:
        pairs.sort(key=_key_sort)
    out.append("{")
    first = True
    for text, v in pairs:
        if not first:
            out.append(",")
        first = False
        out.append(text)
        out.append(":")
        _encode(v, legacy, out)
    out.append("}")


_INT_KEY = re.compile(r"-?[0-9]+")


def _encode_array(values: Iterable[Any], legacy: bool, out: list[str]) -> None:
    out.append("[")
    first = True
    for v in values:
        if not first:
            out.append(",")
        first = False
        _encode(v, legacy, out)
    out.append("]")


def _encode(obj: Any, legacy: bool, out: list[str]) -> None:
    if isinstance(obj, str):
        out.append(orjson.dumps(obj).decode())
    elif obj is None:
        out.append("null")
    elif isinstance(obj, bool):
        out.append("true" if obj else "false")
    elif isinstance(obj, int):
        out.append(str(int(obj)))
    elif isinstance(obj, float):
        out.append(orjson.dumps(obj).decode())
    elif isinstance(obj, ObjectKey):
        _encode_object(obj, legacy, out)
    elif isinstance(obj, Mapping):
        _encode_object(obj.items(), legacy, out)
    elif isinstance(obj, list | tuple):
        _encode_array(obj, legacy, out)
    elif isinstance(obj, set | frozenset):
        try:
            ordered = sorted(obj)
        except TypeError:
            ordered = sorted(obj, key=repr)
        _encode_array(ordered, legacy, out)
    else:
        raise TypeError(f"cannot write a value of type {type(obj).__name__} as JSON")


def parses(data: bytes) -> bool:
    """True if ``data`` is JSON in any dialect ``loads`` accepts (to vet a config file's copy)."""
    try:
        loads(data)
    except BodyError:
        return False
    return True

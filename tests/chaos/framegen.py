"""Generated Remoting frames for the frame fuzzer (``framefuzz.py``), sans I/O.

Frames come from three sources, each then mutated:

* commands and JSON headers drawn once from the codec's hypothesis strategies
  (``tests/strategies.py``: ``commands``, ``json_headers``) into a pool;
* the corpus (``tests/chaos/corpus/*.frames``): requests ali-ons and the C++ client really sent,
  re-sent as they are, re-encoded in the ROCKETMQ binary header, with other ext fields, codes,
  flags, opaques;
* byte-level damage inside a well-delimited frame: bit flips, a header-length word that lies or
  names an unknown serialize type, JSON cut or spliced, binary length fields rewritten.

Stream-breaking frames (a length above the 16 MiB limit, a negative one, a frame cut short or
longer than what follows) end a batch: ``Tail``.

Request codes that change the broker's or NameServer's state other than by messages (topic,
group, ACL, config, KV, registration, file deletion, POP and transaction bookkeeping) are never
sent: such a code drawn is replaced by an unknown one, so the store-unchanged check compares like
with like. Sends stay in (the fuzzed broker is read-only, see ``framefuzz``).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from pathlib import Path

import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from rocketlite.common.errors import ProtocolError
from rocketlite.protocol.codes import RequestCode, SerializeType
from rocketlite.protocol.command import RemotingCommand, decode_frame
from strategies import commands, json_headers

CORPUS = Path(__file__).parent / "corpus"

_STATEFUL_NAMES = ("CREATE", "DELETE", "UPDATE", "RESET", "REGISTER", "WIPE", "ADD_", "REMOVE",
                   "CLEAN", "PUT_KV", "TRIGGER", "SEND_MSG_BACK", "END_TRANSACTION", "ACK",
                   "POP", "CHANGE_", "AUTH_", "CONTROLLER", "NOTIFY", "SET_", "CLONE", "RECALL",
                   "SUSPEND", "RESUME", "ADJUST", "INVOKE", "CONSUME_MESSAGE_DIRECTLY", "ELECT",
                   "EXCHANGE", "ALTER", "APPLY", "LOCK", "UNLOCK")
STATEFUL: frozenset[int] = frozenset(
    int(c) for c in RequestCode if any(w in c.name for w in _STATEFUL_NAMES)
    and "UNREGISTER_CLIENT" not in c.name) - {int(RequestCode.UPDATE_CONSUMER_OFFSET)}
"""Codes never sent (see the module docstring); consumer offsets and client registration stay."""
LONG_POLL: frozenset[int] = frozenset({int(RequestCode.PULL_MESSAGE),
                                       int(RequestCode.LITE_PULL_MESSAGE)})
"""Requests a broker may hold (long polling): their replies may come after the batch's probe."""
KNOWN: frozenset[int] = frozenset(int(c) for c in RequestCode)
SENDS: frozenset[int] = frozenset(int(c) for c in (
    RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2))
"""Requests that store messages (the writable run counts what they were acknowledged for)."""


def unknown_code(rng: random.Random) -> int:
    while True:
        code = rng.choice((rng.randrange(4, 10), rng.randrange(1100, 1999), rng.randrange(-99, 0),
                           rng.randrange(2**15 - 200, 2**15)))
        if code not in KNOWN:
            return code


def load_corpus() -> list[bytes]:
    """Every captured frame (length field included), corpus file by corpus file."""
    out: list[bytes] = []
    for path in sorted(CORPUS.glob("*.frames")):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack_from(">i", data, pos)
            out.append(data[pos : pos + 4 + n])
            pos += 4 + n
    return out


def hypothesis_pool(size: int) -> tuple[list[RemotingCommand], list[bytes]]:
    """``size`` commands (both serialize types) and ``size`` JSON headers drawn from the codec
    strategies (generation only: no shrinking, no example database)."""
    cmds: list[RemotingCommand] = []
    headers: list[bytes] = []
    cfg = settings(max_examples=size, phases=[Phase.generate], database=None, deadline=None,
                   derandomize=True,  # the same pool every run: a finding replays from its seed
                   suppress_health_check=list(HealthCheck))

    @cfg
    @given(st.one_of(commands(int(SerializeType.JSON)), commands(int(SerializeType.ROCKETMQ))),
           json_headers())
    def draw(cmd: RemotingCommand, header: bytes) -> None:
        cmds.append(cmd)
        headers.append(header)

    draw()
    return cmds, headers


@dataclass(slots=True)
class Tail:
    """A stream-breaking frame that ends a batch: its bytes, and whether the sender then
    half-closes (a frame cut short or waiting for bytes that never come: the server sees EOF)."""

    kind: str
    data: bytes
    shut_write: bool


def frame(header: bytes, body: bytes, stype: int = 0) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def _safe_code(rng: random.Random, code: int) -> int:
    return unknown_code(rng) if code in STATEFUL else code


def _random_ext(rng: random.Random) -> dict[str, str]:
    keys = ("topic", "queueId", "consumerGroup", "queueOffset", "maxMsgNums", "sysFlag", "a", "b",
            "c", "d", "producerGroup", "properties", "batch", "commitOffset", "", "x" * 300)
    values = ("", "0", "-1", "2147483648", "9" * 40, "TBW102", "%RETRY%G", "true", "null", "\u0000",
              "\U0001f600", "1e9", "NaN", "a\u0001b\u0002")
    return {rng.choice(keys): rng.choice(values) for _ in range(rng.randrange(1, 6))}


class FrameSource:
    """Draws frames (``next_frame``) and batch tails (``tail``) from a seeded RNG."""

    def __init__(self, rng: random.Random, pool_size: int = 300,
                 send_topic: str | None = None) -> None:
        self.rng = rng
        self.send_topic = send_topic  # sends mostly aimed at it (a topic that takes writes)
        self.cmds, self.headers = hypothesis_pool(pool_size)
        self.corpus = load_corpus()
        self.corpus_cmds = [decode_frame(f[4:]) for f in self.corpus]
        self.corpus_sends = [c for c in self.corpus_cmds if c.code in SENDS]
        self.opaque = 1

    def _next_opaque(self) -> int:
        self.opaque = (self.opaque + 1) & 0x7FFFFFFF
        return self.opaque

    def _command(self) -> RemotingCommand:
        rng = self.rng
        pooled = rng.random() >= 0.6
        base = rng.choice(self.cmds) if pooled else rng.choice(self.corpus_cmds)
        if self.send_topic is not None and rng.random() < 0.3:
            pooled, base = False, rng.choice(self.corpus_sends)
        cmd = RemotingCommand(
            code=_safe_code(rng, base.code), language=base.language, version=base.version,
            opaque=self._next_opaque(), flag=base.flag if pooled else 0,
            remark=base.remark, ext_fields=dict(base.ext_fields), body=base.body,
            serialize_type=base.serialize_type)
        r = rng.random()
        if r < 0.15:
            cmd.code = unknown_code(rng)
        elif r < 0.35:
            cmd.ext_fields.update(_random_ext(rng))
        elif r < 0.45 and cmd.ext_fields:
            del cmd.ext_fields[rng.choice(list(cmd.ext_fields))]
        elif r < 0.5:
            cmd.flag = rng.choice((1, 2, 3, rng.randrange(-(2**31), 2**31)))
        elif r < 0.55:
            cmd.body = rng.randbytes(rng.randrange(0, 2000))
        if self.send_topic is not None and cmd.code in SENDS and rng.random() < 0.8:
            v2 = "b" in cmd.ext_fields or cmd.code != RequestCode.SEND_MESSAGE
            cmd.ext_fields["b" if v2 else "topic"] = self.send_topic
            cmd.ext_fields["e" if v2 else "queueId"] = rng.choice(("0", "-1", "1", "x"))
        if rng.random() < 0.3:
            cmd.serialize_type = int(SerializeType.ROCKETMQ)
        if cmd.serialize_type == SerializeType.ROCKETMQ and not -(2**15) <= cmd.code < 2**15:
            cmd.serialize_type = int(SerializeType.JSON)
        if cmd.serialize_type == SerializeType.ROCKETMQ and not -(2**15) <= cmd.version < 2**15:
            cmd.version = 0
        return cmd

    def _damaged(self, data: bytes) -> bytes:
        """Byte-level damage inside a frame; the length field is kept true to the bytes."""
        rng = self.rng
        body = bytearray(data[4:])
        what = rng.randrange(7)
        if what == 0:  # bit flips in the header
            hlen = min(len(body), 4 + (struct.unpack_from(">I", body, 0)[0] & 0xFFFFFF))
            for _ in range(rng.choice((1, 2, 4))):
                body[rng.randrange(hlen)] ^= 1 << rng.randrange(8)
        elif what == 1:  # the header-length word: too long, zero, another serialize type
            ori = struct.unpack_from(">I", body, 0)[0]
            new = rng.choice((0, 0xFFFFFF, len(body), len(body) - 3,
                              ori & 0xFFFFFF | rng.randrange(256) << 24))
            struct.pack_into(">I", body, 0, new & 0xFFFFFFFF)
        elif what == 2:  # cut anywhere (the length says so)
            body = body[: rng.randrange(len(body) + 1)]
        elif what == 3:  # splice: bytes deleted or inserted in the header
            at = rng.randrange(4, max(5, len(body)))
            if rng.random() < 0.5:
                del body[at : at + rng.randrange(1, 8)]
            else:
                body[at:at] = rng.choice((b"{", b"}", b'"', b"\\", b"\x00", b"\xff\xfe", b"[[[[", b",:"))
        elif what == 4:  # a binary header's length fields rewritten
            if len(body) >= 4 + 25:
                at = rng.choice((4 + 13, 4 + 17, 4 + 21, rng.randrange(4, len(body) - 3)))
                struct.pack_into(">i", body, at, rng.choice((-1, 0, 2**31 - 1, len(body), 65536)))
        elif what == 5:  # garbage appended to the header region (the header length grows)
            ori = struct.unpack_from(">I", body, 0)[0]
            extra = rng.randbytes(rng.randrange(1, 64))
            hend = 4 + (ori & 0xFFFFFF)
            body[hend:hend] = extra
            struct.pack_into(">I", body, 0, (ori + len(extra)) & 0xFFFFFFFF)
        else:  # a generated JSON header (nested, wrong types, missing fields)
            header = rng.choice(self.headers)
            body = bytearray(struct.pack(">I", len(header)) + header + rng.randbytes(rng.randrange(0, 64)))
        return struct.pack(">i", len(body)) + bytes(body)

    def next_frame(self) -> bytes:
        rng = self.rng
        r = rng.random()
        if r < 0.1:  # a captured frame as sent, new opaque
            raw = rng.choice(self.corpus)
            cmd = decode_frame(raw[4:])
            cmd.opaque = self._next_opaque()
            cmd.code = _safe_code(rng, cmd.code)
            return cmd.encode()
        data = self._command().encode()
        if r < 0.55:
            return data
        return self._damaged(data)

    def tail(self) -> Tail:
        rng = self.rng
        data = self._command().encode()
        kind = rng.choice(("too_large", "negative", "cut", "longer", "bad_json_open"))
        if kind == "too_large":
            n = rng.choice((16 * 1024 * 1024 - 3, 2**31 - 1, rng.randrange(16 * 1024 * 1024, 2**31)))
            return Tail(kind, struct.pack(">i", n) + data[4:], False)
        if kind == "negative":
            return Tail(kind, struct.pack(">i", rng.randrange(-(2**31), 0)) + data[4:], False)
        if kind == "cut":
            return Tail(kind, data[: rng.randrange(1, len(data))], True)
        if kind == "longer":
            n = len(data) - 4 + rng.randrange(1, 100_000)
            return Tail(kind, struct.pack(">i", n) + data[4:], True)
        header = b'{"code":' + b"[" * rng.randrange(1, 5000)
        return Tail(kind, frame(header, b""), False)


def expectation(data: bytes) -> tuple[str, int]:
    """What the server owes for one whole frame, by the codec's own reading of it: ("reply",
    opaque) for a request to answer (also a header that fails to decode but names its opaque:
    SYSTEM_ERROR), ("none", 0) for a response or a oneway request, ("close", 0) for a frame
    with no readable opaque (the server closes: the peer does not speak Remoting)."""
    try:
        cmd = decode_frame(data[4:])
    except ProtocolError as e:
        return ("close", 0) if e.opaque is None else ("reply", e.opaque)
    if cmd.flag & 3:
        return "none", 0
    return ("poll" if cmd.code in LONG_POLL else "reply"), cmd.opaque


def describe(data: bytes) -> str:
    """A short printable view of a frame (for a finding's report)."""
    head = data[:200]
    try:
        cmd = decode_frame(data[4:])
        ext = orjson.dumps(cmd.ext_fields)[:120]
        return f"code {cmd.code} flag {cmd.flag} opaque {cmd.opaque} ext {ext!r}"
    except ProtocolError as e:
        return f"undecodable ({e}); first bytes {head.hex()}"

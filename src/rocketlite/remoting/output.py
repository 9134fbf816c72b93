"""The write side of a ``Connection``: frames sent while a read is handled, or in one loop
iteration, go out together in one write (one syscall), at most ``COALESCE_MAX`` pieces at a time so
the peer starts on a long run while the rest is produced; a piece of ``WRITE_ALONE`` bytes or more
is written on its own instead of being copied into the joined buffer."""

from __future__ import annotations

import asyncio
import time

from rocketlite.protocol.command import RemotingCommand

# Frames coalesced into one write at most: past this many the write goes out at once, so the
# peer starts on the first frames while we produce the rest (pipelining across processes).
# 16 measured best (bench/client_bench.py --scenario async: 11k msgs/s unbounded, 20k at 16 or
# 32, 19k at 8; bench/broker_bench.py --scenario send: 26k -> 33k).
COALESCE_MAX = 16
# A body at least this long is written on its own instead of being copied into the joined
# buffer (a pull reply of 1000 records is ~250 KB: a copy costs more than the extra syscall).
WRITE_ALONE = 64 * 1024


class CoalescedOutput:
    """Mixed into ``Connection``, which sets these attributes up."""

    transport: asyncio.Transport | None
    last_io: float
    _out: list[bytes]  # frames waiting to be written together
    _out_big: bool  # a piece of WRITE_ALONE bytes or more waits in _out
    _in_read: bool
    _flush_scheduled: bool

    @property
    def is_open(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    def send(self, cmd: RemotingCommand) -> None:
        """Write a command (a response, or a oneway request) without waiting.

        Writes are coalesced: frames sent while a read is being processed go out together when
        it ends, others at the end of the current loop iteration; one write (one syscall) for
        all of them instead of one per frame, but at most ``COALESCE_MAX`` frames per write so
        the peer is not idle while we produce a long run."""
        if not self.is_open:
            return
        head, body = cmd.encode_parts()
        out = self._out
        out.append(head)
        if body:
            out.append(body)  # not joined to the head here: _flush_out joins everything once
            if len(body) >= WRITE_ALONE:
                self._out_big = True
        if len(out) >= COALESCE_MAX:
            self._flush_out()
        else:
            self._schedule_flush()

    def send_frame(self, frame: bytes) -> None:
        """Write an already encoded frame (length field included), coalesced like ``send``."""
        if not self.is_open:
            return
        self._out.append(frame)
        if len(frame) >= WRITE_ALONE:
            self._out_big = True
        if len(self._out) >= COALESCE_MAX:
            self._flush_out()
        else:
            self._schedule_flush()

    def send_frames(self, frames: list[bytes]) -> None:
        """Write encoded frames (length fields included) together: at the end of the current
        read, or at once; one write for all of them, however many (they are all ready)."""
        if not self.is_open:
            return
        self._out.extend(frames)
        if not self._in_read:
            self._flush_out()

    def flush_now(self) -> None:
        """Write what is waiting now, even inside a read (a processor that answered part of a
        read's requests: the peer starts on those replies while the rest are worked on)."""
        self._flush_out()

    def _schedule_flush(self) -> None:
        if not self._in_read and not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_out)

    def _flush_out(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        big, self._out_big = self._out_big, False
        if self.transport is None or self.transport.is_closing():
            return
        # One joined buffer: uvloop's writelines costs several times more per piece.
        if len(out) == 1:
            self.transport.write(out[0])
        elif not big:
            self.transport.write(b"".join(out))
        else:
            self._write_pieces(out)
        self.last_io = time.monotonic()

    def _write_pieces(self, out: list[bytes]) -> None:
        """The small pieces joined, each large one written alone (no copy of it here)."""
        assert self.transport is not None
        start = 0
        for i, piece in enumerate(out):
            if len(piece) >= WRITE_ALONE:
                if i > start:
                    self.transport.write(b"".join(out[start:i]))
                self.transport.write(piece)
                start = i + 1
        if start < len(out):
            self.transport.write(b"".join(out[start:]))

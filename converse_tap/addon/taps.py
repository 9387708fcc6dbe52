"""The stream callables the recorder sets as `flow.response.stream`: each returns every chunk the moment it
arrives, byte for byte, and hands it on to the recording worker through the channel (channel.py)."""

from __future__ import annotations

import time

from .channel import Channel


class ChunkTap:
    """Set as `flow.response.stream`: returns every chunk the moment it arrives, byte for byte, and hands a
    reference to it to the worker. If the worker's backlog is full, the rest of this stream is not recorded
    (and the exchange says so); the stream itself never waits. So is a stream whose start went to a worker
    that died since (`gen`): the worker now running never saw it open."""

    __slots__ = ("channel", "fid", "gen", "lost", "opened")

    def __init__(self, channel: Channel, fid: str) -> None:
        self.channel = channel
        self.fid = fid
        self.gen = channel.generation
        self.lost = False
        self.opened = True  # False: the worker never got the stream's start (backlog full): nothing is recorded

    def __call__(self, chunk: bytes) -> bytes:
        if chunk and not self.lost:
            if self.channel.generation != self.gen:
                self.lost = True
                return chunk
            try:
                self.lost = not self.channel.send(("c", self.fid, time.time(), chunk))
            except Exception:
                self.lost = True
        return chunk


class BodyTap(ChunkTap):
    """A body that is not a stream (JSON) which mitmproxy streams all the same (`stream_large_bodies`, or an addon
    that set `stream = True`): relayed the same way, gathered by the worker up to `max_body` and read whole. Past
    that, its chunks are only counted (the worker records the size, as for a body too large read whole)."""

    __slots__ = ("limit", "size")

    def __init__(self, channel: Channel, fid: str, limit: int) -> None:
        super().__init__(channel, fid)
        self.limit = limit
        self.size = 0

    def __call__(self, chunk: bytes) -> bytes:
        self.size += len(chunk)
        if self.size <= self.limit:
            return super().__call__(chunk)
        return chunk

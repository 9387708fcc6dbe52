"""Bodies a HAR keeps as files beside it (Playwright's content "attach"), read into its entries."""

from __future__ import annotations

import base64
import os
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

from .a2a.envelope import clip
from .addon.flows import PREFIX
from .capturefile import open_regular
from .harfile import attachment_name


class Attachments:
    """Bodies a HAR keeps as files (`"_file": NAME` in place of `text`, as Playwright writes them with content
    "attach"): in the HAR's folder, or in the zip it came in (`.har.zip`). A name is a file name, never a path: one
    that names another folder (`../x`, `/etc/x`) is no attachment."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self._zip: zipfile.ZipFile | None = None
        self._file: BinaryIO | None = None

    def read(self, name: Any, limit: int) -> tuple[bytes, int] | None:
        """(its first `limit` + 1 bytes at most, its size) of the attachment `name`; None when there is none."""
        if not attachment_name(name):
            return None
        try:
            if self.source.is_dir():
                with open_regular(self.source / name, follow=False) as f:  # a link would lead out of the folder
                    return f.read(limit + 1), os.fstat(f.fileno()).st_size
            if self._zip is None:
                self.close()
                self._file = open_regular(self.source)
                self._zip = zipfile.ZipFile(self._file)
            info = self._zip.getinfo(name)
            with self._zip.open(info) as member:
                return member.read(limit + 1), info.file_size
        except (OSError, KeyError, EOFError, ValueError, RuntimeError, NotImplementedError, zipfile.BadZipFile):
            return None

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
            self._zip = None
        if self._file is not None:
            self._file.close()
            self._file = None


def attached_bodies(
    entry: dict[str, Any], attached: Attachments | None, max_body: int, anomalies: list[str]
) -> tuple[dict[str, Any], dict[str, tuple[int, bytes]]]:
    """The entry with each body kept as a file read into it, and for one larger than `max_body`, (size, first
    bytes), its text left empty. An attachment not found is noted `har_<side>_attachment_missing:<name>`."""
    big: dict[str, tuple[int, bytes]] = {}
    for side, key in (("request", "postData"), ("response", "content")):
        holder: Any = entry.get(side)
        body: Any = holder.get(key) if isinstance(holder, dict) else None
        if not isinstance(body, dict) or "_file" not in body or body.get("text"):
            continue
        got = attached.read(body["_file"], max_body) if attached is not None else None
        if got is None:
            anomalies.append(f"har_{side}_attachment_missing:{clip(str(body['_file']))}")
            continue
        data, size = got
        if max(size, len(data)) > max_body:
            big[side] = (max(size, len(data)), data[:PREFIX])
            text = ""
        elif side == "request":  # mitmproxy's importer takes a request body as text only
            text = data.decode("utf-8", "surrogateescape")
        else:
            body = {**body, "encoding": "base64"}
            text = base64.b64encode(data).decode()
        entry = {**entry, side: {**holder, key: {**body, "text": text}}}
    return entry, big

"""Watching a folder tree for any access (Linux inotify through ctypes): the proof that a server
read nothing there.

    with Watch(folder) as w:
        ...                      # requests to the server
    w.events()                   # [(path, mask names)] of every open / access / listing seen
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct
from pathlib import Path

IN_ACCESS, IN_OPEN, IN_CLOSE_NOWRITE = 0x1, 0x20, 0x10
IN_NONBLOCK = 0o4000
_NAMES = {IN_ACCESS: "access", IN_OPEN: "open", IN_CLOSE_NOWRITE: "close"}


def available() -> bool:
    return os.uname().sysname == "Linux" and ctypes.util.find_library("c") is not None


class Watch:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = -1
        self.wd: dict[int, Path] = {}

    def __enter__(self) -> "Watch":
        self.fd = self.libc.inotify_init1(IN_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for d in [self.root, *[p for p in self.root.rglob("*") if p.is_dir()]]:
            wd = self.libc.inotify_add_watch(self.fd, str(d).encode(), IN_ACCESS | IN_OPEN)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {d}")
            self.wd[wd] = d
        return self

    def events(self) -> list[tuple[str, str]]:
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                wd, mask, _cookie, ln = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16 : i + 16 + ln].split(b"\0", 1)[0].decode(errors="replace")
                i += 16 + ln
                path = self.wd.get(wd, Path("?")) / name if name else self.wd.get(wd, Path("?"))
                out.append((str(path), ",".join(v for k, v in _NAMES.items() if mask & k)))

    def __exit__(self, *exc) -> None:
        if self.fd >= 0:
            os.close(self.fd)

"""What the store's caches compare to know that nothing changed, in a module that imports nothing
heavy (the CLI's warm `runs` reads its cached listing before polars is imported): a folder's or
file's stamp, git's "racy" rule, and where the store is."""

from __future__ import annotations

import os
from pathlib import Path

#: a folder changed less than this many seconds before it was read may change again within the same
#: file-time tick: its listing is not trusted from cache (git's "racy" rule)
RACY_S = 2.0


def default_store_dir() -> Path:
    env = os.environ.get("KERNELSCOPE_STORE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".kernelscope" / "store"


def stamp(path: Path) -> tuple | None:
    """What changes when a folder's entries (or a file) change: modification and change times,
    inode, link count; None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_nlink)


def settled(stamp: tuple | None, read_at_ns: int) -> bool:
    """Whether a folder read at read_at_ns (time.time_ns()) was read well after its entries last
    changed (its modification time; the change time is part of the stamp, so a later chmod or touch
    still moves it)."""
    return stamp is not None and read_at_ns - stamp[0] > RACY_S * 1e9

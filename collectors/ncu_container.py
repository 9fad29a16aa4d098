"""The block structure of an `.ncu-rep`, checked before NVIDIA's library sees the file.

More: docs/architecture.md, *collectors.ncu_container*.
"""

from __future__ import annotations

from collectors.errors import ArtifactError

MAGIC = b"NVR\x00"
#: the session blocks after the first result, by the first field of their details (device
#: attributes, CUDA version, PerfWorks version, Nsight Compute version, (empty), host, target path),
#: as Nsight Compute 2025.3 writes them; a report whose session blocks are a strict beginning of
#: this sequence was cut inside them
SESSION_KINDS = (6, 8, 8, 8, 5, 4, 11)


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        if i >= len(b) or s > 63:
            raise ValueError("bad varint")
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def _header_fields(b: bytes) -> dict[int, int] | None:
    """The varint fields of a block header message, or None when the bytes are not such a message."""
    out: dict[int, int] = {}
    i = 0
    try:
        while i < len(b):
            key, i = _varint(b, i)
            field, wire = key >> 3, key & 7
            if field == 0:
                return None
            if wire == 0:
                v, i = _varint(b, i)
                out.setdefault(field, v)
            elif wire == 2:
                n, i = _varint(b, i)
                if i + n > len(b):
                    return None
                # the kind of session detail: its first field
                if field == 3 and n and -3 not in out:
                    try:
                        out[-3] = _varint(b, i)[0] >> 3
                    except ValueError:
                        return None
                i += n
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            else:
                return None
        if i != len(b):
            return None
    except ValueError:
        return None
    return out


def blocks(data: bytes, name: str) -> list[tuple[int, int]]:
    """(offset of the bytes, length) of every block; ArtifactError when the framing does not end at EOF."""
    if len(data) < 8 or data[:4] != MAGIC:
        raise ArtifactError(
            name, "not an Nsight Compute report (no NVR header; expected a .ncu-rep from ncu -o)"
        )
    out = []
    off = 4
    while off + 4 <= len(data):
        n = int.from_bytes(data[off : off + 4], "little")
        out.append((off + 4, n))
        off += 4 + n
    if off != len(data):
        raise ArtifactError(
            name,
            f"truncated Nsight Compute report (its last block needs {off - len(data):,} more bytes)",
        )
    return out


def walk(data: bytes, name: str) -> int | None:
    """The number of kernel results of a report of the known layout (None for another layout);
    ArtifactError for a damaged or cut report (see the module docstring)."""
    bl = blocks(data, name)
    if len(bl) < 3:
        raise ArtifactError(name, "truncated Nsight Compute report (no result blocks)")
    first = _header_fields(data[bl[2][0] : bl[2][0] + bl[2][1]]) if bl[2][1] < 4096 else None
    if first is None or 5 not in first:
        return None
    results = 0
    sessions: list[int] = []  # kinds of the session blocks after the first result
    last_sources = False  # the last payload block was a source (module) block
    i = 2
    while i < len(bl):
        off, n = bl[i]
        h = _header_fields(data[off : off + n]) if n < 1 << 20 else None
        if h is None or 5 not in h:
            raise ArtifactError(
                name,
                f"corrupt Nsight Compute report (block {i} is not a block header where one is due: "
                "a block was deleted, duplicated or moved)",
            )
        payload = h[5]
        if payload:
            if i + 1 >= len(bl):
                raise ArtifactError(
                    name,
                    "truncated Nsight Compute report (it ends before the payload of its last block "
                    "header)",
                )
            if bl[i + 1][1] + 4 != payload:
                raise ArtifactError(
                    name,
                    f"corrupt Nsight Compute report (block {i + 1} has {bl[i + 1][1]:,} bytes, its "
                    f"header announces {payload - 4:,}: a block was deleted, duplicated or moved)",
                )
            results += h.get(2, 0)
            last_sources = bool(h.get(1)) and not h.get(2)
            i += 2
        else:
            if results:
                sessions.append(h.get(-3, 0))
            i += 1
    if results and (
        not sessions
        or (
            len(sessions) < len(SESSION_KINDS) and tuple(sessions) == SESSION_KINDS[: len(sessions)]
        )
    ):
        raise ArtifactError(
            name,
            "truncated Nsight Compute report (it ends after its first kernel, inside the session "
            "details Nsight Compute writes next)",
        )
    if results and last_sources:
        raise ArtifactError(
            name,
            "truncated Nsight Compute report (it ends after a source block, before the kernel "
            "results that follow one)",
        )
    return results

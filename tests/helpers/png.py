"""Reading PNG bytes in tests: signature, size (IHDR) and tEXt metadata."""
from __future__ import annotations

import struct
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """(type, data) of every chunk; checks the signature and each chunk's CRC."""
    assert png[:8] == SIGNATURE, "not a PNG"
    out, pos = [], 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + data) == crc, f"bad CRC in {kind!r}"
        out.append((kind, data))
        pos += 12 + length
    assert out and out[0][0] == b"IHDR" and out[-1][0] == b"IEND"
    return out


def size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels."""
    ihdr = chunks(png)[0][1]
    return struct.unpack(">II", ihdr[:8])


def text(png: bytes) -> dict[str, str]:
    """tEXt metadata (e.g. "Title")."""
    out = {}
    for kind, data in chunks(png):
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
    return out

"""Python `faulthandler` dumps inside a rank log, read in the same pass that scans its lines.

A hung or killed rank often leaves a faulthandler block in its own log ("Thread 0x… (most recent call
first):" and its `File "…", line N in f` frames). `engine.hang` wants the main thread's frames of the
last such block per rank file. Reading every rank log a second time in the parent to find them cost
a whole extra pass over the job's bytes; instead each worker feeds the blocks of lines it already
holds to a `FaulthandlerReader`, which looks for the dump's mark with one byte search per block and
reads lines only from a mark until the dump's frames end. It keeps only the last dump, so its memory
is one dump's frames whatever the file holds. The reading is `engine.stacks.parse_faulthandler`'s.
"""

from __future__ import annotations

from engine.stacks import FAULTHANDLER_MARK, fh_frame, fh_thread_start, pick_thread


class FaulthandlerReader:
    """Fed a file's lines block by block (each block whole lines joined by b"\\n"); `frames()` is the
    main thread's frames of the last faulthandler dump seen, innermost first."""

    def __init__(self) -> None:
        self._last: list[tuple[str, list[str]]] | None = None  # the last dump's threads
        self._in_block = False

    def feed(self, data: bytes) -> None:
        pos, end = 0, len(data)
        while pos <= end:
            if not self._in_block:
                at = data.find(FAULTHANDLER_MARK, pos)
                if at < 0:
                    return
                nl = data.rfind(b"\n", pos, at)
                pos = nl + 1 if nl >= 0 else pos
            stop = data.find(b"\n", pos)
            if stop < 0:
                stop = end
            self._line(data[pos:stop].decode("utf-8", "replace"))
            pos = stop + 1

    def _line(self, line: str) -> None:
        if fh_thread_start(line):
            if not self._in_block:
                self._last = []
                self._in_block = True
            assert self._last is not None
            self._last.append(("", []))
            return
        if self._in_block:
            frame = fh_frame(line)
            if frame is not None:
                assert self._last is not None
                self._last[-1][1].append(frame)
            elif line.strip() and not line.strip().endswith(":"):
                self._in_block = False

    def frames(self) -> list[str]:
        return pick_thread(self._last) if self._last else []

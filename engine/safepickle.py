"""Loading pickles from job folders without running their code.

A flight-recorder dump is a pickle of plain containers and primitives. A pickle can also name any
importable callable and call it while loading; that is how a hostile file runs code. The unpickler
here refuses every global lookup (`find_class`) and persistent id, so only dicts, lists, tuples,
sets, strings, bytes, numbers, booleans and None can come out of it.
"""
from __future__ import annotations

import io
import pickle


class UnsafePickle(ValueError):
    """The pickle asks for something other than plain data (a class, a function, a persistent id)."""


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        raise UnsafePickle(f"refused: the pickle names {module}.{name}")

    def persistent_load(self, pid: object) -> object:
        raise UnsafePickle("refused: the pickle uses persistent ids")


def loads_plain(data: bytes) -> object:
    """The plain data in `data`; `UnsafePickle` when it names any class or callable, `ValueError`
    when it is not a pickle at all."""
    try:
        return _PlainUnpickler(io.BytesIO(data)).load()
    except UnsafePickle:
        raise
    except (pickle.UnpicklingError, EOFError, IndexError, TypeError, AttributeError, KeyError,
            MemoryError, OverflowError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not a readable pickle ({exc.__class__.__name__})") from None

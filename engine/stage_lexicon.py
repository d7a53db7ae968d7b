"""What the frameworks do in each stage, as a reader who knows them reads a failure: data/stage_lexicon.yaml.

A knowledgeable engineer tells the stage of a pasted failure from its traceback's function names
(`from_pretrained`, `_load_state_dict_into_meta_model` → model_loading; `_save_checkpoint` → checkpointing)
and from the messages frameworks print around it ("Running tokenizer on dataset" → data_loading). The
labelled cases are too few to teach that vocabulary (a new wave's wording is mostly unseen), so the
lexicon states it as data, written from the frameworks' own source and documentation, not from the
labelled cases. `engine.stage_model` reads its answers as features (`lx…:`), so the learned model weighs
them against everything else it sees; nothing here decides a stage alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from engine.rules import load

_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")  # an innermost C++ template argument list

DATA = "stage_lexicon"


@dataclass(frozen=True)
class Lexicon:
    functions: dict[str, frozenset[str]]  # function name -> the stages it points to (usually one)
    phrases: tuple[tuple[str, re.Pattern[str]], ...]  # (stage, pattern) in file order

    def function_stages(self, func: str) -> frozenset[str]:
        """The stages a traceback frame's function points to ("Trainer._save_checkpoint" and
        "_save_checkpoint" alike: the last component of a dotted or C++ name, without a C++ signature's
        argument list or template arguments: "caffe2::serialize::PyTorchStreamWriter::writeRecord(std::string
        const&, …")."""
        name = func.strip().split("(", 1)[0]
        while (bare := _TEMPLATE_ARGS.sub("", name)) != name:  # `writeRecord<std::vector<int>>`: inner first
            name = bare
        name = re.split(r"\.|::", name)[-1]
        return self.functions.get(name, frozenset())

    def phrase_stages(self, text: str) -> list[str]:
        """The stages whose phrases `text` holds, each once, in the file's order."""
        out: list[str] = []
        for stage, pattern in self.phrases:
            if stage not in out and pattern.search(text):
                out.append(stage)
        return out


def lexicon_from_dict(data: dict) -> Lexicon:
    """The lexicon of a parsed data file; a ValueError naming the entry that is not usable."""
    stages = data.get("stages")
    if not isinstance(stages, dict):
        raise ValueError("stage_lexicon.yaml: `stages` must map each stage to its functions and phrases")
    functions: dict[str, set[str]] = {}
    phrases: list[tuple[str, re.Pattern[str]]] = []
    for stage, entry in stages.items():
        for func in entry.get("functions") or []:
            if not isinstance(func, str) or not func.strip():
                raise ValueError(f"stage_lexicon.yaml: {stage}: a function must be a name, not {func!r}")
            functions.setdefault(func.strip(), set()).add(stage)
        for phrase in entry.get("phrases") or []:
            try:
                phrases.append((stage, re.compile(str(phrase))))
            except re.error as exc:
                raise ValueError(f"stage_lexicon.yaml: {stage}: phrase {phrase!r}: {exc}") from exc
    return Lexicon({f: frozenset(s) for f, s in functions.items()}, tuple(phrases))


@lru_cache(maxsize=1)
def lexicon() -> Lexicon:
    """The shipped lexicon (data/stage_lexicon.yaml)."""
    return lexicon_from_dict(load(DATA))


def frame_stages(funcs: Iterable[str], lex: Lexicon | None = None) -> list[str]:
    """The stages the frames' functions point to, innermost first, each once; a function that points
    to several stages names none."""
    lex = lex or lexicon()
    out: list[str] = []
    for func in funcs:
        found = lex.function_stages(func)
        if len(found) == 1:
            (stage,) = found
            if stage not in out:
                out.append(stage)
    return out


def reading(failure: str, after: Iterable[str], before: Iterable[str], funcs: Iterable[str],
            lex: Lexicon | None = None) -> str | None:
    """The stage the lexicon reads, where one place names exactly one: the innermost frame whose function it
    knows, else the failure line's phrases, else those of the lines after it, else the last line before the
    traceback that names a stage. None: the lexicon reads no stage (or two at the deciding place)."""
    lex = lex or lexicon()
    framed = frame_stages(funcs, lex)
    if framed:
        return framed[0]
    for text in (failure, " \n ".join(after)):
        found = lex.phrase_stages(text)
        if found:
            return found[0] if len(found) == 1 else None
    for line in reversed(list(before)):
        found = lex.phrase_stages(line)
        if found:
            return found[0] if len(found) == 1 else None
    return None

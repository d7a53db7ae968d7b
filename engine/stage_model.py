"""The learned stage model: which stage the failing rank's own words point to, with a probability.

Read where the failing rank failed (`engine.window`): the words of the failure line, the frames of
its traceback (function names split into words, the file's name and folder, the code line), the last
lines the rank logged before its traceback, and what the job's timeline shows (`engine.stage`'s
progress, the rank's log stage, the other ranks' stage). A multinomial logistic regression over
these binary features, trained by `l4 bench stage-model train` (engine/bench/stage_learn.py) on the
labelled real cases, is shipped as readable weights in data/stage_model.json; predicting is a dot
product (no scikit-learn here), of the features scaled by tf-idf when the file has an `idf`.

`decide` combines it with the rule stage the way leave-one-source-out cross-validation chose
(the file's `combine`, `timeline` and `threshold`): where the job's own timeline shows a stage, the
rules keep it (with the file's `under_way` `model`, where it shows training under way, the model may
move the rules' training to checkpointing: `under_way_stage`); where only text exists, the model
answers, `unknown` below the threshold. Where the model is unsure (below the file's `fallback_below`), its
`fallback` answers instead: `frames`, the stage of the innermost strong frame rule of data/stages.yaml
(`save_checkpoint`, `load_state_dict`, …), or `lexicon`, the reading of the frameworks' lexicon
(`engine.stage_lexicon`, data/stage_lexicon.yaml), whose answers are features of the model too. With the
file's `overrule` `frames`, a strong frame rule that names the failing frame by its function (or its file)
answers however sure the model is: the program's code says where it was, its error's words only what broke.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from pathlib import PurePosixPath

from engine.model import ParsedJob, StageBasis
from engine.rules import load
from engine.stage import (
    Failing,
    _death_noticed,
    _foreign_frame,
    _frames,
    _job_stage,
    _own_stream_stage,
    _sibling_stage,
    failing_window,
    failure_hint,
    frame_list_evidence,
    frame_rule_evidence,
    frame_words_stage,
    log_stage,
    progress_stage,
    stage_of_template,
    traceback_start,
    window_messages,
)
from engine.stage_lexicon import frame_stages, lexicon, reading
from engine.window import Window

MODEL_FILE = "stage_model.json"
UNKNOWN = "unknown"
BEFORE_LINES = 20  # lines the rank logged before its traceback that are read
AFTER_LINES = 6  # lines after the failure line that are read
KEEP_BEFORE, KEEP_AFTER = 40, 12  # lines kept in the evidence (training records), at least the above
MAX_FRAMES = 12  # innermost frames read
_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])")
# an exception's class as it stands in the failure line ("OSError: …", "with error <class 'ValueError'>")
_ERROR_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Interrupt|Exit|Warning))\b")


def words(text: str) -> list[str]:
    """Lower-cased stems of the words of two letters or more (camelCase split; digits and punctuation
    dropped; "saving", "saved", "saves" → "sav")."""
    return [stem(w.lower()) for w in _WORD.findall(text) if len(w) > 1]


_SUFFIXES = ("ing", "ed", "es", "e", "s")


def stem(word: str) -> str:
    """The word without one inflection suffix ("saving", "saved", "saves", "save" → "sav"), when at
    least three letters remain ("loss", "process" keep their double s)."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def _lines_before_bucket(n: int) -> str:
    for top, name in ((0, "0"), (3, "1-3"), (20, "4-20"), (200, "21-200")):
        if n <= top:
            return name
    return "200+"


Frame = tuple[str, str, str]  # (file, function, code line), as engine.stage reads them


@dataclass(frozen=True)
class Evidence:
    """What the model reads of one failure (plain data: the training records keep it as JSON)."""
    failure: str  # the failure line's message
    after: list[str]  # the messages of the lines after it (an exception's message, its traceback)
    before: list[str]  # the last messages the rank logged before the traceback that ends at the failure
    n_before: int  # how many messages came before it in the window
    frames: list[Frame]  # the failing traceback's frames, innermost first
    timeline: dict[str, str | None]  # "progress", "log": engine.stage's reading of the rank's lines

    def to_dict(self) -> dict:
        return {"failure": self.failure, "after": self.after, "before": self.before,
                "n_before": self.n_before, "frames": [list(f) for f in self.frames],
                "timeline": self.timeline}


def evidence_from_dict(d: dict) -> Evidence:
    return Evidence(failure=str(d["failure"]), after=list(d["after"]), before=list(d["before"]),
                    n_before=int(d["n_before"]), frames=[(str(a), str(b), str(c)) for a, b, c in d["frames"]],
                    timeline=dict(d["timeline"]))


def features(ev: Evidence) -> set[str]:
    """The binary features of one failure: `e:` words of the failure line, `fn:`/`ff:`/`c:` words of its
    frames' function names, file names and code lines, `b:` words of the lines logged before the
    traceback, `w:` each of these words wherever it stands, `tl:` the timeline's stages, `pos:` how many
    lines came before, `x:` the first exception class the failure line names (`error_class`); the words
    of data/stage_words.yaml `stopwords` left out. The lines after the failure line are read by their
    stage hints only (`ha:`, `hint_features`), not by their words: they are its traceback's boilerplate,
    its consequences and advice, whose wording names the program and the launcher, not the stage
    (leave-one-public-wave-out 0.67 with their words, 0.76 without)."""
    out: set[str] = set()
    out.update(f"e:{w}" for w in stage_words(ev.failure))
    for file, func, code in ev.frames[:MAX_FRAMES]:
        out.update(f"fn:{w}" for w in stage_words(func.replace("_", " ")))
        path = PurePosixPath(file.replace("\\", "/"))
        out.update(f"ff:{w}" for w in stage_words(f"{path.parent.name} {path.stem}".replace("_", " ")))
        out.update(f"c:{w}" for w in stage_words(code))
    for line in ev.before[-BEFORE_LINES:]:
        out.update(f"b:{w}" for w in stage_words(line))
    out |= {"w:" + f.split(":", 1)[1] for f in out}  # each word wherever it stands too: few cases
    out.add(f"pos:{_lines_before_bucket(ev.n_before)}")
    out.add(f"x:{error_class(ev.failure) or 'none'}")
    for name, stage in sorted(ev.timeline.items()):
        out.add(f"tl:{name}={stage or 'none'}")
    return out | hint_features(ev) | lexicon_features(ev)


def error_class(text: str) -> str | None:
    """The first exception class `text` names, whole ("ValueError", "torch.cuda.OutOfMemoryError" →
    "OutOfMemoryError"); None when it names none. Its words are `e:` features already ("value", the stop
    word "error" left out), but the class whole is one feature whose stage prior other repositories teach:
    leave-one-public-wave-out 134 → 136 of 166 (waves 4 and 7: a ValueError while data is read)."""
    found = _ERROR_CLASS.search(text)
    return found.group(1) if found else None


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    """data/stage_words.yaml `stopwords`, stemmed as `words` stems."""
    return stopword_set(load("stage_words").get("stopwords", []))


def stopword_set(listed: list) -> frozenset[str]:
    """The stems of the listed stop words; a ValueError for an entry that is no string (YAML reads a
    bare on/no/yes as a boolean)."""
    odd = [w for w in listed if not isinstance(w, str)]
    if odd:
        raise ValueError(f"stage_words.yaml: stopwords must be strings (quote them): {odd!r}")
    return frozenset(s for w in listed for s in words(w))


def stage_words(text: str) -> list[str]:
    """`words` of `text` without the stop words (words every failure report shares, whatever its stage)."""
    stop = _stopwords()
    return [w for w in words(text) if w not in stop]


def hint_features(ev: Evidence) -> set[str]:
    """The stage hints of data/stages.yaml, read at each place as features (a word the training cases
    never showed may still be in a hint's vocabulary): `hf:` the stage the failure line marks and `fh:`
    the stage its kind of error typically shows in; `ha:` the stages the lines after it mark; `rf:` the
    stage of the innermost frame a frame rule knows (`~`: a weak one), `hw:` the stages the frames'
    compound names point to and `hw0:` the innermost of these; `lh:` the stage of the last line before
    the traceback that marks one (recency: "Map: 45%", "Saving model checkpoint to") and `hb:` every
    stage the last BEFORE_LINES lines mark. Each takes `none` where nothing fits."""
    out = {f"hf:{stage_of_template(ev.failure) or 'none'}", f"fh:{failure_hint(ev.failure) or 'none'}"}
    out.update(f"ha:{h}" for line in ev.after[:AFTER_LINES] if (h := stage_of_template(line)))
    framed = frame_list_evidence(ev.frames[:MAX_FRAMES])
    out.add(f"rf:{framed[0]}{'~' if framed[1] else ''}" if framed else "rf:none")
    worded = [h for file, func, _ in ev.frames[:MAX_FRAMES]
              if not _foreign_frame(file) and (h := frame_words_stage(func, file))]
    out.update(f"hw:{h}" for h in worded)
    out.add(f"hw0:{worded[0] if worded else 'none'}")
    marked = [h for line in ev.before[-BEFORE_LINES:] if (h := stage_of_template(line))]
    out.update(f"hb:{h}" for h in marked)
    out.add(f"lh:{marked[-1] if marked else 'none'}")
    return out


def lexicon_features(ev: Evidence) -> set[str]:
    """What the frameworks' lexicon (`engine.stage_lexicon`, data/stage_lexicon.yaml) reads at each place:
    `lx:` the stages the failure line's phrases point to, `lxa:` those of the lines after it (an exception's
    message, its chained causes), `lxb:` those of the lines logged before the traceback and `lxl:` the last
    of these that points to one, `lxf:` the stages the frames' functions point to and `lxf0:` the innermost
    of these. Each takes `none` where nothing fits."""
    lex = lexicon()
    out = {f"lx:{s}" for s in lex.phrase_stages(ev.failure)} or {"lx:none"}
    out.update(f"lxa:{s}" for line in ev.after[:AFTER_LINES] for s in lex.phrase_stages(line))
    marked = [s for line in ev.before[-BEFORE_LINES:] for s in lex.phrase_stages(line)[:1]]
    out.update(f"lxb:{s}" for s in marked)
    out.add(f"lxl:{marked[-1] if marked else 'none'}")
    framed = frame_stages((func for _, func, _ in ev.frames[:MAX_FRAMES]), lex)
    out.update(f"lxf:{s}" for s in framed)
    out.add(f"lxf0:{framed[0] if framed else 'none'}")
    return out


def _split_window(window: Window) -> tuple[str, list[str], list[str], int]:
    """(failure message, messages after it, messages before the traceback that ends at it, their count):
    the traceback (`engine.stage.traceback_start`) is the frames' features, not the rank's log."""
    if not window.lines:
        return "", [], [], 0
    at = min(max(window.at, 0), len(window.lines) - 1)
    start = traceback_start(Window(path=window.path, anchor=window.start + at, start=window.start,
                                   lines=window.lines))
    msgs = window_messages(window.lines)[: at + 1 + KEEP_AFTER]
    before = [m for m in msgs[:start] if m]
    return msgs[at], [m for m in msgs[at + 1:] if m], before[-KEEP_BEFORE:], len(before)


@dataclass(frozen=True)
class StageModel:
    version: int
    classes: tuple[str, ...]
    intercept: tuple[float, ...]
    weights: dict[str, tuple[float, ...]]
    threshold: float  # below this probability the model's answer is `unknown`
    combine: str  # how the model and the rules are combined (see `combined`)
    timeline: str = "progress"  # which timeline evidence lets the rules keep their answer (`timeline_stage`)
    fallback: str = "none"  # what answers where the model is unsure (`fallback_stage`)
    fallback_below: float = 0.0  # the model's probability below which it is unsure
    overrule: str = "none"  # what answers however sure the model is (`overrule_stage`)
    # tf-idf scaling (`scaled`): each known feature's inverse document frequency; None: features count 1
    idf: dict[str, float] | None = None
    # where the timeline shows training under way: `rules` (the rule stage answers) or `model`
    # (`under_way_stage`: the model may move the rules' training to checkpointing, by `under_way_margin`)
    under_way: str = "rules"
    under_way_margin: float = 0.0

    def scaled(self, feats: set[str]) -> dict[str, float]:
        """The value of each feature present (`scaled_features` by the model's `idf`)."""
        return scaled_features(feats, self.idf)

    def probabilities(self, feats: set[str]) -> dict[str, float]:
        """P(stage | features): softmax of the intercept plus the weights of the features present, each
        times its value (`scaled`)."""
        scores = list(self.intercept)
        for f, v in self.scaled(feats).items():
            w = self.weights.get(f)
            if w is not None:
                scores = [s + v * x for s, x in zip(scores, w, strict=True)]
        top = max(scores)
        exp = [math.exp(s - top) for s in scores]
        total = sum(exp)
        return {c: e / total for c, e in zip(self.classes, exp, strict=True)}

    def predict(self, feats: set[str]) -> tuple[str, float]:
        """(most probable stage, its probability)."""
        probs = self.probabilities(feats)
        best = max(probs, key=lambda c: probs[c])
        return best, probs[best]

    def to_dict(self) -> dict:
        return {"version": self.version, "classes": list(self.classes), "intercept": list(self.intercept),
                "threshold": self.threshold, "combine": self.combine, "timeline": self.timeline,
                "fallback": self.fallback, "fallback_below": self.fallback_below,
                "overrule": self.overrule, "under_way": self.under_way,
                "under_way_margin": self.under_way_margin,
                **({"idf": dict(sorted(self.idf.items()))} if self.idf is not None else {}),
                "weights": {f: list(w) for f, w in sorted(self.weights.items())}}


def scaled_features(feats: set[str], idf: dict[str, float] | None) -> dict[str, float]:
    """The value of each feature present: 1, or with `idf` its idf divided by the Euclidean norm of the idf
    of every feature present that `idf` knows (a rare word weighs more than a common one, and a failure that
    shows many words weighs no more in all than one that shows few; unknown features count nowhere)."""
    if idf is None:
        return dict.fromkeys(feats, 1.0)
    known = {f: idf[f] for f in feats if f in idf}
    norm = math.sqrt(sum(v * v for v in known.values())) or 1.0
    return {f: v / norm for f, v in known.items()}


def model_from_dict(d: dict) -> StageModel:
    classes = tuple(str(c) for c in d["classes"])
    weights = {str(f): tuple(float(x) for x in w) for f, w in d["weights"].items()}
    if any(len(w) != len(classes) for w in weights.values()) or len(d["intercept"]) != len(classes):
        raise ValueError("stage model: every weight row needs one number per class")
    if d.get("under_way", "rules") not in UNDER_WAY:
        raise ValueError(f"stage model: unknown under_way {d['under_way']!r} (one of {', '.join(UNDER_WAY)})")
    return StageModel(version=int(d["version"]), classes=classes,
                      intercept=tuple(float(x) for x in d["intercept"]), weights=weights,
                      threshold=float(d.get("threshold", 0.0)), combine=str(d.get("combine", "rules")),
                      timeline=str(d.get("timeline", "progress")), fallback=str(d.get("fallback", "none")),
                      fallback_below=float(d.get("fallback_below", 0.0)),
                      overrule=str(d.get("overrule", "none")), under_way=str(d.get("under_way", "rules")),
                      under_way_margin=float(d.get("under_way_margin", 0.0)),
                      idf=None if d.get("idf") is None else {str(f): float(v) for f, v in d["idf"].items()})


@lru_cache(maxsize=1)
def load_model() -> StageModel | None:
    """The shipped model (data/stage_model.json); None when the package has none."""
    ref = resources.files("engine").joinpath("data").joinpath(MODEL_FILE)
    if not ref.is_file():
        return None
    return model_from_dict(json.loads(ref.read_text(encoding="utf-8")))


COMBINATIONS = ("rules", "model", "timeline")


def combined(how: str, rule: str, timeline_stage: str | None, predicted: str, prob: float,
             threshold: float, fallback: str | None = None, fallback_below: float = 0.0,
             overruled: str | None = None) -> str:
    """The stage a combination gives: `rules` (the rule stage alone), `model` (the model alone,
    `unknown` below `threshold`), `timeline` (the rule stage where the job's own timeline shows a
    stage, `timeline_stage`, else the model as in `model`). Where the model answers with a probability
    below `fallback_below`, the `fallback` stage (`fallback_stage`) answers instead, when there is one;
    where the model answers, an `overruled` stage (`overrule_stage`) answers whatever its probability."""
    return combined_answer(how, rule, timeline_stage, predicted, prob, threshold, fallback, fallback_below,
                           overruled)[0]


def combined_answer(how: str, rule: str, timeline_stage: str | None, predicted: str, prob: float,
                    threshold: float, fallback: str | None = None, fallback_below: float = 0.0,
                    overruled: str | None = None, fallback_source: str = "lexicon") -> tuple[str, StageBasis]:
    """`combined`'s stage and what it rests on (`engine.model.StageBasis`): the timeline, the overruling
    frame, the fallback (`fallback_source`: its kind as a basis, `FALLBACK_BASIS`), the model's words with
    their probability, or the rules."""
    if how not in COMBINATIONS:
        raise ValueError(f"unknown stage combination {how!r} (one of {', '.join(COMBINATIONS)})")
    if how == "rules":
        return rule, StageBasis("rules")
    if how == "timeline" and timeline_stage is not None:
        return rule, StageBasis("timeline")
    if overruled not in (None, UNKNOWN):
        return overruled, StageBasis("frame")
    if prob < fallback_below and fallback not in (None, UNKNOWN):
        return fallback, StageBasis(fallback_source)
    return (predicted if prob >= threshold else UNKNOWN), StageBasis("words", round(prob, 2))


UNDER_WAY = ("rules", "model")  # what answers where the timeline shows training under way
# the stage the failure's own words may move training to where training is under way: a save. Not
# teardown: the words of an exit hang (timeouts, aborts, "stuck") are those of a hang in a step, and
# moving them cost 8 of the outsider generators' 320 cases for one public dev case (session 21)
UNDER_WAY_LATER = "checkpointing"


def own_words(ev: Evidence) -> Evidence:
    """The failure's own words: the evidence without the lines the rank logged before it (where the
    timeline shows a stage, the rules have read those lines already, checkpoint windows and all: another
    rank's "saving checkpoint" before a failure in a step is no save of the failing rank's)."""
    return replace(ev, before=[])


def under_way_stage(probabilities: dict[str, float], rule: str, margin: float) -> str:
    """The stage where the failing rank's timeline shows training under way (a counter or a bar that
    rose, a training marker) and the rules say `training`: checkpointing where the model, reading the
    failure's own words (`own_words`), holds it more probable than training by more than `margin`, else
    training. The timeline says training had begun, not that the failure was in a step: a save after the
    last step follows the same progress, and only the failure's own words tell them apart (`No space left
    on device` in a `torch.save` frame after `100%|…| 200/200`). Any other rule stage stands."""
    if rule != "training":
        return rule
    later = probabilities.get(UNDER_WAY_LATER, 0.0) > probabilities.get("training", 0.0) + margin
    return UNDER_WAY_LATER if later else rule


FALLBACKS = ("none", "frames", "frames+hints", "rules", "lexicon")


def fallback_stage(kind: str, rule: str, ev: Evidence | None) -> str | None:
    """What answers where the model is unsure: `none` (nothing: the model's answer stands), `frames`
    (the stage of the innermost frame a strong frame rule of data/stages.yaml knows: `save_checkpoint`,
    `load_state_dict`, `__next__`, `init_process_group` …; a weak one, a trainer's `fit`, counts not),
    `frames+hints` (those, else the stage the failure line's kind of error typically shows in,
    data/stages.yaml `failure_hints`), `rules` (the rule stage), `lexicon` (the frameworks' lexicon's
    reading, `engine.stage_lexicon.reading`: the innermost frame it knows, else the failure line's
    phrases, else the lines after it, else the last line before). None: no fallback answer."""
    if kind == "none":
        return None
    if kind == "rules":
        return rule if rule != UNKNOWN else None
    if kind in ("frames", "frames+hints"):
        framed = frame_list_evidence(ev.frames[:MAX_FRAMES]) if ev is not None else None
        if framed and not framed[1]:
            return framed[0]
        return failure_hint(ev.failure) if kind == "frames+hints" and ev is not None else None
    if kind == "lexicon":
        if ev is None:
            return None
        return reading(ev.failure, ev.after[:AFTER_LINES], ev.before[-BEFORE_LINES:],
                       (func for _, func, _ in ev.frames[:MAX_FRAMES]))
    raise ValueError(f"unknown stage fallback {kind!r} (one of {', '.join(FALLBACKS)})")


OVERRULES = ("none", "frames")


def overrule_stage(kind: str, ev: Evidence | None) -> str | None:
    """What answers however sure the model is: `none` (nothing), `frames` (the stage of the innermost
    frame a frame rule of data/stages.yaml knows, when the rule is strong and names the frame by its
    function, its file or the words of its name: `_configure_zero_optimizer`, `_ddp_init_helper`, `__del__`,
    `save_sharded_optimizer`; not a rule that reads the code line only, `trainer = Trainer(`, and not where
    the failure line reports a killed process, whose traceback is where a survivor noticed). The error's
    words ("CUDA out of memory") say what broke, which happens at any stage; the failing function says
    where the program was. None: no overruling answer."""
    if kind == "none" or ev is None:
        return None
    if kind != "frames":
        raise ValueError(f"unknown stage overrule {kind!r} (one of {', '.join(OVERRULES)})")
    found = frame_rule_evidence(ev.frames[:MAX_FRAMES])
    if found is None or found[1] or found[2] or _death_noticed(ev.failure):
        return None
    return found[0]


TIMELINE_PARTS = ("progress", "log", "job", "init")


def timeline_stage(kind: str, timeline: dict[str, str | None]) -> str | None:
    """The stage the job's own timeline shows, read in the order `kind` names ("progress+log+job"):
    `progress`, a counter or a tqdm bar of the failing rank up to the failure; `log`, the stage its log
    shows by stage markers and checkpoint windows; `job`, the stage the other ranks' markers show when
    the failure appears (engine.stage's reading of each). Markers of `init` count only with `+init` (set-up
    lines precede a failure at any stage in a pasted excerpt). None: no timeline shows a stage."""
    parts = kind.split("+")
    if not parts or any(p not in TIMELINE_PARTS for p in parts):
        raise ValueError(f"unknown timeline kind {kind!r} (parts: {', '.join(TIMELINE_PARTS)})")
    for part in parts:
        stage = timeline.get(part) if part != "init" else None
        if stage is not None and (part == "progress" or stage != "init" or "init" in parts):
            return stage
    return None


def failure_evidence(parsed: ParsedJob, event_ids: list[int], *, trust_time: bool = True,
                     job: bool = True, failing: Failing | None = None) -> Evidence | None:
    """What the failing rank's lines say around the first of `event_ids`: the failure line, the lines
    around it, its traceback's frames and its timeline (with `job`, also the other ranks' stage, unless
    the rank's own progress shows one); None when no rank file shows the event or the file cannot be
    read. `failing`: `engine.stage.failing_window` of the same events, when the caller read it already."""
    where, window = failing if failing is not None else failing_window(parsed, event_ids)
    if window is None or where is None:
        return None
    failure, after, before, n_before = _split_window(window)
    # the rank's own lines as the rules read them: before the failure, else its lines a shared console
    # lists after it, else its other files (its stdout beside its stderr)
    local = log_stage(window) or _own_stream_stage(window) or _sibling_stage(parsed, where[0])
    timeline = {"progress": progress_stage(window), "log": local}
    if job and timeline["progress"] is None:  # it scans every template: only when it may matter
        timeline["job"] = _job_stage(parsed, event_ids[0], trust_time, where[0])
    return Evidence(failure=failure, after=after, before=before, n_before=n_before, frames=_frames(window),
                    timeline=timeline)


# what a fallback kind rests on, as a StageBasis source (frames+hints: a frame, else the error kind's hint)
FALLBACK_BASIS = {"frames": "frame", "frames+hints": "lexicon", "rules": "rules", "lexicon": "lexicon"}


def decide(parsed: ParsedJob, event_ids: list[int], rule: str, *, trust_time: bool = True,
           failing: Failing | None = None) -> tuple[str, StageBasis]:
    """The stage of the failure, and what it rests on (`engine.model.StageBasis`): the rule stage `rule`
    combined with the shipped model as its file's `combine` says (the rules alone when no model is
    shipped); `trust_time` and `failing` as for `failure_evidence`."""
    model = load_model()
    if model is None or model.combine == "rules":
        return rule, StageBasis("rules")
    ev = failure_evidence(parsed, event_ids, trust_time=trust_time, job="job" in model.timeline.split("+"),
                          failing=failing)
    if ev is None:
        return rule, StageBasis("rules")
    shown = timeline_stage(model.timeline, ev.timeline)
    if model.combine == "timeline" and shown is not None:
        if shown == "training" and model.under_way == "model":
            probabilities = model.probabilities(features(own_words(ev)))
            return under_way_stage(probabilities, rule, model.under_way_margin), StageBasis("timeline")
        return rule, StageBasis("timeline")
    predicted, prob = model.predict(features(ev))
    # the fallback answers only below fallback_below: read it only then (the lexicon's reading scans again
    # the lines `features` scanned)
    fallback = fallback_stage(model.fallback, rule, ev) if prob < model.fallback_below else None
    return combined_answer(model.combine, rule, shown, predicted, prob, model.threshold, fallback,
                           model.fallback_below, overrule_stage(model.overrule, ev),
                           FALLBACK_BASIS.get(model.fallback, "lexicon"))

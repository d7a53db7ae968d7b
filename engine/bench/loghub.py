"""Grouping accuracy (GA) of L4's parser on Loghub-2k, next to plain Drain3.

GA (Zhu et al., ICSE-SEIP'19): a message is parsed correctly iff the set of messages in its predicted
cluster equals the set of messages in its ground-truth group; GA = #correct / #messages. This is the
definition of ``/work/shared/data/loghub/score_ga.py`` (reproduced here so that the repo does not need
that directory at run time).

Input per system ``S`` under the Loghub directory:

- ``S/S_2k.log_structured.csv``            original Loghub labels, grouped by ``EventId`` (``gt="orig"``)
- ``S/S_2k.log_structured_corrected.csv``  Loghub-2.0 corrected labels, grouped by ``EventTemplate``
  (``gt="corr"``)

The ``Content`` column (headers already stripped) is the parser input. Three configs are scored:

- ``drain3-default``: ``TemplateMinerConfig()`` defaults, no masking.
- ``drain3-mask``:    defaults + Drain3 masking of IPs, ``0x`` hex and numbers (score_ga.py's SIMPLE_MASKS).
- ``l4``:             the product path: ``engine.masking.mask`` then ``engine.parse.new_miner``, with
  identical masked messages memoised to one cluster (as ``engine.parse.TemplateTable`` does).
"""
from __future__ import annotations

import csv
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from drain3 import TemplateMiner
from drain3.masking import MaskingInstruction
from drain3.template_miner_config import TemplateMinerConfig

from engine.masking import MASK, mask
from engine.parse import new_miner

SYSTEMS = ["HDFS", "Hadoop", "Spark", "Zookeeper", "OpenStack", "BGL", "HPC", "Thunderbird", "Windows",
           "Linux", "Mac", "Android", "HealthApp", "Apache", "OpenSSH", "Proxifier"]
CONFIGS = ("drain3-default", "drain3-mask", "l4")
GTS = ("orig", "corr")

# score_ga.py's SIMPLE_MASKS (Drain3 MaskingInstruction pattern, mask name).
SIMPLE_MASKS = [
    (r"((?<=[^A-Za-z0-9])|^)(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(:\d+)?)((?=[^A-Za-z0-9])|$)", "IP"),
    (r"((?<=[^A-Za-z0-9])|^)(0[xX][0-9a-fA-F]+)((?=[^A-Za-z0-9])|$)", "HEX"),
    (r"((?<=[^A-Za-z0-9])|^)([\-\+]?\d+(\.\d+)?)((?=[^A-Za-z0-9])|$)", "NUM"),
]

# Published mean GA of Drain on Loghub-2k (He et al., ICWS'17 / Zhu et al., ICSE-SEIP'19, 16 systems).
PUBLISHED_DRAIN_MEAN_GA = 0.865


def csv_path(loghub_dir: Path, system: str, gt: str = "orig") -> Path:
    """The structured CSV of `system` for labels `gt` ("orig" or "corr")."""
    if gt not in GTS:
        raise ValueError(f"gt must be one of {GTS}, not {gt!r}")
    suffix = "_structured_corrected.csv" if gt == "corr" else "_structured.csv"
    return Path(loghub_dir) / system / f"{system}_2k.log{suffix}"


def load(loghub_dir: Path, system: str, gt: str = "orig") -> tuple[list[str], list[str]]:
    """(contents, ground-truth group labels) of one system; FileNotFoundError if its CSV is missing."""
    path = csv_path(loghub_dir, system, gt)
    with path.open(newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csv.DictReader(f))
    # Corrected labels are grouped by template text (as the Loghub-2.0 evaluator does), the original
    # ones by EventId (as logparser does).
    key = "EventTemplate" if gt == "corr" else "EventId"
    return [r["Content"].strip() for r in rows], [r[key] for r in rows]


def grouping_accuracy(pred: Sequence[Hashable], truth: Sequence[Hashable]) -> float:
    """Fraction of messages whose predicted cluster has exactly the members of their ground-truth group."""
    if len(pred) != len(truth):
        raise ValueError(f"{len(pred)} predictions for {len(truth)} messages")
    if not pred:
        return 0.0
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, p in enumerate(pred):
        members[p].append(i)
    truth_size = Counter(truth)
    correct = 0
    for idx in members.values():
        labels = {truth[i] for i in idx}
        if len(labels) == 1 and truth_size[next(iter(labels))] == len(idx):
            correct += len(idx)
    return correct / len(pred)


def _drain3_miner(masked: bool) -> TemplateMiner:
    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    if masked:
        cfg.masking_instructions = [MaskingInstruction(p, n) for p, n in SIMPLE_MASKS]
    return TemplateMiner(config=cfg)


def predict_drain3(contents: Iterable[str], masked: bool = False) -> list[int]:
    """Cluster ids from plain Drain3 (defaults; with score_ga.py's SIMPLE_MASKS if `masked`)."""
    miner = _drain3_miner(masked)
    return [miner.add_log_message(c)["cluster_id"] for c in contents]


def predict_l4(contents: Iterable[str]) -> list[int]:
    """Cluster ids from L4's parser: `mask` then `new_miner`, identical masked messages memoised."""
    miner = new_miner()
    by_masked: dict[str, int] = {}
    out = []
    for c in contents:
        masked = mask(c) or MASK
        cid = by_masked.get(masked)
        if cid is None:
            cid = by_masked[masked] = miner.add_log_message(masked)["cluster_id"]
        out.append(cid)
    return out


PREDICTORS: dict[str, Callable[[list[str]], list[int]]] = {
    "drain3-default": lambda contents: predict_drain3(contents, masked=False),
    "drain3-mask": lambda contents: predict_drain3(contents, masked=True),
    "l4": predict_l4,
}


def score_system(dir: Path, system: str, gt: str = "orig") -> dict[str, Any]:
    """GA of every config on one system of the Loghub directory `dir`.

    Returns ``{"system", "gt", "messages", "gt_groups", "ga": {config: GA}, "clusters": {config: n},
    "masked_lines": share of messages that `engine.masking.mask` changes, "seconds": {config: s}}``.
    """
    contents, truth = load(dir, system, gt)
    ga: dict[str, float] = {}
    clusters: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for config in CONFIGS:
        started = time.perf_counter()
        pred = PREDICTORS[config](contents)
        seconds[config] = round(time.perf_counter() - started, 3)
        ga[config] = grouping_accuracy(pred, truth)
        clusters[config] = len(set(pred))
    changed = sum(mask(c) != c for c in contents)
    return {
        "system": system,
        "gt": gt,
        "messages": len(contents),
        "gt_groups": len(set(truth)),
        "ga": ga,
        "clusters": clusters,
        "masked_lines": changed / len(contents) if contents else 0.0,
        "seconds": seconds,
    }


def available_systems(loghub_dir: Path, gt: str = "orig") -> list[str]:
    """The known systems (in Loghub order) whose CSV for `gt` exists under `loghub_dir`."""
    return [s for s in SYSTEMS if csv_path(loghub_dir, s, gt).is_file()]


def score_all(
    loghub_dir: Path, systems: Sequence[str] | None = None, gt: str = "orig"
) -> list[dict[str, Any]]:
    """`score_system` for each of `systems` (default: every known system present under `loghub_dir`)."""
    names = list(systems) if systems is not None else available_systems(loghub_dir, gt)
    return [score_system(loghub_dir, s, gt) for s in names]


def masks_apply(row: dict[str, Any]) -> bool:
    """Our masks apply to a system iff at least one of its messages contains a token they target."""
    return row["masked_lines"] > 0


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.3f}" if values else "-"


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown table of `score_all` rows, with a MEAN row and a mean over the systems our masks apply to."""
    lines = [
        "| system | " + " | ".join(CONFIGS) + " | gt groups | l4 clusters |",
        "| --- | " + " | ".join("---:" for _ in CONFIGS) + " | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {r['system']} | " + " | ".join(f"{r['ga'][c]:.3f}" for c in CONFIGS)
                     + f" | {r['gt_groups']} | {r['clusters']['l4']} |")
    applied = [r for r in rows if masks_apply(r)]
    lines.append(f"| MEAN ({len(rows)}) | " + " | ".join(_mean([r["ga"][c] for r in rows]) for c in CONFIGS)
                 + " |  |  |")
    lines.append(f"| MEAN, masks apply ({len(applied)}/{len(rows)}) | "
                 + " | ".join(_mean([r["ga"][c] for r in applied]) for c in CONFIGS) + " |  |  |")
    if rows:
        least = min(rows, key=lambda r: r["masked_lines"])
        lines.append("")
        lines.append(
            f"gt={rows[0]['gt']}. \"Masks apply\" = at least one message of the system contains a token "
            "that engine/data/masking.yaml targets (numbers, hex, IPs, paths, timestamps ...), i.e. "
            f"`mask(m) != m`; {len(applied)}/{len(rows)} systems qualify (lowest share of changed "
            f"messages: {least['system']} {least['masked_lines']:.0%}), so the two means "
            + ("coincide." if len(applied) == len(rows) else "differ.")
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="Grouping accuracy of L4's parser on Loghub-2k.")
    ap.add_argument("loghub_dir", type=Path)
    ap.add_argument("--gt", default="orig", choices=[*GTS, "both"])
    ap.add_argument("--systems", default=None, help="comma-separated (default: all present)")
    a = ap.parse_args(argv)
    systems = a.systems.split(",") if a.systems else None
    for gt in GTS if a.gt == "both" else (a.gt,):
        started = time.perf_counter()
        rows = score_all(a.loghub_dir, systems, gt)
        print(format_table(rows))
        print(f"\n({len(rows)} systems scored in {time.perf_counter() - started:.1f} s)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

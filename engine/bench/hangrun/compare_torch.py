"""Do PyTorch's own flight-recorder analyzer and L4 name the same ranks on the hang cases?

    python -m engine.bench.hangrun.compare_torch tests/fixtures/hang

Runs `torch.distributed.flight_recorder.fr_trace` (needs torch) on each case's dumps and prints, per
case, the ranks it reports missing beside the ranks L4's `hang` section names. The gloo default
group writes its `pg_config` under the key "" while its entries name the group "0", which makes
PyTorch's analyzer stop with a KeyError; the script hands it copies with that key renamed (the only
change), and says so in its output.
"""
from __future__ import annotations

import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from engine.diagnose import analyze
from engine.hangfiles import find_hang_files
from engine.parse import parse_jobs
from engine.safepickle import loads_plain

# "missing ranks: {5}" in a collective's report; "Missing dump files from ranks {2}" when it stops
_MISSING = re.compile(r"(?:missing ranks: |Missing dump files from ranks )\{([\d, ]*)\}")
_CULPRIT = re.compile(r"Culprit rank (\d+)")


def _normalised_copies(dumps: list[Path], into: Path) -> int:
    renamed = 0
    for path in dumps:
        data = loads_plain(path.read_bytes())
        cfg = data.get("pg_config") or {}
        if "" in cfg:
            names = {e["process_group"][0]: e["process_group"][1] for e in data.get("entries", [])}
            cfg["0"] = {**cfg.pop(""), "name": "0", "desc": names.get("0", "default_pg")}
            renamed += 1
        (into / path.name).write_bytes(pickle.dumps(data))
    return renamed


def torch_missing(dumps: list[Path]) -> tuple[set[int] | None, str]:
    """The ranks PyTorch's analyzer reports missing or as culprits (None when it reports none), and its
    last line."""
    with tempfile.TemporaryDirectory() as tmp:
        renamed = _normalised_copies(dumps, Path(tmp))
        out = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", tmp,
                              "--prefix", "nccl_trace_rank_"], capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    found = _MISSING.findall(text)
    ranks = {int(r) for r in found[0].split(",") if r.strip()} if found else None
    culprits = {int(r) for r in _CULPRIT.findall(text)}
    if culprits:
        ranks = (ranks or set()) | culprits
    last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
    return ranks, (f"(pg_config renamed in {renamed} dumps) " if renamed else "") + last[:120]


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    root = Path(args[0] if args else "tests/fixtures/hang")
    print("| case | L4 names | PyTorch fr_trace: missing ranks | agree |\n|---|---|---|---|")
    agree = total = 0
    for case in sorted(p for p in root.iterdir() if (p / "failed").is_dir()):
        dumps = find_hang_files(case / "failed").dumps
        if not dumps:
            continue
        ours = analyze(parse_jobs([case / "failed"])[0]).hang
        mine = set(ours.ranks) if ours else set()
        theirs, note = torch_missing(dumps)
        same = theirs is not None and theirs == mine
        total += 1
        agree += same
        shown = sorted(theirs) if theirs is not None else f"none ({note})"
        print(f"| {case.name} | {sorted(mine)} ({ours.kind if ours else '-'}) | {shown} | "
              f"{'yes' if same else 'no'} |")
    print(f"\n{agree} of {total} cases: the same ranks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

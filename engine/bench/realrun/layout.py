"""The failed (or history) job folder of one run, as a cluster's log collection would keep it.

``console``: one file per node, the launcher's console (its own lines and, through ``--tee``, every
local rank's output behind a ``[defaultN]:`` prefix). ``logdir``: torchrun's ``--log-dir`` tree, one
``stdout.log``/``stderr.log`` per local rank, beside the launcher's own lines. ``slurm``: a stand-in for a
SLURM job's console, ``srun -l``: one file per node, ``<node>/slurm-<jobid>.out``, every rank's stdout and
stderr merged behind srun's ``N: `` task label (N the global rank, as if srun had started each rank as a
task), the agent's own lines unlabelled (a batch script's own output). Every file is gzip.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from engine.bench.realrun.launch import RunResult
from engine.bench.realrun.plan import NPROC

TEE_PREFIX = re.compile(r"^\[default(\d+)\]:")
# torchrun's --tee prefix: [defaultN]: (local rank N) or, with TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
# "[rank${rank}]:", [rankN]: (global rank N); no launcher line of its own starts with either
LINE_PREFIX = re.compile(r"^\[(default|rank)(\d+)\]:")
SRUN_PREFIX = re.compile(r"^(\d+): ")  # srun -l's task label (the global rank)


def slurm_file(node: str, name: str) -> str:
    """The SLURM-like console of ``node`` in a job folder (the job id from a hash of the case name)."""
    job = 100000 + int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % 900000
    return f"{node}/slurm-{job}.out"


def is_slurm(rel: str) -> bool:
    return rel.rsplit("/", 1)[-1].startswith("slurm-") and rel.endswith(".out")


def srun_label(line: str) -> str:
    """A console line as srun -l writes it: torchrun's ``[rankN]:`` becomes ``N: ``; the agent's own lines
    stay as they are."""
    m = LINE_PREFIX.match(line)
    return line if m is None else f"{m[2]}: {line[m.end():]}"


def srun_local(line: str, node: str, locals_of: dict[tuple[str, int], int]) -> int | None:
    m = SRUN_PREFIX.match(line)
    return None if m is None else locals_of.get((node, int(m[1])))


def local_of(line: str, node: str, locals_of: dict[tuple[str, int], int]) -> int | None:
    """The local rank whose output ``line`` is on ``node``'s console (None: the launcher's own line);
    ``locals_of`` maps (node, global rank) to the local rank."""
    m = LINE_PREFIX.match(line)
    if m is None:
        return None
    if m[1] == "default":
        return int(m[2])
    return locals_of.get((node, int(m[2])))


@dataclass
class LogFile:
    rel: str  # path inside the job folder (without .gz)
    node: str
    lines: list[str]
    locals: list[int | None]  # per line: the local rank that wrote it, None for the launcher


def split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def log_files(res: RunResult) -> list[LogFile]:
    files: list[LogFile] = []
    locals_of = {(node, int(info["rank"])): loc for (node, loc), info in res.ranks.items()}
    for node, out in sorted(res.agent_out.items()):
        lines = split_lines(out)
        if res.plan.layout == "slurm":
            lines = [srun_label(ln) for ln in lines]
            locs = [srun_local(ln, node, locals_of) for ln in lines]
            files.append(LogFile(slurm_file(node, res.plan.name), node, lines, locs))
            continue
        if res.plan.layout == "console":
            locs = [local_of(ln, node, locals_of) for ln in lines]
            files.append(LogFile(f"{node}/torchrun.log", node, lines, locs))
            continue
        own = [ln for ln in lines if not LINE_PREFIX.match(ln)]
        files.append(LogFile(f"{node}/launcher.log", node, own, [None] * len(own)))
        for local in range(NPROC):
            for stream in ("stdout", "stderr"):
                for path in sorted(res.logdirs[node].glob(f"*/attempt_*/{local}/{stream}.log")):
                    text = path.read_bytes().decode("utf-8", "replace")
                    body = split_lines(text)
                    if body:
                        rel = f"{node}/{path.relative_to(res.logdirs[node]).as_posix()}"
                        files.append(LogFile(rel, node, body, [local] * len(body)))
    return files


def read_job(folder: Path, ranks: dict[tuple[str, int], int] | None = None) -> list[LogFile]:
    """The log files of a job folder `write_job` wrote, with the rank of every line (to label it again);
    ``ranks`` ((node, local rank) -> global rank) reads a console with [rankN]: prefixes."""
    locals_of = {(node, r): loc for (node, loc), r in (ranks or {}).items()}
    files = []
    own = ("/torchrun.log.gz", "/launcher.log.gz")
    def order(p: Path) -> tuple:  # per node, the launcher's (or the node's only) file first
        whole = p.as_posix().endswith(own) or is_slurm(p.as_posix()[:-3])
        return p.relative_to(folder).parts[0], not whole, p.as_posix()

    for path in sorted(folder.rglob("*.gz"), key=order):
        rel = path.relative_to(folder).as_posix()[: -len(".gz")]
        node = rel.split("/", 1)[0]
        lines = split_lines(gzip.decompress(path.read_bytes()).decode("utf-8", "replace"))
        if rel.endswith("/torchrun.log"):
            locs = [local_of(ln, node, locals_of) for ln in lines]
        elif is_slurm(rel):
            locs = [srun_local(ln, node, locals_of) for ln in lines]
        elif rel.endswith("/launcher.log"):
            locs = [None] * len(lines)
        else:
            locs = [int(rel.split("/")[-2])] * len(lines)  # <node>/<run>/attempt_N/<local>/stderr.log
        files.append(LogFile(rel, node, lines, locs))
    return files


def write_job(folder: Path, files: list[LogFile], job_json: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.json").write_text(json.dumps(job_json, indent=2) + "\n")
    for f in files:
        path = folder / (f.rel + ".gz")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(ln + "\n" for ln in f.lines).encode()
        path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))

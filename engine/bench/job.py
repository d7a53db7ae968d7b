"""In-memory model of one job's per-rank log files, and writing it to a job folder.

The bulk of a large speed-benchmark job (the same iteration lines with new numbers, over and over)
is kept as one template per rank and rendered while the files are written, so that generating a
10 GB job does not need 10 GB of memory.
"""

from __future__ import annotations

import gzip
import io
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

from engine.bench.styles import TS_FUNCS, make_ctx, parse, render, render_kernel_log, subst


class Truth:
    """Collects raw lines by role while a fault is injected."""

    def __init__(self) -> None:
        self.indicating: dict[str, list[str]] = {}
        self.cascade: list[str] = []
        self.context: list[str] = []

    def add(self, role: str, key: str | None, line: str) -> None:
        if not line.strip():
            return
        if role == "ind":
            lst = self.indicating.setdefault(key or "error", [])
        elif role == "cascade":
            lst = self.cascade
        else:
            lst = self.context
        if line not in lst:
            lst.append(line)

    def export(self) -> dict:
        ind = {ln for v in self.indicating.values() for ln in v}
        cascade = [ln for ln in self.cascade if ln not in ind]
        context = [ln for ln in self.context if ln not in ind and ln not in set(cascade)]
        return {"indicating": [{"key": k, "lines": v} for k, v in self.indicating.items()],
                "cascade_lines": cascade, "context_lines": context}


BULK = object()  # stands in a rank's line list for its bulk part (see Job.add_bulk)
WRITE_BUFFER = 1 << 18  # per rank file while streaming: hundreds of them are open at once


class Job:
    """Per-rank line buffers for one job; ranks are numbered globally across nodes."""

    def __init__(self, style: str, rng: random.Random, nodes: list[str], rpn: int, V: dict,
                 t0: int, *, mode: str, kernel_mode: str, gz_fraction: float = 0.1) -> None:
        self.style, self.rng, self.nodes, self.rpn, self.V = style, rng, nodes, rpn, V
        self.world = len(nodes) * rpn
        self.t0 = t0
        self.kernel_mode = kernel_mode  # "file" -> <node>/kernel.log, "dmesg" -> tailed into rank log
        self.lines: list[list[str]] = [[] for _ in range(self.world)]
        self.last = [t0] * self.world
        self.kernel: dict[str, list[str]] = {n: [] for n in nodes}
        self.dead: set[int] = set()
        self.truncated: set[int] = set()
        self.gz = {r for r in range(self.world) if rng.random() < gz_fraction}
        self.bulk: tuple[list[str], Callable[[], Iterator[dict]]] | None = None
        self.ctx = []
        base_pid = rng.randrange(20000, 3_000_000 - 64)
        for r in range(self.world):
            node, local = self.node_of(r), r % rpn
            nv = V["node_vars"][node]
            pid = base_pid + node * 7 + local * 3 + rng.randrange(0, 2)
            rv = {"rank": r, "local": local, "host": nodes[node], "pid": pid, "node_ip": nv["ip"],
                  "node_idx": node, "busid": V["busids"][local], "pci": V["pcis"][local],
                  "comm": f"{rng.getrandbits(36):09x}", "tp_rank": local % V["tp"],
                  "pp_rank": (r // V["tp"]) % V["pp"], "dev_ip": f"{nv['dev_net']}.{local + 1}"}
            rv["tid"] = pid + rng.randrange(50, 900)
            self.ctx.append(make_ctx(style, mode, nodes[node], r, local, pid, rv["tid"], rv))

    def node_of(self, r: int) -> int:
        return r // self.rpn

    def ranks_of(self, node: int) -> list[int]:
        return list(range(node * self.rpn, (node + 1) * self.rpn))

    def who(self, who: str) -> list[int]:
        if who == "all":
            return list(range(self.world))
        if who == "rank0":
            return [0]
        if who == "printer":
            return [self.world - 1 if self.V["printer_last"] else 0]
        if who == "local0":
            return [n * self.rpn for n in range(len(self.nodes))]
        if who == "one":
            return [self.rng.randrange(self.world)]
        raise ValueError(who)

    def text(self, r: int, spec: str, t: int, extra: dict | None = None) -> str:
        """Render one template line for rank ``r`` at time ``t`` without storing it."""
        ch, args, text = parse(spec)
        ctx = self.ctx[r]
        if "${" in text:
            def lookup(k: str):
                if extra and k in extra:
                    return extra[k]
                if k in ctx.vars:
                    return ctx.vars[k]
                if k in TS_FUNCS:
                    return TS_FUNCS[k](t)
                return self.V[k]
            text = subst(text, lookup)
        return render(self.style, ch, args, text, t, ctx)

    def tick(self, r: int, t: int) -> int:
        t = max(t + self.rng.randrange(0, 30000), self.last[r] + self.rng.randrange(40, 900))
        self.last[r] = t
        return t

    def emit(self, r: int, spec: str, t: int, extra: dict | None = None, force: bool = False) -> str | None:
        if r in self.dead and not force:
            return None
        line = self.text(r, spec, self.tick(r, t), extra)
        self.lines[r].append(line)
        return line

    def kern(self, r: int, text: str, t: int, extra: dict | None = None) -> str:
        """A kernel message of rank ``r``'s node: kernel.log line or a tailed dmesg line."""
        node = self.node_of(r)
        if self.kernel_mode == "file":
            body = self.text(r, "bare|" + text, t, extra)
            line = render_kernel_log(body, t, self.nodes[node])
            self.kernel[self.nodes[node]].append(line)
            return line
        return self.emit(r, "kern|" + text, t, extra, force=True) or ""

    def add_bulk(self, templates: list[str], rows: Callable[[], Iterator[dict]]) -> None:
        """The bulk part: for every dict `rows()` yields, rank r gets the line(s) `templates[r] % row`."""
        self.bulk = (templates, rows)
        for r in range(self.world):
            self.lines[r].append(BULK)  # type: ignore[arg-type]

    def write(self, job_dir: Path, job_json: dict) -> None:
        job_dir.mkdir(parents=True, exist_ok=True)
        (job_dir / "job.json").write_text(json.dumps(job_json, indent=2) + "\n")
        for name in self.nodes:
            nd = job_dir / name
            nd.mkdir(exist_ok=True)
            if self.kernel_mode == "file":
                (nd / "kernel.log").write_text("".join(ln + "\n" for ln in self.kernel[name]))
        if self.bulk is not None:
            self._stream(job_dir)
            return
        for r in range(self.world):
            data = "\n".join(self.lines[r])
            if self.lines[r] and r not in self.truncated:
                data += "\n"
            raw = data.encode()
            if r in self.gz:
                (job_dir / self._rank_name(r)).write_bytes(gzip.compress(raw, compresslevel=6, mtime=0))
            else:
                with open(job_dir / self._rank_name(r), "wb", buffering=1 << 22) as f:
                    f.write(raw)

    def _rank_name(self, r: int) -> str:
        return f"{self.nodes[self.node_of(r)]}/rank-{r:04d}.log" + (".gz" if r in self.gz else "")

    def _stream(self, job_dir: Path) -> None:
        """Write every rank file at once, rendering the bulk part row by row (same bytes as `write`)."""
        assert self.bulk is not None
        templates, rows = self.bulk
        files: list[io.TextIOWrapper] = []
        raws: list[io.BufferedWriter] = []
        try:
            for r in range(self.world):
                raw = open(job_dir / self._rank_name(r), "wb", buffering=WRITE_BUFFER)
                raws.append(raw)
                out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) \
                    if r in self.gz else raw
                files.append(io.TextIOWrapper(out, encoding="utf-8", newline="", write_through=False))
            splits = [self.lines[r].index(BULK) for r in range(self.world)]
            for r, f in enumerate(files):
                f.write("\n".join(self.lines[r][:splits[r]]))
            seps = ["\n" if splits[r] else "" for r in range(self.world)]
            lead = [sep + tm for sep, tm in zip(seps, templates, strict=True)]
            nl = ["\n" + tm for tm in templates]
            for k, row in enumerate(rows()):
                for f, tm in zip(files, lead if k == 0 else nl, strict=True):
                    f.write(tm % row)
            for r, f in enumerate(files):
                post = self.lines[r][splits[r] + 1:]
                if post:
                    f.write("\n" + "\n".join(post))
                if r not in self.truncated:
                    f.write("\n")
        finally:
            for f in files:
                f.close()
            for raw in raws:
                raw.close()

"""How each collection shape lays a job's streams out as files (paths relative to the job folder).

- ray: a folder per node `ip-10-…/` with one `worker-<id>-01000000-<pid>.out` per Train worker, the
  node's `raylet.out` and `kern.log`; the head node also has the job's `driver.log` (every worker line
  forwarded as `(RayTrainWorker pid=…, ip=…) …`, identical lines folded into `[repeated Nx across
  cluster]`) and `gcs_server.out`.
- mpi: Horovod under Open MPI: a folder per host with `rank.<N>.log` (`mpirun --output-filename`) and
  `syslog`; the launcher host also has `mpirun.out`, the `--timestamp-output --tag-output` console
  (`Fri May  1 10:22:31 2026[1,3]<stderr>:…`).
- sagemaker: a folder per host `algo-N/` holding that host's CloudWatch stream export (rank lines as
  `[1,mpirank:3,algo-2]<stdout>:…`, the training toolkit's lines on algo-1) and `system.log`.
- azureml: flat: `std_log_process_<rank>.txt` per process, `std_log.txt` (the launcher), `kern_<node>.log`
  and torchelastic's `error_<rank>.json` for a rank that died of an exception; job.json maps the nodes.
- msrun: MindSpore: a folder per host with `worker_<rank>.log`, the host's Ascend `plog-<pid>_<stamp>.log`
  and `kern.log`; the first host also has msrun's `scheduler.log`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass

from engine.bench.othergen3 import clock
from engine.bench.othergen3.job import Line, Spec, Streams


@dataclass
class Entry:
    text: str
    line: Line | None  # the logical line it renders (None: a line of the layout itself)


Files = dict[str, list[Entry]]


def render(spec: Spec, st: Streams) -> tuple[Files, dict | None]:
    """The files of one job and, for a flat layout, job.json's `nodes` map."""
    return {"ray": _ray, "mpi": _mpi, "sagemaker": _sagemaker, "azureml": _azureml, "msrun": _msrun}[
        spec.shape
    ](spec, st)


def _plain(lines: list[Line]) -> list[Entry]:
    return [Entry(ln.text, ln) for ln in lines]


def _ray(spec: Spec, st: Streams) -> tuple[Files, None]:
    files: Files = {}
    forwarded: list[tuple[float, str, Line]] = []
    for r in st.ranks:
        host = spec.hosts[r.node]
        wid = hashlib.sha1(f"{spec.seed}:{r.rank}".encode()).hexdigest()[:28]
        files[f"{host}/worker-{wid}-01000000-{r.pid}.out"] = _plain(st.rank_lines[r.rank])
        prefix = f"(RayTrainWorker pid={r.pid}, ip={spec.ips[r.node]}) "
        forwarded += [(ln.t, prefix, ln) for ln in st.rank_lines[r.rank]]
    for node, host in enumerate(spec.hosts):
        agent = st.agent[node]
        files[f"{host}/raylet.out"] = _plain([ln for ln in agent if "(gcs_server)" not in ln.text])
        if node == 0:
            files[f"{host}/gcs_server.out"] = _plain([ln for ln in agent if "(gcs_server)" in ln.text])
        files[f"{host}/kern.log"] = _plain(st.kernel[node])
    files[f"{spec.hosts[0]}/driver.log"] = _driver(st.launcher, forwarded)
    return files, None


def _driver(launcher: list[Line], forwarded: list[tuple[float, str, Line]]) -> list[Entry]:
    """Ray's driver: its own lines and the workers' lines, the same text within a second folded."""
    merged = sorted([(ln.t, "", ln) for ln in launcher] + forwarded, key=lambda x: x[0])
    seen: Counter = Counter()
    out: list[tuple[float, Entry]] = []
    pending: dict[tuple[int, str], tuple[float, str, Line]] = {}
    for t, prefix, ln in merged:
        bucket = (int(t), ln.text)
        seen[bucket] += 1
        if seen[bucket] == 1 or not prefix or ln.label in ("root", "context"):
            out.append((t, Entry(prefix + ln.text, ln)))
        else:
            pending[bucket] = (t, prefix, ln)
    for bucket, (t, prefix, ln) in pending.items():
        text = f"{prefix}{ln.text} [repeated {seen[bucket] - 1}x across cluster]"
        out.append((t + 0.5, Entry(text, ln if ln.label else None)))
    out.sort(key=lambda x: x[0])
    return [e for _, e in out]


def _mpi(spec: Spec, st: Streams) -> tuple[Files, None]:
    files: Files = {}
    console: list[tuple[float, Entry]] = [(ln.t, Entry(ln.text, ln)) for ln in st.launcher]
    skew0 = spec.skew.get(0, 0.0)
    for r in st.ranks:
        host = spec.hosts[r.node]
        lines = st.rank_lines[r.rank]
        if lines:
            files[f"{host}/rank.{r.rank}.log"] = _plain(lines)
        for ln in lines:
            stamp = clock.ctime(spec.start + ln.t + skew0)
            tag = "stderr" if ln.err else "stdout"
            for part in ln.text.split("\r"):
                if part:  # the console shows each tqdm/progbar refresh on its own tagged line
                    console.append(
                        (ln.t, Entry(f"{stamp}[1,{r.rank}]<{tag}>:{part}", ln if part == ln.text else None))
                    )
    for node, host in enumerate(spec.hosts):
        files[f"{host}/syslog"] = _plain(st.kernel[node])
    console.sort(key=lambda x: x[0])
    files[f"{spec.hosts[0]}/mpirun.out"] = [e for _, e in console]
    return files, None


def _sagemaker(spec: Spec, st: Streams) -> tuple[Files, None]:
    files: Files = {}
    stream: dict[int, list[tuple[float, Entry]]] = {n: [] for n in range(len(spec.hosts))}
    stream[0] += [(ln.t, Entry(ln.text, ln)) for ln in st.launcher]
    for r in st.ranks:
        host = spec.hosts[r.node]
        for ln in st.rank_lines[r.rank]:
            tag = "stderr" if ln.err else "stdout"
            stream[r.node].append((ln.t, Entry(f"[1,mpirank:{r.rank},{host}]<{tag}>:{ln.text}", ln)))
    for node, host in enumerate(spec.hosts):
        stream[node].sort(key=lambda x: x[0])
        files[f"{host}/{host}-{int(spec.start)}.log"] = [e for _, e in stream[node]]
        files[f"{host}/system.log"] = _plain(st.kernel[node])
    return files, None


def _azureml(spec: Spec, st: Streams) -> tuple[Files, dict]:
    files: Files = {}
    nodes: dict[str, list[str]] = {h: [] for h in spec.hosts}

    def put(name: str, node: int, entries: list[Entry]) -> None:
        files[name] = entries
        nodes[spec.hosts[node]].append(name)

    for r in st.ranks:
        lines = st.rank_lines[r.rank]
        put(f"std_log_process_{r.rank}.txt", r.node, _plain(lines))
        error = _error_json(lines)
        if error:
            put(f"error_{r.rank}.json", r.node, [error])
    put("std_log.txt", 0, _plain(st.launcher))
    for node, host in enumerate(spec.hosts):
        put(f"kern_{host}.log", node, _plain(st.kernel[node]))
    return files, nodes


def _error_json(lines: list[Line]) -> Entry | None:
    """torchelastic's error file (TORCHELASTIC_ERROR_FILE) of a rank whose script raised: one JSON line
    carrying the exception and the Python call stack."""
    labelled = [ln for ln in lines if ln.label in ("root", "indicating", "context")]
    exc = [
        ln
        for ln in labelled
        if ln.label != "context"
        and (
            ln.text.split(":")[0].endswith(("Error", "Exception")) or ".exceptions." in ln.text.split(":")[0]
        )
    ]
    if not exc:
        return None
    stack = "\n".join(ln.text for ln in labelled)
    body = {
        "message": {
            "message": exc[0].text,
            "extraInfo": {"py_callstack": stack, "timestamp": str(int(exc[0].t) + 1700000000)},
        }
    }
    return Entry(json.dumps(body), Line(exc[0].t, json.dumps(body), "indicating", exc[0].key))


def _msrun(spec: Spec, st: Streams) -> tuple[Files, None]:
    files: Files = {}
    for r in st.ranks:
        files[f"{spec.hosts[r.node]}/worker_{r.rank}.log"] = _plain(st.rank_lines[r.rank])
    for node, host in enumerate(spec.hosts):
        lead = st.ranks[node * spec.per_node]
        stamp = clock.cann(spec.start + 9).replace("-", "").replace(":", "").replace(".", "")[:17]
        files[f"{host}/plog-{lead.pid}_{stamp}.log"] = _plain(st.agent[node])
        files[f"{host}/kern.log"] = _plain(st.kernel[node])
    files[f"{spec.hosts[0]}/scheduler.log"] = _plain(st.launcher)
    return files, None

"""How a job's messages become files: per shape the folders, file names, line prefixes and clocks.

Shapes (framework family in brackets):
- paddle [paddle]: `python -m paddle.distributed.launch`: `<host>/log/workerlog.<N>`, the launcher's
  `<host>/launch.out` (`LAUNCH INFO 2026-12-02 05:38:14,123 ...`), `dmesg.log` with seconds since boot
  and `syslog`;
- jax [jax]: multi-host JAX, one process per host: `<host>/jax_worker.log` with absl/glog headers and
  the host's `journal.json` (`journalctl -o json`);
- kubeflow [torch]: a Kubeflow PyTorchJob's pods `<job>-master-0`, `<job>-worker-N`, the kubelet's CRI
  files `<pod>/0.log` (`<RFC3339Nano> stderr F ...`, long lines split into `P` parts, older part rotated
  to `0.log.<stamp>.gz`), torchtitan-style lines, and `node-journal.log` (`journalctl -o short-iso`);
- volcano [torch]: a Volcano job's pods `<job>-worker-N`, CRI files, torchtune-style `INFO:name:msg`
  lines, `torchrun --tee 3` `[defaultN]:` prefixes;
- pdsh [torch]: DeepSpeed's multi-node runner over pdsh: `<host>/ds_stdout.log` with `<host>: ` prefixes,
  the runner's `launcher.log` on the first host, `dmesg -T` kernel lines and an rsyslog ISO `syslog`;
- lsf [torch]: an LSF job: loguru lines per rank `<host>/rank<NNN>.log`, structlog event lines with the
  node's UTC offset, the job's `lsf.o<jobid>` report on the first host and a traditional `messages` file.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from engine.bench.othergen4.timeline import Job, Msg

SHAPES = ("paddle", "jax", "kubeflow", "volcano", "pdsh", "lsf")
FRAMEWORK = {
    "paddle": "paddle",
    "jax": "jax",
    "kubeflow": "torch",
    "volcano": "torch",
    "pdsh": "torch",
    "lsf": "torch",
}
KILLED = ("host_oom_killer", "spot_preemption")  # kinds whose faulty process dies mid-write
LINE = tuple[float, str, str | None]  # (true time, rendered line, truth role)


@dataclass
class Clock:
    epoch: datetime  # the job's start, UTC
    tz_minutes: list[int]  # each node's UTC offset
    skew: list[float]  # each node's clock error, seconds
    boot: list[float]  # each node's uptime at the job's start, seconds

    def utc(self, node: int, t: float) -> datetime:
        return self.epoch + timedelta(seconds=t + self.skew[node])

    def local(self, node: int, t: float) -> datetime:
        return self.utc(node, t).astimezone(timezone(timedelta(minutes=self.tz_minutes[node])))

    def uptime(self, node: int, t: float) -> float:
        return self.boot[node] + t


def _fill(m: Msg, clock: Clock, node: int) -> list[str]:
    local = clock.local(node, m.t)
    stamp = {
        "gmd": local.strftime("%m%d"),
        "gtime": local.strftime("%H:%M:%S.%f"),
        "iso": local.isoformat(timespec="microseconds"),
        "unix": int(clock.utc(node, m.t).timestamp()),
    }
    return m.template.format_map({**m.ctx, **stamp}).split("\n")


_PY_FILES = {
    "INFO": "train.py:212",
    "WARNING": "train.py:188",
    "ERROR": "train.py:341",
    "FATAL": "train.py:341",
}


def _ms(d: datetime) -> str:
    return d.strftime("%Y-%m-%d %H:%M:%S,") + f"{d.microsecond // 1000:03d}"


class Writer:
    """Collects a job's rendered lines per file, then writes them (gzip, CRLF, rotation as chosen)."""

    def __init__(self, job: Job, clock: Clock, rng: random.Random, shape: str) -> None:
        self.job, self.clock, self.rng, self.shape = job, clock, rng, shape
        self.files: dict[str, list[LINE]] = {}
        self.cut: set[str] = set()  # files of a killed process: the last line ends mid-way, no line end
        self.roles: dict[str, list[str]] = {}

    def add(self, path: str, t: float, line: str, role: str | None) -> None:
        self.files.setdefault(path, []).append((t, line, role))

    def write(self, root: Path, gz: bool, crlf: bool, rotate: bool, odd: bool) -> None:
        for path, lines in sorted(self.files.items()):
            lines.sort(key=lambda x: x[0])
            parts = [(path, lines)]
            if rotate and path.endswith("/0.log") and len(lines) > 40:
                # the kubelet rotated the older part before the fault (no labelled line in it)
                cut = len(lines) // 2
                while cut > 0 and any(r for _, _, r in lines[:cut]):
                    cut //= 2
                if cut:
                    stamp = self.clock.utc(0, lines[cut - 1][0]).strftime("%Y%m%d-%H%M%S")
                    parts = [(f"{path}.{stamp}.gz", lines[:cut]), (path, lines[cut:])]
            for name, chunk in parts:
                for _, line, role in chunk:
                    if role:
                        self.roles.setdefault(role, []).append(line)
                if odd and _is_rank_file(name):
                    # a latin-1 byte in a path of an ordinary line (the dataset folder's name)
                    for k, (t, line, role) in enumerate(chunk):
                        if role is None and "/mnt/datasets/" in line:
                            chunk[k] = (
                                t,
                                line.replace("/mnt/datasets/", "/mnt/datasets/caf\udce9-", 1),
                                role,
                            )
                            break
                eol = "\r\n" if crlf and not name.endswith(".json") else "\n"
                text = eol.join(line for _, line, _ in chunk) + eol
                if name in self.cut and chunk and chunk[-1][2] is None:
                    last = chunk[-1][1]
                    text = "".join(line + eol for _, line, _ in chunk[:-1]) + last[: len(last) // 2]
                data = text.encode("utf-8", "surrogateescape")
                target = root / name
                if gz and not name.endswith(".gz") and _is_rank_file(name):
                    target = root / (name + ".gz")
                if target.name.endswith(".gz"):
                    data = gzip.compress(data, mtime=0)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)


def _is_rank_file(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.startswith(("workerlog", "jax_worker", "ds_stdout", "rank"))


# ---- per shape: rank lines, agent lines, node lines -------------------------------------------------


def _rank_raw(shape: str, text: str, rank: int, lrank: int) -> str:
    if shape in ("pdsh", "lsf"):
        return text.replace(f"[rank{rank}]: ", "").replace(f"[rank{rank}]:", "")
    if shape == "volcano":
        return text.replace(f"[rank{rank}]: ", f"[default{lrank}]:").replace(
            f"[rank{rank}]:", f"[default{lrank}]:"
        )
    return text


def _logger(shape: str, d: datetime, level: str, body: str, rank: int) -> str:
    if shape == "paddle":
        return f"[{_ms(d)}] [{level:>8}] - {body}"
    if shape == "jax":
        tid = 140230000000 + rank * 4099
        return f"{level[0]}{d.strftime('%m%d %H:%M:%S.%f')} {tid} {_PY_FILES[level]}] {body}"
    if shape == "kubeflow":
        return f"[titan] {_ms(d)} - root - {level} - {body}"
    if shape == "volcano":
        return f"{level}:torchtune.utils._logging:{body}"
    if shape == "pdsh":
        return f"[{_ms(d)}] [{level}] [engine.py:{2100 + len(body) % 90}:step] {body}"
    where = (
        _LOGURU_AT[len(body) % len(_LOGURU_AT)] if not body.startswith("step:") else "trainer:train_step:212"
    )
    return f"{d.strftime('%Y-%m-%d %H:%M:%S.')}{d.microsecond // 1000:03d} | {level:<8} | {where} - {body}"


_LOGURU_AT = ("trainer:main:88", "trainer:setup:131", "data:build:57", "trainer:fit:240", "ckpt:save:73")


def _glog(d: datetime, level: str, pid: int, src: str, body: str) -> str:
    return f"{level[0]}{d.strftime('%m%d %H:%M:%S.%f')} {pid} {src}] {body}"


def _cri(d_utc: datetime, stream: str, content: str, limit: int = 16384) -> list[str]:
    ns = (d_utc.microsecond * 7919 + len(content)) % 1000  # the kubelet stamps nanoseconds
    ts = d_utc.strftime("%Y-%m-%dT%H:%M:%S.%f") + f"{ns:03d}Z"
    if len(content) <= limit:
        return [f"{ts} {stream} F {content}"]
    parts = [content[i : i + limit] for i in range(0, len(content), limit)]
    return [f"{ts} {stream} {'F' if i == len(parts) - 1 else 'P'} {p}" for i, p in enumerate(parts)]


_SYSLOG_IDENT = re.compile(r"^[\w.@-]+\[\d+\]: ")


def render(job: Job, clock: Clock, rng: random.Random, shape: str) -> Writer:
    w = Writer(job, clock, rng, shape)
    v = job.values
    for r in job.ranks:
        node, host = r.node, job.nodes[r.node]
        path = {
            "paddle": f"{host}/log/workerlog.{r.lrank}",
            "jax": f"{host}/jax_worker.log",
            "kubeflow": f"{host}/0.log",
            "volcano": f"{host}/0.log",
            "pdsh": f"{host}/ds_stdout.log",
            "lsf": f"{host}/rank{r.rank:03d}.log",
        }[shape]
        msgs = job.rank_msgs[r.rank]
        if (
            job.kind
            and job.kind.name in KILLED
            and r.rank in job.fault_ranks
            and shape in ("paddle", "lsf", "jax")
        ):
            w.cut.add(path)
        if shape in ("kubeflow", "volcano") and r.lrank == 0 and msgs:
            cfg = json.dumps(
                {
                    "job": {"name": job.name, "dump_folder": "/outputs"},
                    "model": {
                        "name": v["model"],
                        "flavor": "8B",
                        "layers": [
                            {"idx": i, "attn": "sdpa", "ffn_dim": 14336, "rope_theta": 500000.0}
                            for i in range(32 * 9)
                        ],
                    },
                },
                sort_keys=True,
            )
            body = _logger(shape, clock.utc(node, msgs[0].t), "INFO", f"Job config: {cfg}", r.rank)
            for ln in _cri(clock.utc(node, msgs[0].t), "stderr", body):
                w.add(path, msgs[0].t, ln, None)
        for m in msgs:
            items = [(x, m.role) for x in _fill(m, clock, node)]
            if shape == "paddle" and m.role == "root" and "(at /paddle/" in items[0][0]:
                # Paddle's C++ error block (context, not the root's own line)
                items = [
                    (x, "precursor")
                    for x in ("----------------------", "Error Message Summary:", "----------------------")
                ] + items
            d = clock.utc(node, m.t) if shape in ("kubeflow", "volcano") else clock.local(node, m.t)
            for k, (text, role) in enumerate(items):
                if m.level and k == 0:
                    line = _logger(shape, d, m.level, text, r.rank)
                else:
                    line = _rank_raw(shape, text, r.rank, r.lrank)
                if shape in ("kubeflow", "volcano"):
                    stream = "stdout" if m.level == "INFO" and shape == "volcano" else "stderr"
                    for ln in _cri(clock.utc(node, m.t), stream, line):
                        w.add(path, m.t, ln, role)
                elif shape == "pdsh":
                    w.add(path, m.t, f"{host}: {line}", role)
                else:
                    w.add(path, m.t, line, role)
            if (
                shape == "lsf"
                and m.level == "INFO"
                and m.role is None
                and "step" in m.ctx
                and m.template.startswith("step:")
                and r.lrank == 0
            ):
                ld = clock.local(node, m.t)
                w.add(
                    f"{host}/events.log",
                    m.t,
                    f"{ld.isoformat(timespec='microseconds')} [info     ] train_step                     "
                    f"loss={m.ctx['loss']:.4f} rank={r.rank} step={m.ctx['step']} tps={m.ctx['tps']}",
                    None,
                )
    for i, host in enumerate(job.nodes):
        for m in job.agent_msgs.get(i, []):
            _agent_line(w, shape, job, clock, i, host, m)
        for m in job.node_msgs.get(i, []):
            _node_line(w, shape, job, clock, i, host, m)
    _job_lines(w, shape, job, clock)
    return w


def _agent_line(w: Writer, shape: str, job: Job, clock: Clock, i: int, host: str, m: Msg) -> None:
    if shape == "jax":
        return
    texts = _fill(m, clock, i)
    pid = job.values["agent_pids"][i]
    for k, text in enumerate(texts):
        lvl = m.level if k == 0 and m.level else None
        if shape == "paddle":
            d = clock.local(i, m.t)
            line = f"LAUNCH {lvl} {_ms(d)} {text}" if lvl else text
            w.add(f"{host}/launch.out", m.t, line, m.role)
        elif shape in ("kubeflow", "volcano"):
            d = clock.utc(i, m.t)
            src = (
                "torch/distributed/elastic/multiprocessing/api.py:869"
                if lvl in ("ERROR", "WARNING")
                else "torch/distributed/elastic/agent/server/api.py:525"
            )
            line = _glog(d, lvl, pid, src, text) if lvl else text
            for ln in _cri(d, "stderr", line):
                w.add(f"{host}/0.log", m.t, ln, m.role)
        elif shape == "pdsh":
            d = clock.local(i, m.t)
            if lvl:
                if m.role == "agent":
                    text = (
                        f"['/usr/bin/python3', '-u', 'train.py', '--local_rank={job.values['flrank']}', "
                        f"'--deepspeed_config=ds_config.json'] exits with return code = {m.ctx['code']}"
                    )
                    line = f"[{_ms(d)}] [ERROR] [launch.py:325:sigkill_handler] {text}"
                elif "SIGTERM" in text and "closing" in text:
                    line = (
                        f"[{_ms(d)}] [INFO] [launch.py:319:sigkill_handler] Killing subprocess {m.ctx['pid']}"
                    )
                else:
                    line = f"[{_ms(d)}] [{lvl}] [launch.py:{146 + k}:main] {text}"
            else:
                if m.role == "agent":
                    continue  # torchrun's failure table has no DeepSpeed counterpart
                line = text
            w.add(f"{host}/ds_stdout.log", m.t, f"{host}: {line}", m.role)
        else:  # lsf: torchrun under blaunch, its own file per host
            d = clock.local(i, m.t)
            src = (
                "torch/distributed/elastic/multiprocessing/api.py:869"
                if lvl in ("ERROR", "WARNING")
                else "torch/distributed/elastic/agent/server/api.py:525"
            )
            line = _glog(d, lvl, pid, src, text) if lvl else text
            w.add(f"{host}/torchrun.log", m.t, line, m.role)


def _node_line(w: Writer, shape: str, job: Job, clock: Clock, i: int, host: str, m: Msg) -> None:
    text = _fill(m, clock, i)[0]
    ident = _SYSLOG_IDENT.match(text)
    phys = job.values["phys"][i]
    if shape == "paddle":
        if ident:
            w.add(
                f"{host}/syslog",
                m.t,
                f"{clock.local(i, m.t).strftime('%b %e %H:%M:%S')} {host} {text}",
                m.role,
            )
        else:
            up = max(clock.uptime(i, m.t), 0.0)
            w.add(f"{host}/dmesg.log", m.t, f"[{int(up):5d}.{int(up * 1e6) % 1000000:06d}] {text}", m.role)
    elif shape == "jax":
        name, _, rest = text.partition(": ") if ident else ("kernel", "", text)
        ident_name = name.split("[")[0]
        pid = name.split("[")[1].rstrip("]") if ident else None
        rec = {
            "MESSAGE": rest if ident else text,
            "PRIORITY": "3" if m.role else "6",
            "SYSLOG_IDENTIFIER": ident_name,
            "_HOSTNAME": host,
            "_TRANSPORT": "syslog" if ident else "kernel",
            "__REALTIME_TIMESTAMP": str(int(clock.utc(i, m.t).timestamp() * 1e6)),
        }
        if pid:
            rec["_PID"] = pid
        w.add(f"{host}/journal.json", m.t, json.dumps(rec, sort_keys=True), m.role)
    elif shape in ("kubeflow", "volcano"):
        d = clock.local(i, m.t)
        src = text if ident else f"kernel: {text}"
        w.add(f"{host}/node-journal.log", m.t, f"{d.strftime('%Y-%m-%dT%H:%M:%S%z')} {phys} {src}", m.role)
    elif shape == "pdsh":
        d = clock.local(i, m.t)
        if ident:
            w.add(f"{host}/syslog", m.t, f"{d.isoformat(timespec='microseconds')} {host} {text}", m.role)
        else:
            w.add(f"{host}/kern.log", m.t, f"[{d.strftime('%a %b %e %H:%M:%S %Y')}] {text}", m.role)
    else:
        d = clock.local(i, m.t)
        if ident:
            line = f"{d.strftime('%b %e %H:%M:%S')} {host} {text}"
        else:
            up = max(clock.uptime(i, m.t), 0.0)
            stamp = f"[{int(up):5d}.{int(up * 1e6) % 1000000:06d}]"
            line = f"{d.strftime('%b %e %H:%M:%S')} {host} kernel: {stamp} {text}"
        w.add(f"{host}/messages", m.t, line, m.role)


def _job_lines(w: Writer, shape: str, job: Job, clock: Clock) -> None:
    """Lines the job's own launcher writes once: DeepSpeed's runner, the LSF job report."""
    v = job.values
    t_end = max((m.t for msgs in job.rank_msgs.values() for m in msgs), default=0.0) + 3.0
    failed = job.kind is not None
    host0 = job.nodes[0]
    if shape == "pdsh":
        d = clock.local(0, 0.2)
        hosts = ",".join(job.nodes)
        w.add(
            f"{host0}/launcher.log",
            0.2,
            f"[{_ms(d)}] [INFO] [runner.py:568:main] cmd = pdsh -S -f 1024 -w "
            f"{hosts} export PYTHONPATH=/workspace; cd /workspace; /usr/bin/python3 -u -m "
            f"deepspeed.launcher.launch --world_info={v['world_info']} --node_rank=%n "
            f"--master_addr={v['master']} --master_port={v['port']} "
            f"train.py --deepspeed_config=ds_config.json",
            None,
        )
        w.add(
            f"{host0}/launcher.log",
            0.3,
            f"[{_ms(d)}] [INFO] [multinode_runner.py:81:get_cmd] Running on the following workers: {hosts}",
            None,
        )
        if failed:
            bad = job.nodes[job.ranks[job.fault_ranks[0]].node]
            w.add(
                f"{host0}/launcher.log", t_end, f"pdsh@{host0}: {bad}: ssh exited with exit code 1", "cascade"
            )
    if shape == "lsf":
        jid = v["jobid"]
        d0 = clock.local(0, 0.0) - timedelta(minutes=7)
        de = clock.local(0, t_end)
        status = "Exited" if failed else "Done"
        lines = [
            "",
            "------------------------------------------------------------",
            f"Sender: LSF System <lsfadmin@{host0}>",
            f"Subject: Job {jid}: <{job.name}> in cluster <hpc1> {status}",
            "",
            f"Job <{job.name}> was submitted from host <login02> by user <mlops> in cluster <hpc1> at "
            f"{d0.strftime('%a %b %e %H:%M:%S %Y')}",
            f"Job was executed on host(s) <{job.rpn}*{host0}>, in queue <gpu-long>, as user <mlops> in "
            "cluster "
            f"<hpc1> at {clock.local(0, 0.0).strftime('%a %b %e %H:%M:%S %Y')}",
            *[f"                            <{job.rpn}*{h}>" for h in job.nodes[1:]],
            "</home/mlops> was used as the home directory.",
            f"Terminated at {de.strftime('%a %b %e %H:%M:%S %Y')}",
            "Results reported at " + de.strftime("%a %b %e %H:%M:%S %Y"),
            "",
            "Your job looked like:",
            "",
            "------------------------------------------------------------",
            "# LSBATCH: User input",
            f'blaunch -z "{" ".join(job.nodes)}" torchrun --nproc-per-node={job.rpn} '
            f"--nnodes={len(job.nodes)} --rdzv-endpoint={v['master']}:{v['port']} train.py",
            "------------------------------------------------------------",
            "",
            "Exited with exit code 1." if failed else "Successfully completed.",
            "",
            "Resource usage summary:",
            "",
            f"    CPU time :                                   {v['cpu_secs']:.2f} sec.",
            f"    Max Memory :                                 {v['max_mem']} MB",
            f"    Run time :                                   {int(t_end)} sec.",
            "",
        ]
        for k, line in enumerate(lines):
            w.add(
                f"{host0}/lsf.o{jid}",
                t_end + k * 1e-3,
                line,
                "cascade" if failed and line.startswith("Exited") else None,
            )

"""Run one real-run job: write its data, start one torchrun agent per node, wait, keep what they wrote.

The agents rendezvous over c10d on 127.0.0.1; each has its own hostname (a ``sitecustomize`` the
harness puts on the node's ``PYTHONPATH``), time zone and timestamp format, so the logs look like
those of a cluster. Nothing here imports torch: the agents are subprocesses.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.bench.realrun.plan import NPROC, SEQ, STEPS, VOCAB, RunPlan

PROGRAMS = Path(__file__).parent / "programs"
SCRIPTS = {"ddp": "ddp_train.py", "megatron": "megatron_train.py", "hf": "hf_train.py",
           "lightning": "lightning_train.py", "accelerate": "accelerate_train.py",
           "nanogpt": "nanogpt_train.py", "fabric": "fabric_train.py", "titan": "titan_train.py",
           "deepspeed": "deepspeed_train.py", "fsdp2": "fsdp2_train.py", "tp": "tp_train.py",
           "tune": "tune_train.py"}
# styles whose largest checkpoint file stays under the usual 96 KiB quota of disk_full_ckpt: their quota
SMALL_FILES = {"deepspeed": 24 << 10}
# styles whose checkpoint folder holds one shard per rank (DCP of fully_shard or of tensor-parallel DTensors):
# a truncated copy cuts all
CUT_EVERY_FILE = ("fsdp2", "tp")
TIMEOUT_S = 8  # gloo collective timeout: hangs and stragglers surface within seconds
JOIN_TIMEOUT_S = 30
READ_TIMEOUT_S = 20  # the rendezvous store's: a node that cannot reach it gives up after this
DEADLINE_S = 180
HIDDEN = 64
MICRO = 8  # the programs' batch size: a shard holds one epoch of ``plan.steps`` batches

SITECUSTOMIZE = '''import os, socket
_h = os.environ.get("L4RR_HOSTNAME")
if _h:
    socket.gethostname = lambda: _h
    socket.getfqdn = lambda name="": _h if not name or name == _h else name
'''
STALE_PACKAGE = '''"""fused_ops 0.3.1: fused optimizer kernels (built against torch 1.13)."""
from torch._six import inf  # noqa: F401

from .adam import FusedAdam  # noqa: F401
'''


@dataclass
class RunResult:
    plan: RunPlan
    work: Path
    agent_out: dict[str, str]  # node -> the agent's console (stdout and stderr)
    logdirs: dict[str, Path]  # node -> its torchrun --log-dir
    ranks: dict[tuple[str, int], dict] = field(default_factory=dict)  # (node, local rank) -> rank, pid
    returncodes: dict[str, int | None] = field(default_factory=dict)
    seconds: float = 0.0

    def rank_of(self, node: str, local: int) -> int | None:
        info = self.ranks.get((node, local))
        return None if info is None else int(info["rank"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_shards(folder: Path, rng: random.Random, corrupt_local: int | None = None,
                 variant: int = 0, steps: int = STEPS) -> None:
    """Each local rank's jsonl shard; one sample of ``corrupt_local``'s is broken."""
    folder.mkdir(parents=True, exist_ok=True)
    samples = steps * MICRO
    for local in range(NPROC):
        lines = []
        for i in range(samples):
            start = rng.randrange(VOCAB)
            toks = [(start + 3 * j + (j * j) % 5) % VOCAB for j in range(SEQ)]
            lines.append(json.dumps({"id": i, "tokens": toks}))
        if local == corrupt_local:
            bad = rng.randrange(samples // 3, samples)
            if variant % 2:
                rec = json.loads(lines[bad])
                rec["tokens"] = rec["tokens"][: SEQ - 1 - rng.randrange(1, 6)]
                lines[bad] = json.dumps(rec)
            else:
                lines[bad] = lines[bad][: rng.randrange(12, len(lines[bad]) - 4)]
        (folder / f"train-{local:02d}.jsonl").write_text("\n".join(lines) + "\n")


def _hold_port(port: int) -> socket.socket:
    """A stale process on the rendezvous port: it accepts connections and drops them at once."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock


def _node_env(plan: RunPlan, i: int, work: Path, port: int, resume: Path | None) -> dict[str, str]:
    node = plan.nodes[i]
    tz, fmt = plan.clocks[i]
    site = work / "site" / node
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("L4RR_", "TORCHELASTIC_", "PYTHON"))}
    code = work / "code"
    env.update(TZ=tz, L4RR_TSFMT=fmt, L4RR_HOSTNAME=node, L4RR_WORK=str(work),
               L4RR_DATA=str(work / "data" / node), L4RR_STEPS=str(plan.steps),
               L4RR_SAVE_EVERY=str(plan.save_every), L4RR_TIMEOUT=str(TIMEOUT_S), L4RR_HIDDEN=str(HIDDEN),
               L4RR_VOCAB=str(VOCAB), L4RR_SEQ=str(SEQ),
               L4RR_SEED=str(plan.seed), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", TRANSFORMERS_VERBOSITY="info",
               PYTHONPATH=os.pathsep.join([str(site), str(code)]))
    if plan.prefix == "rank" or plan.layout == "slurm":  # torchrun's --tee prefix with the global rank
        env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = "[rank${rank}]:"
    if plan.restarts:  # the launch script of an elastic job: the agent says when it restarts its workers
        env["LOGLEVEL"] = "INFO"
    if plan.restarts and plan.wave >= 6:
        # the workers' store is rank 0's own, new in every attempt: on the agents' shared store the restarted
        # workers would read the gloo addresses of the attempt before and never connect
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    kind = plan.kind
    if kind and (plan.scope != "local" or i == plan.fault_node):
        env.update(L4RR_FAULT=kind, L4RR_FAULT_SCOPE=plan.scope, L4RR_FAULT_STEP=str(plan.step),
                   L4RR_FAULT_VARIANT=str(plan.variant),
                   L4RR_FAULT_LOCAL=",".join(str(x) for x in plan.fault_locals))
    if kind == "disk_full_ckpt" and plan.style in SMALL_FILES:
        env["L4RR_FSIZE"] = str(SMALL_FILES[plan.style])
    if kind == "shape_mismatch" and i == plan.fault_node:
        env["L4RR_HIDDEN"] = str(HIDDEN + 16)
    if kind == "import_error" and i == plan.fault_node:
        pkg = site / "fused_ops"
        pkg.mkdir(exist_ok=True)
        (pkg / "__init__.py").write_text(STALE_PACKAGE)
        (pkg / "adam.py").write_text("class FusedAdam:\n    pass\n")
    if resume is not None and resume.is_dir():  # a save_state or DCP folder: its model weights cut short
        dst = work / "local" / node / resume.name
        shutil.copytree(resume, dst)
        if i == plan.fault_node and plan.style in CUT_EVERY_FILE:
            for f in sorted(dst.glob("*.distcp")):  # each rank reads its own shard: every one is cut short
                f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
        elif i == plan.fault_node:
            weights = dst / "model.safetensors"
            if not weights.is_file():
                weights = max(sorted(dst.iterdir()), key=lambda f: f.stat().st_size)
            data = weights.read_bytes()
            weights.write_bytes(data[: len(data) // 3])
        env["L4RR_RESUME"] = str(dst)
    elif resume is not None:
        local = work / "local" / node
        local.mkdir(parents=True, exist_ok=True)
        dst = local / "resume.pt"
        shutil.copyfile(resume, dst)
        if i == plan.fault_node:
            data = dst.read_bytes()
            dst.write_bytes(data[: len(data) // 3])  # a copy cut short on this node's disk
        env["L4RR_RESUME"] = str(dst)
    return env


def _rdzv_conf(i: int) -> str:
    # node 0 hosts the rendezvous store, as the master node of a cluster does (all agents share 127.0.0.1)
    return f"join_timeout={JOIN_TIMEOUT_S},read_timeout={READ_TIMEOUT_S},is_host={str(i == 0).lower()}"


def _agent_cmd(plan: RunPlan, i: int, port: int, work: Path, logdir: Path, torchrun: str) -> list[str]:
    return [torchrun, "--nnodes", str(len(plan.nodes)), "--nproc-per-node", str(NPROC), "--node-rank", str(i),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", plan.name,
            "--rdzv-conf", _rdzv_conf(i), "--local-addr", "127.0.0.1",
            "--max-restarts", str(plan.restarts), "--monitor-interval", f"{plan.monitor_interval:g}",
            "--log-dir", str(logdir),
            "--redirects", "3", "--tee", "3", str(work / "code" / SCRIPTS[plan.style])]


def run_job(plan: RunPlan, work: Path, *, torchrun: str | None = None,
            resume: Path | None = None) -> RunResult:
    """Run ``plan`` with ``work`` as its scratch folder (data, checkpoints, per-node logs)."""
    torchrun = torchrun or str(Path(sys.executable).with_name("torchrun"))
    work = work.resolve()  # the agents start in it: a relative path would name a folder inside itself
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    rng = random.Random(f"l4-realrun-data:{plan.seed}")
    for i, node in enumerate(plan.nodes):
        corrupt = plan.fault_locals[0] if plan.kind == "corrupt_sample" and i == plan.fault_node else None
        write_shards(work / "data" / node, rng, corrupt, plan.variant, plan.steps)
    code = work / "code"  # the job's own copy of the program, as a cluster job ships it
    shutil.copytree(PROGRAMS, code, ignore=shutil.ignore_patterns("__pycache__"))
    port = free_port()
    blocker = _hold_port(port) if plan.kind == "port_in_use" else None
    procs: dict[str, subprocess.Popen] = {}
    outs: dict[str, Path] = {}
    logdirs: dict[str, Path] = {}
    t0 = time.monotonic()
    try:
        for i, node in enumerate(plan.nodes):
            if plan.kind == "rendezvous_timeout" and i == plan.fault_node:
                continue  # this node's agent never starts
            env = _node_env(plan, i, work, port, resume)
            logdirs[node] = work / "logs" / node
            outs[node] = work / f"agent-{node}.out"
            with open(outs[node], "wb") as out:
                cmd = _agent_cmd(plan, i, port, work, logdirs[node], torchrun)
                procs[node] = subprocess.Popen(cmd, env=env, cwd=work, stdout=out, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)
            time.sleep(0.3)
        # a wave-6 restart runs the workers twice (and starts them again on a loaded machine)
        deadline = DEADLINE_S * (1 + 1.5 * plan.restarts) if plan.wave >= 6 else DEADLINE_S
        while time.monotonic() - t0 < deadline and any(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            else:
                try:  # workers a dead agent left behind (a stopped rank)
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if blocker is not None:
            blocker.close()
    res = load_run(plan, work)
    res.returncodes = {n: p.returncode for n, p in procs.items()}
    res.seconds = time.monotonic() - t0
    return res


def load_run(plan: RunPlan, work: Path) -> RunResult:
    """What a finished run left in ``work``: the agents' consoles, their log dirs, the rank map."""
    outs = {n: work / f"agent-{n}.out" for n in plan.nodes if (work / f"agent-{n}.out").is_file()}
    res = RunResult(plan, work, {n: o.read_bytes().decode("utf-8", "replace") for n, o in outs.items()},
                    {n: work / "logs" / n for n in outs})
    for f in sorted((work / "ranks").glob("*.json")):
        if ".attempt" in f.name:  # a restarted worker's (the labels keep the first attempt's ranks)
            continue
        info = json.loads(f.read_text())
        res.ranks[(info["node"], int(info["local_rank"]))] = info
    return res

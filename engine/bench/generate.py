"""Labeled fault-injection benchmark: synthetic failed jobs (+ successful history jobs) with truth.

Case layout (job-folder contract)::

    OUT/case-0001/failed/job.json, failed/<node>/rank-0003.log[.gz], [failed/<node>/kernel.log]
    OUT/case-0001/history/h1/...   (status "succeeded", same settings, often fewer nodes)
    OUT/case-0001/truth.json

Line templates (faults, noise, normal output) live in ``data/*.yaml``; this module only decides
what happens when. Truth lines are the exact raw lines written to the files.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import yaml

from engine.bench.job import Job, Truth
from engine.bench.straggler import Straggle
from engine.bench.styles import STYLES, TS_FUNCS

__all__ = ["FAULT_KINDS", "OPT_IN_KINDS", "STYLES", "generate_case", "generate_large_job", "generate_suite"]

DATA = Path(__file__).parent / "data"
US = 1_000_000
_SIGNALS = {6: "SIGABRT", 15: "SIGTERM", 9: "SIGKILL"}


@cache
def _load(name: str) -> dict:
    return yaml.safe_load((DATA / name).read_text())


FAULTS: dict = _load("faults.yaml")["kinds"]
FAULT_KINDS: list[str] = [k for k in FAULTS if not FAULTS[k].get("opt_in")]  # the default suite's kinds
OPT_IN_KINDS: list[str] = [k for k in FAULTS if FAULTS[k].get("opt_in")]  # generated only when named


def _lines(block: str | None) -> list[str]:
    return [ln for ln in (block or "").splitlines() if ln.strip()]


def _pick(mapping: dict, style: str):
    keys = (style, "torch", "default") if style != "mindspore" else (style, "default")
    for k in keys:
        if k in mapping:
            return mapping[k]
    return None


def _event_lines(ev: dict, style: str, variant: int) -> list[str]:
    if "snippet" in ev:
        return _lines(_pick(_load("faults.yaml")["snippets"][ev["snippet"]], style))
    if "choose" in ev:
        return [ev["choose"][variant % len(ev["choose"])]]
    return _lines(ev["lines"])


# ----------------------------------------------------------------------------- variables

def _case_vars(rng: random.Random, style: str) -> dict:
    """Variables shared by a case's failed job and its history jobs (the job settings)."""
    S = _load("normal.yaml")["settings"]
    st = S[style]
    model = rng.choice(st["models"])
    heads = rng.choice([32, 40, 48, 64])
    fs = rng.choice(["lustre", "gpfs", "cpfs", "share"])
    return {
        "model": model, "image": rng.choice(st["images"]), "workdir": rng.choice(st["workdirs"]),
        "script": st["script"], "site": rng.choice(S["site_packages"]),
        "ckpt_dir": f"/mnt/{fs}/ckpt/{model}-run{rng.randrange(1, 40)}",
        "data_dir": f"/mnt/{fs}/data/{rng.choice(['pile', 'redpajama', 'wudao', 'slimpj'])}_text_document",
        "nccl_ver": rng.choice(["2.18.1", "2.19.3", "2.20.5", "2.21.5"]),
        "c10d": rng.choice(["/opt/pytorch/pytorch/torch/csrc/distributed/c10d",
                            "../torch/csrc/distributed/c10d"]),
        "heads": heads, "hidden": heads * 128, "layers": rng.choice([24, 32, 40, 48, 80]),
        "seq_len": rng.choice([2048, 4096, 8192]), "mbs": rng.choice([1, 2, 4]),
        "lr_max": rng.choice([1.5e-4, 3e-4, 6e-5, 1e-4]), "zero_stage": rng.choice([1, 2, 3]),
        "params_b": f"{rng.uniform(6, 70):.2f}", "params_m": f"{rng.uniform(6000, 14000):.3f}",
        "ifname": rng.choice(["bond0", "eth0", "ens5f0np0", "ib0"]),
        "printer_last": style == "megatron" and rng.random() < 0.7,
        "busids": ["7000", "f000", "47000", "4e000", "87000", "90000", "b7000", "bd000"],
        "pcis": ["0000:07:00", "0000:0f:00", "0000:47:00", "0000:4e:00", "0000:87:00", "0000:90:00",
                 "0000:b7:00", "0000:bd:00"],
        "timeout_ms": rng.choice([600000, 1800000]),
        "tp": 1, "pp": 1,
    }


def _job_vars(rng: random.Random, base: dict, nodes: list[str], rpn: int, iterations: int,
              start_iter: int) -> dict:
    V = dict(base)
    world = len(nodes) * rpn
    tp = max(d for d in (1, 2, 4) if rpn % d == 0 and d <= rpn)
    pp = 2 if len(nodes) % 2 == 0 and rng.random() < 0.4 else 1
    dp = world // (tp * pp)
    n_micro = rng.choice([4, 8, 16])
    V.update(tp=tp, pp=pp, dp=dp, world=world, rpn=rpn, nnodes=len(nodes), n_micro=n_micro,
             gbs=dp * V["mbs"] * n_micro, start_iter=start_iter,
             train_iters=rng.choice([250000, 100000, 500000, 60000]),
             save_interval=max(5, iterations // rng.randint(2, 4)),
             jobid=rng.randrange(100000, 9999999), master_addr=nodes[0],
             world_info="{" + ", ".join(f"'{n}': {list(range(rpn))}" for n in nodes[:3])
             + (", ...}" if len(nodes) > 3 else "}"),
             visible=",".join(str(i) for i in range(rpn)),
             optype=rng.choice(["ALLREDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE", "BROADCAST"]),
             numel=rng.choice([1, 466119168, 16384000, 544997376, 68124672]),
             seq=rng.randrange(1500, 130000), stream=rng.randrange(2, 200), task=rng.randrange(1, 60000),
             notify=f"{rng.getrandbits(16):016x}", steps_per_epoch=rng.randrange(500, 20000),
             train_samples=rng.randrange(10**6, 10**8), valid_samples=rng.randrange(10**4, 10**6),
             shards=rng.choice([2, 3, 4, 7, 15]), shard_secs=rng.randrange(5, 59),
             shard_rate=f"{rng.uniform(1, 12):.2f}", host0=nodes[0], commid=f"{rng.getrandbits(64):016x}")
    V["seq_enq"], V["seq_done"] = V["seq"] + rng.randrange(1, 4), V["seq"] - 1
    V["node_vars"] = [{"ip": f"10.{rng.randrange(1, 250)}.{rng.randrange(0, 250)}.{rng.randrange(2, 250)}",
                       "dev_net": f"192.168.{rng.randrange(1, 250)}"} for _ in nodes]
    # fault and noise template variables
    V.update(peer_port=rng.randrange(30000, 65000), mlx=f"mlx5_{rng.randrange(0, 8)}",
             mlx_pci=f"0000:{rng.choice(['1a', '3b', '5d', '9a', 'ba', 'db'])}:00.{rng.randrange(0, 2)}",
             ib_if=rng.choice(["ibp26s0", "ibs1", "enp59s0f0np0"]), mlx_port=rng.randrange(0, 8),
             lid=rng.randrange(100, 9000), part=rng.randrange(0, 12), row=f"{rng.getrandbits(40):016x}",
             gpu_uuid="-".join(f"{rng.getrandbits(b * 4):0{b}x}" for b in (8, 4, 4, 4, 12)),
             link=rng.randrange(0, 18), n_rec=rng.randrange(0, 400), oom_try=f"{rng.uniform(0.2, 9):.2f}",
             oom_free=f"{rng.uniform(2, 900):.2f}", oom_inuse=f"{rng.uniform(70, 79):.2f}",
             oom_alloc=f"{rng.uniform(60, 76):.2f}", oom_resv=f"{rng.uniform(0.1, 3):.2f}",
             layer=rng.randrange(0, 40), op=rng.randrange(100, 9000), oom_bytes=rng.choice([2, 4, 8]) << 30,
             bad_tp=rng.choice([t for t in (3, 6, 7, 12) if V["heads"] % t]),
             bad_world=world + rng.choice([-2, 2, 4]), drv_found=rng.choice([11040, 11060, 11070, 12000]),
             perm_path=f"/tmp/data_files/{rng.choice(['pile', 'rm_static', 'sft_mix'])}_seed1234_train_"
                       f"{rng.randrange(100, 999)}.npy",
             n_grad=rng.randrange(1, 30), n_params=rng.randrange(31, 60), param_id=rng.randrange(10, 900),
             submod=rng.randrange(10, 900), shard_numel=rng.randrange(10**5, 10**7),
             seq_long=V["seq_len"] + rng.randrange(1, 3000), slow_s=rng.randrange(61, 300),
             wpid=rng.randrange(20000, 900000), spike=f"{rng.uniform(12, 80):.1f}",
             ecc_n=rng.randrange(1, 40),
             slow_fetch=f"{rng.uniform(5.5, 40):.1f}", temp=rng.randrange(86, 96),
             peer_local=rng.randrange(0, rpn))
    other = rng.randrange(len(nodes))
    V["peer_ip"] = V["node_vars"][other]["ip"]
    V["peer_dev_ip"] = f"{V['node_vars'][other]['dev_net']}.{V['peer_local'] + 1}"
    return V


def _node_names(rng: random.Random, n: int, scheme: str) -> list[str]:
    if scheme == "node":
        nums = sorted(rng.sample(range(1, max(4 * n, 40)), n))
        return [f"node-{x:03d}" for x in nums]
    rack = rng.randrange(1, 40)
    return [f"gpu-a{rack + i // 4:02d}-{i % 4 + 1}" for i in range(n)]


# ----------------------------------------------------------------------------- run one job

class _Run:
    """Drives one job through its stages; ``plan`` is None for a successful job."""

    def __init__(self, job: Job, plan: dict | None, noise: list[dict], noisy: dict | None,
                 iterations: int, kind: str | None, bulk_bytes: int = 0, profile: str = "repetitive") -> None:
        self.job, self.plan, self.noise, self.noisy = job, plan, noise, noisy
        self.kind, self.spec = kind, FAULTS[kind] if kind else None
        self.N = _load("normal.yaml")[job.style]
        self.rng, self.V = job.rng, job.V
        self.T = iterations
        self.truth = Truth()
        self.bulk_bytes = bulk_bytes
        self.profile = profile
        self.it_us = int(self.rng.uniform(2.0, 8.0) * US)
        self.slow: Straggle | None = None

    # -- helpers
    def stage(self, entries: list, t: int, extra: dict | None = None) -> int:
        for e in entries:
            ranks = self.job.who(e["who"])
            for spec in _lines(e["lines"]):
                for r in ranks:
                    self.job.emit(r, spec, t, extra)
                t += self.rng.randrange(3000, 90000)
        return t

    def noise_at(self, stage: str, t: int, it: int | None = None) -> None:
        for ev in self.noise:
            if ev["stage"] != stage or (it is not None and it not in ev.get("_its", ())):
                continue
            for r in self.job.who(ev["who"]):
                for spec in _lines(ev["lines"]):
                    self.job.emit(r, spec, t, {"it": it or self.V["start_iter"]})
        if self.noisy and stage in ("training", "init"):
            for ev in self.noisy["events"]:
                if stage == "training" and it not in ev["_its"]:
                    continue
                if stage == "init" and not self.noisy.get("at_init"):
                    continue
                for r in ev["_ranks"]:
                    for spec in _lines(ev["lines"]):
                        self.job.emit(r, spec, t, {"it": it or 0, "mlx": self.V["mlx"]})

    def it_vals(self, it: int, loss: float | None = None) -> dict:
        T, V, style = self.V["train_iters"], self.V, self.job.style
        x = loss if loss is not None else 2.0 + 8.5 * math.exp(-it / 40.0) + self.rng.gauss(0, 0.02)
        lr = V["lr_max"] * min(1.0, it / 200) * 0.5 * (1 + math.cos(math.pi * min(it / T, 1)))
        ms = self.it_us / 1000 * self.rng.uniform(0.97, 1.03)
        if style == "megatron":
            ls, lrs = ("nan" if math.isnan(x) else f"{x:.6E}"), f"{lr:.3E}"
        else:
            ls, lrs = ("nan" if math.isnan(x) else f"{x:.4f}"), f"{lr:.6g}"
        return {"it": it, "loss": ls, "lr": lrs, "gnorm": f"{self.rng.uniform(0.15, 1.2):.3f}",
                "it_ms": f"{ms:.1f}", "it_ms_int": int(ms), "consumed": it * V["gbs"],
                "skipped": self.skipped, "nans": self.nans, "loss_scale": "1.0",
                "tps": f"{self.rng.uniform(2800, 4200):.1f}", "tflops": f"{self.rng.uniform(150, 210):.1f}",
                "mem_gb": f"{self.rng.uniform(30, 70):.2f}", "maxmem_gb": f"{self.rng.uniform(70, 78):.2f}",
                "sps": f"{self.rng.uniform(20, 90):.2f}", "sps2": f"{self.rng.uniform(20, 90):.2f}",
                "micro": it * V["n_micro"], "step_s": f"{ms / 1000:.2f}"}

    def iteration(self, it: int, t: int, vals: dict, nan: bool = False) -> None:
        for e in self.N["iteration"]:
            for r in self.job.who(e["who"]):
                for spec in _lines(e["lines"]):
                    line = self.job.emit(r, spec, t, vals)
                    if nan and line and "${loss}" in spec:
                        self.truth.add("ind", "nan_loss", line)

    # -- main flow
    def run(self) -> int:
        p, N, rng = self.plan, self.N, self.rng
        fstage = p["stage"] if p else None
        t = self.job.t0
        init = N["init"][:2] if fstage == "init" else N["init"]
        t = self.stage(init, t)
        self.noise_at("init", t)
        if fstage == "init":
            return self.fail(t + rng.randrange(1, 5) * US, None)
        t = self.stage(N["data_loading"], t + rng.randrange(2, 20) * US)
        if fstage == "data_loading":
            return self.fail(t + rng.randrange(1, 30) * US, None)
        start = self.V["start_iter"]
        loading = N["model_loading_resume" if start else "model_loading_fresh"]
        t = self.stage(loading, t + rng.randrange(5, 60) * US)
        if fstage == "model_loading":
            return self.fail(t + rng.randrange(1, 20) * US, None)
        t = self.stage(N["train_start"], t + rng.randrange(10, 120) * US)
        self.skipped = self.nans = 0
        its = range(start + 1, start + self.T + 1)
        for ev in self.noise:
            if ev["stage"] == "training":
                ev["_its"] = set(rng.sample(list(its), min(ev.get("count", 1), len(its))))
            elif ev["stage"] == "warmup":
                ev["_its"] = set(its[:3])
        if self.noisy:
            for ev in self.noisy["events"]:
                hi = min(p["it"] - 1, its[-1]) if p and p.get("it") else its[-1]
                cand = list(range(start + 1, max(start + 2, hi)))
                ev["_its"] = set(rng.sample(cand, min(len(cand), rng.randint(2, 4))))
        f_it = p.get("it") if p else None
        if self.bulk_bytes:
            it0, t = self.bulk(start + 1, t)
            f_it, its = it0, range(it0, it0 + 1)
            p["it"] = f_it
        nan_from = p.get("first_bad") if p else None
        if self.spec and self.spec.get("special") == "straggler" and not self.bulk_bytes:
            self.slow = Straggle(self, self.spec["slowdown"], f_it, start)
        for it in its:
            t += int(self.it_us * rng.uniform(0.95, 1.05))
            if fstage == "training" and it == f_it:
                return self.fail(t - int(self.it_us * rng.uniform(0.2, 0.8)), it)
            slow_t = self.slow.step(it, t) if self.slow else None
            if slow_t is not None:
                t = slow_t
            elif nan_from is not None and it >= nan_from:
                self.nans += 1
                self.skipped += 1
                self.nan_progress(it, t)
                self.iteration(it, t, self.it_vals(it, float("nan")), nan=True)
            else:
                self.iteration(it, t, self.it_vals(it))
            self.noise_at("training", t, it)
            self.noise_at("warmup", t, it)
            if it % self.V["save_interval"] == 0 and not (self.slow and self.slow.onset <= it):
                t += rng.randrange(2, 10) * US
                if fstage == "checkpointing" and it == p["ckpt_it"]:
                    self.stage(N["checkpoint"][:1], t, {"it": it})
                    return self.fail(t + rng.randrange(5, 60) * US, it + 1)
                t = self.stage(N["checkpoint"], t, {"it": it})
                self.noise_at("checkpointing", t, None)
        t = self.stage(N["teardown"], t + rng.randrange(5, 60) * US)
        return t

    def nan_progress(self, it: int, t: int) -> None:
        block = _pick(self.spec.get("progress", {}), self.job.style) if self.spec else None
        if not block:
            return
        k = self.plan["it"] - it  # iterations left before the exception
        for r in self.job.who("printer"):
            for spec in _lines(block):
                line = self.job.emit(r, spec, t, {"ls_from": 2 ** k, "ls_to": 2 ** (k - 1)})
                self.truth.add("ind", "nan_loss", line)

    # -- fault injection
    def fail(self, t: int, it: int | None) -> int:
        job, spec, p, rng = self.job, self.spec, self.plan, self.rng
        special, faulty = spec.get("special"), p["ranks"]
        torch = job.style != "mindspore"
        if special == "crash":
            vals = self.it_vals(it or 0)
            per_rank = [s for e in self.N["iteration"] if e["who"] == "all" for s in _lines(e["lines"])][0]
            for r in faulty:
                line = job.text(r, per_rank, job.tick(r, t), vals)
                line = line[:rng.randrange(12, max(13, len(line) - 4))]
                job.lines[r].append(line)
                job.truncated.add(r)
                self.truth.add("ind", "node_crash_truncated", line)
            job.dead |= set(faulty)
            peer = {"peer_ip": self.V["node_vars"][p["node"]]["ip"], "peer_rank": faulty[0]}
            t = self.cascade("remote_exit" if torch else "nccl_timeout", t + rng.randrange(1, 20) * US, peer)
            return self.agent(t, {}, 1, 1 if torch else -6)
        if special == "straggler" and self.slow:
            return self.slow.finish(t)
        if special == "stall":
            t = self.cascade("nccl_timeout", t + self.V["timeout_ms"] * 1000,
                             {"peer_rank": rng.randrange(job.world)}, hang=True)
            return self.agent(t + rng.randrange(1, 5) * US, {}, -6, -6)
        if special == "hang":
            job.dead |= set(faulty)
            self.cascade("nccl_timeout", t + self.V["timeout_ms"] * 1000, {"peer_rank": faulty[0]}, hang=True)
            return t
        if special == "preempt":
            t += rng.randrange(1, 30) * US
            for spec_line in _lines(spec["slurm_job"]):
                self.truth.add("ind", "slurm_preemption", job.emit(0, spec_line, t, force=True))
            for r in job.who("local0"):
                for spec_line in _lines(spec["slurm_step"]):
                    self.truth.add("ind", "slurm_preemption", job.emit(r, spec_line, t, force=True))
            job.dead |= set(range(job.world))
            return self.agent(t + US, {}, -15, -15, name="sigterm")
        variant = p["variant"]
        for ev in spec.get("kernel", []):
            for s in _event_lines(ev, job.style, variant):
                line = job.kern(faulty[0], s, t - rng.randrange(100, 900) * 1000)
                self.truth.add("ind" if ev.get("key") else "ctx", ev.get("key"), line)
        for r in faulty:
            tr = t + rng.randrange(0, 400) * 1000
            for ev in _pick(spec["events"], job.style) or []:
                for s in _event_lines(ev, job.style, variant):
                    line = job.emit(r, s, tr, {"it": it or 0})
                    self.truth.add("ind" if ev.get("key") else "ctx", ev.get("key"), line or "")
        job.dead |= set(faulty)
        first = {}
        for r in faulty:
            first.setdefault(job.node_of(r), r)
        name = "nccl_timeout" if (not torch or p["cascade_timeout"]) else "remote_exit"
        if spec["cascade"] == "peer" and len(faulty) < job.world:
            delay = self.V["timeout_ms"] * 1000 if name == "nccl_timeout" else rng.randrange(1, 10) * US
            peer = {"peer_ip": self.V["node_vars"][job.node_of(faulty[0])]["ip"], "peer_rank": faulty[0]}
            t = self.cascade(name, t + delay, peer)
        return self.agent(t + rng.randrange(1, 5) * US, first, 1, -6 if name == "nccl_timeout" else 1)

    def cascade(self, name: str, t: int, extra: dict, hang: bool = False) -> int:
        job, rng = self.job, self.rng
        cas = _load("faults.yaml")["cascades"][name]
        block = _lines(cas["mindspore"] if job.style == "mindspore" else cas["torch"])
        pats = cas.get("hang_indicating", [])
        key = "hccl_notify_timeout" if job.style == "mindspore" else "nccl_watchdog_timeout"
        healthy = [r for r in range(job.world) if r not in job.dead]
        for r in healthy:
            ex = dict(extra, ran_ms=self.V["timeout_ms"] + rng.randrange(20, 95))
            tr = t + rng.randrange(0, 3 * US)
            for s in block:
                line = job.emit(r, s, tr, ex) or ""
                if hang:
                    self.truth.add("ind" if any(pt in s for pt in pats) else "ctx", key, line)
                else:
                    self.truth.add("cascade", None, line)
        job.dead |= set(healthy)
        return t + 3 * US

    def agent(self, t: int, first: dict, code: int, healthy_code: int, name: str = "agent") -> int:
        job = self.job
        block = _lines(_load("faults.yaml")["cascades"][name][job.style])
        crashed = set(self.plan["ranks"]) if self.spec.get("special") == "crash" else set()
        for n in range(len(job.nodes)):
            l0 = n * job.rpn
            if l0 in crashed:
                continue
            r = first.get(n, l0)
            c = code if n in first else healthy_code
            desc = (f"Signal {-c} ({_SIGNALS.get(-c, 'SIGKILL')}) received by PID {job.ctx[r].pid}"
                    if c < 0 else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
            ex = {"fail_rank": r, "fail_local": r % job.rpn, "fail_pid": job.ctx[r].pid, "exitcode": c,
                  "signal_desc": desc, "agent_pid": job.ctx[l0].pid - 37}
            for s in block:
                self.truth.add("cascade", None, job.emit(l0, s, t, ex, force=True) or "")
        return t

    # -- fast path for the speed benchmark
    def bulk(self, it0: int, t: int) -> tuple[int, int]:
        job = self.job
        current = sum(len(ln) + 1 for ls in job.lines for ln in ls)
        budget = self.bulk_bytes - current - job.world * 900
        speed = _load("speed.yaml")
        extra = [f"py.INFO|{s}" if "|" not in s else s for s in speed["profiles"][self.profile]]
        tokens = _TokenDraw(speed["tokens"], self.rng.getrandbits(32)) if extra else None
        vals = {k: _Sentinel(k) for k in [*self.it_vals(it0), *speed["tokens"]]}
        ts_names = sorted(TS_FUNCS, key=lambda k: -len(TS_FUNCS[k](t)))
        pat = re.compile("\x00(\\w+)\x01([^\x00)]*)\x00")
        needed: set[tuple[str, str]] = set()

        def slot(m: re.Match) -> str:
            needed.add((m[1], m[2]))
            return f"%({m[1]}|{m[2]})s"

        tmpls = []
        for r in range(job.world):
            parts = [job.text(r, s, t, vals) for e in self.N["iteration"] if r in job.who(e["who"])
                     for s in _lines(e["lines"])] + [job.text(r, s, t, vals) for s in extra]
            block = "\n".join(parts).replace("%", "%%")
            for name in ts_names:
                block = block.replace(TS_FUNCS[name](t), f"%({name})s")
            tmpls.append(pat.sub(slot, block))
        pools = [self.it_vals(it0 + i) for i in range(64)]

        def values(it: int, tt: int) -> dict:
            pool = dict(pools[it & 63], it=it, consumed=it * self.V["gbs"])
            if tokens is not None:
                pool.update(tokens(it))
            d = {f"{n}|{sp}": format(pool[n], sp) for n, sp in needed}
            d.update((n, TS_FUNCS[n](tt)) for n in ts_names)
            return d

        per_iter = sum(len(tm % values(it0, t)) + 1 for tm in tmpls)
        n_iter = max(1, budget // per_iter)
        t_start, it_us = t, self.it_us

        def rows() -> Iterator[dict]:
            tt = t_start
            for it in range(it0, it0 + n_iter):
                tt += it_us
                yield values(it, tt)

        job.add_bulk(tmpls, rows)  # rendered while the files are written: a 10 GB job need not fit in memory
        t = t_start + n_iter * it_us
        job.last = [max(x, t) for x in job.last]
        return it0 + n_iter, t


class _TokenDraw:
    """Fresh variable tokens for every iteration (the same for every rank: each rank file is
    scanned on its own, so what matters is that its lines differ from each other)."""

    def __init__(self, names: list[str], seed: int) -> None:
        self.names, self.seed = names, seed

    def __call__(self, it: int) -> dict:
        r = random.Random(self.seed * 1_000_003 + it)
        b = r.getrandbits
        v = {"ptr_a": f"{0x7f0000000000 | b(40):x}", "ptr_b": f"{0x55d100000000 | b(32):x}",
             "ptr_c": f"{b(44):x}", "comm_id": f"{b(64):016x}",
             "uuid": f"{b(32):08x}-{b(16):04x}-4{b(12):03x}-{8 | b(2):x}{b(12):03x}-{b(48):012x}",
             "tmp_name": "".join(r.choice("abcdefghijklmnopqrstuvwxyz0123456789_") for _ in range(8)),
             "ipv6": ":".join(f"{b(16):x}" for _ in range(8)), "sha": f"{b(256):064x}",
             "alloc_sz": str(b(30))}
        return {k: v[k] for k in self.names}


class _Sentinel:
    """Stands in for an iteration variable while building bulk templates."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __format__(self, spec: str) -> str:
        return f"\x00{self.name}\x01{spec}\x00"

    def __str__(self) -> str:
        return f"\x00{self.name}\x01\x00"


# ----------------------------------------------------------------------------- noise draws

def _applicable(pool: list[dict], style: str) -> list[dict]:
    return [e for e in pool if style in e.get("styles", STYLES)]


def _draw_noise(rng: random.Random, style: str) -> list[dict]:
    pool = _applicable(_load("noise.yaml")["benign"], style)
    return [dict(e) for e in rng.sample(pool, min(len(pool), rng.randint(4, 7)))]


def _history_noise(rng: random.Random, style: str, failed: list[dict]) -> list[dict]:
    keep = [dict(e) for e in failed if rng.random() < 0.85]
    ids = {e["id"] for e in failed}
    extra = [e for e in _applicable(_load("noise.yaml")["benign"], style) if e["id"] not in ids]
    if extra and rng.random() < 0.5:
        keep.append(dict(rng.choice(extra)))
    return keep


# ----------------------------------------------------------------------------- public API

def _plan(rng: random.Random, kind: str, style: str, nnodes: int, rpn: int, T: int, start: int,
          save_interval: int) -> dict:
    spec = FAULTS[kind]
    scope = spec["scope"] if isinstance(spec["scope"], str) else spec["scope"].get(style, "some")
    world = nnodes * rpn
    node = rng.randrange(nnodes)
    ranks = {"rank": lambda: [node * rpn + rng.randrange(rpn)],
             "node": lambda: list(range(node * rpn, (node + 1) * rpn)),
             "some": lambda: sorted(rng.sample(range(world), rng.randint(1, min(3, world)))),
             "rank0": lambda: [0], "all": lambda: list(range(world))}[scope]()
    p = {"stage": spec["stage"], "node": node, "ranks": ranks, "variant": rng.randrange(1000),
         "cascade_timeout": rng.random() < 0.7, "it": None}
    if spec["stage"] == "training":
        p["it"] = start + rng.randint(max(2, int(0.4 * T)), max(2, int(0.9 * T)))
        if spec.get("early") and rng.random() < spec["early"]:
            p["it"] = start + 1
        if spec.get("special") == "nan":
            k = 0 if style == "mindspore" else rng.randint(1, 3)
            p["it"] = max(p["it"], start + 1 + k)
            p["first_bad"] = p["it"] - k
    elif spec["stage"] == "checkpointing":
        cands = [i for i in range(start + 1, start + T) if i % save_interval == 0]
        late = [i for i in cands if i >= start + 0.3 * T] or cands
        p["ckpt_it"] = rng.choice(late)
    return p


def generate_case(case_dir: Path, kind: str, style: str, rng: random.Random, *, nodes: int,
                  ranks_per_node: int, iterations: int, history_jobs: int = 2,
                  line_bytes_target: int | None = None) -> dict:
    """Write one case (failed job, history jobs, truth.json) and return the truth dict.

    ``line_bytes_target`` (optional) is an approximate size of the failed job's logs in bytes;
    when given, the failed job runs as many iterations as needed to reach it (fast path).
    """
    spec = FAULTS[kind]
    if style not in spec["styles"]:
        raise ValueError(f"kind {kind!r} does not exist in style {style!r}")
    case_dir = Path(case_dir)
    iterations = max(iterations, 6)
    base = _case_vars(rng, style)
    settings = {"model": base["model"], "framework": style, "image": base["image"]}
    scheme = rng.choice(["node", "node", "gpu"])
    mode = rng.choice({"megatron": ["rank", "default", "none"], "deepspeed": ["pdsh", "plain"],
                       "mindspore": ["plain"]}[style])
    kernel_mode = rng.choice(["file", "dmesg"])
    t0 = rng.randrange(1704067200, 1780000000) * US
    names = _node_names(rng, nodes, scheme)
    resumed = rng.randrange(1, 50) * 100
    start = resumed if spec.get("resume") else rng.choice([0, 0, resumed])
    V = _job_vars(rng, base, names, ranks_per_node, iterations, start)
    plan = _plan(rng, kind, style, nodes, ranks_per_node, iterations, start, V["save_interval"])
    job = Job(style, rng, names, ranks_per_node, V, t0, mode=mode, kernel_mode=kernel_mode)
    noise = _draw_noise(rng, style)
    noisy_node = rng.choice([n for n in range(nodes) if n != plan["node"]] or [plan["node"]])
    noisy_pool = _applicable(_load("noise.yaml")["noisy_node"], style)
    noisy_ranks = job.ranks_of(noisy_node)
    noisy = {"events": [dict(e, _ranks=rng.sample(noisy_ranks, rng.randint(1, min(2, ranks_per_node))))
                        for e in rng.sample(noisy_pool, rng.randint(2, 3))],
             "at_init": spec["stage"] in ("init", "data_loading", "model_loading")}
    _kernel_boot(job, t0)
    run = _Run(job, plan, noise, noisy, iterations, kind, bulk_bytes=line_bytes_target or 0)
    run.run()
    job.write(case_dir / "failed", {"job_id": case_dir.name, "status": "failed", "settings": settings})
    for h in range(1, history_jobs + 1):
        hn = nodes if rng.random() < 0.35 else rng.randint(max(1, nodes // 4), max(1, nodes - 1))
        hnames = (sorted(rng.sample(names, hn)) if rng.random() < 0.5
                  else _node_names(rng, hn, rng.choice(["node", "gpu"])))
        hstart = rng.choice([0, rng.randrange(1, 50) * 100])
        hV = _job_vars(rng, base, hnames, ranks_per_node, iterations, hstart)
        hjob = Job(style, rng, hnames, ranks_per_node, hV, t0 - rng.randrange(1, 30) * 86400 * US,
                   mode=mode, kernel_mode=kernel_mode)
        _kernel_boot(hjob, hjob.t0)
        _Run(hjob, None, _history_noise(rng, style, noise), None, iterations, None).run()
        hjob.write(case_dir / "history" / f"h{h}",
                   {"job_id": f"{case_dir.name}-h{h}", "status": "succeeded", "settings": settings})
    truth = {"case_id": case_dir.name, "kind": kind, "category": spec["category"], "style": style,
             "faulty_nodes": [names[plan["node"]]] if spec["faulty_node"] else [],
             "stage": plan["stage"], "iteration": plan.get("stuck_it", plan.get("first_bad", plan.get("it")))
             if plan["stage"] != "checkpointing" else plan["ckpt_it"] + 1}
    truth.update(run.truth.export())
    truth["noisy_node"] = names[noisy_node]
    (case_dir / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
    return truth


def _kernel_boot(job: Job, t0: int) -> None:
    if job.kernel_mode != "file":
        return
    lines = _lines(_load("noise.yaml")["kernel_benign"])
    for n in range(len(job.nodes)):
        r = n * job.rpn
        for i, s in enumerate(job.rng.sample(lines, 3)):
            job.kern(r, s, t0 - (600 - i * 7) * US)


def _case_plan(i: int, kinds: list[str]) -> tuple[str, str]:
    kind = kinds[i % len(kinds)]
    allowed = FAULTS[kind]["styles"]
    return kind, allowed[(i // len(kinds) + kinds.index(kind)) % len(allowed)]


def generate_suite(out: Path, cases: int, seed: int, *, nodes: tuple[int, int] = (4, 12),
                   ranks_per_node: tuple[int, int] = (2, 4), iterations: tuple[int, int] = (30, 80),
                   history_jobs: int = 2, kinds: list[str] | None = None) -> list[Path]:
    """Generate ``cases`` cases under ``out``; writes ``out/cases.json`` and returns the case dirs."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kinds = list(kinds or FAULT_KINDS)
    unknown = [k for k in kinds if k not in FAULTS]
    if unknown:
        raise ValueError(f"unknown fault kinds: {unknown}")
    dirs, index = [], []
    for i in range(cases):
        kind, style = _case_plan(i, kinds)
        rng = random.Random(f"l4-bench:{seed}:{i}")
        d = out / f"case-{i + 1:04d}"
        generate_case(d, kind, style, rng, nodes=rng.randint(*nodes),
                      ranks_per_node=rng.randint(*ranks_per_node), iterations=rng.randint(*iterations),
                      history_jobs=history_jobs)
        dirs.append(d)
        index.append({"case_id": d.name, "path": d.name, "kind": kind, "style": style,
                      "category": FAULTS[kind]["category"]})
    (out / "cases.json").write_text(json.dumps(index, indent=1) + "\n")
    return dirs


def generate_large_job(out: Path, size_bytes: int, seed: int = 0, style: str = "megatron",
                       profile: str = "repetitive") -> Path:
    """One big failed job folder (``out``) of about ``size_bytes`` bytes, for speed benchmarks; the
    `profile` (data/speed.yaml) adds lines with tokens that differ on every line."""
    out = Path(out)
    rng = random.Random(f"l4-large:{seed}")
    rpn = 8
    nnodes = int(min(64, max(2, size_bytes // (24 << 20))))
    kind = "xid79" if style != "mindspore" else "roce_cqe_error"
    base = _case_vars(rng, style)
    names = _node_names(rng, nnodes, "node")
    V = _job_vars(rng, base, names, rpn, 100, 0)
    plan = _plan(rng, kind, style, nnodes, rpn, 100, 0, V["save_interval"])
    V["save_interval"] = 10**9  # no checkpoints inside the bulk part
    job = Job(style, rng, names, rpn, V, rng.randrange(1704067200, 1780000000) * US, mode="rank",
              kernel_mode="dmesg", gz_fraction=0.0)
    run = _Run(job, plan, _draw_noise(rng, style), None, 100, kind, bulk_bytes=size_bytes, profile=profile)
    run.run()
    job.write(out, {"job_id": out.name, "status": "failed",
                    "settings": {"model": base["model"], "framework": style, "image": base["image"]}})
    return out

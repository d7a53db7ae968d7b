"""The straggler fault of the benchmark generator: one rank (or one node) slows down until a
collective times out.

From the onset iteration on, the slow ranks' steps take longer each time (a throttled GPU, a NIC
retransmitting, a host that swaps). Every rank waits for them in the gradient collective, so the
job's step time grows with theirs, while the healthy ranks' CPU threads run ahead (the kernels of
the next steps are queued before the collective completes), so their per-rank iteration lines are
printed up to ``behind`` iterations before the slow ranks' (which fall behind step by step). One
step of the slow ranks then outlasts the collective timeout: the healthy ranks' watchdog fires, the
slow ranks, still alive, see their peers gone (remote exit on torch, a notify timeout naming a
healthy rank on Ascend) and the launchers report. The parameters are data
(``data/faults.yaml``: ``straggler.slowdown``).
"""

from __future__ import annotations

import math
from typing import Any

US = 1_000_000


class Straggle:
    """The slow ranks of one failed job and what they have printed so far."""

    def __init__(self, run: Any, slowdown: dict, fail_it: int, start: int) -> None:
        self.run, self.rng, self.job = run, run.rng, run.job
        rng, job, plan = self.rng, self.job, run.plan
        node = plan["node"]
        ranks = job.ranks_of(node)
        self.one_rank = job.rpn > 1 and rng.random() < slowdown["rank_share"]
        self.slow = [rng.choice(ranks)] if self.one_rank else ranks
        plan["ranks"] = list(self.slow)
        self.growth = rng.uniform(*slowdown["growth"])
        self.fail_it = fail_it
        # a checkpoint is a barrier, so none is written once the slow ranks fall behind
        self.onset = max(start + 2, fail_it - rng.randint(*slowdown["onset"]))
        span = fail_it - self.onset
        self.behind = max(1, min(rng.randint(*slowdown["behind"]), span - 1))
        self.printed = self.onset - 1  # last iteration the slow ranks printed
        self.last_t = 0
        plan["stuck_it"] = fail_it - self.behind  # the step the slow ranks never finish

    def factor(self, it: int) -> float:
        return self.growth ** (it - self.onset + 1)

    def step(self, it: int, t: int) -> int | None:
        """Print iteration ``it`` (healthy ranks) and what the slow ranks reach by then; returns
        the new time, or None before the onset (an ordinary iteration)."""
        if it < self.onset:
            return None
        run, rng = self.run, self.rng
        f = self.factor(it)
        t += int(run.it_us * (f - 1.0) * rng.uniform(0.95, 1.05))  # the others wait for the slow ranks
        vals = run.it_vals(it)
        vals = self._slower(vals, f * rng.uniform(0.97, 1.03), 1.0)
        self._emit(set(range(self.job.world)) - set(self.slow), it, t, vals)
        lag = math.ceil(self.behind * (it - self.onset + 1) / (self.fail_it - self.onset))
        reach = min(it - lag, self.fail_it - 1 - self.behind)
        while self.printed < reach:
            self.printed += 1
            k = self.printed
            ts = t - int(run.it_us * rng.uniform(0.05, 0.4))
            self._emit(set(self.slow), k, ts, self._slower(run.it_vals(k), self.factor(k), self.factor(k)))
            self.last_t = ts
        return t

    def _slower(self, vals: dict, step: float, own: float) -> dict:
        """Iteration values with the step ``step`` times longer and the rank's own throughput
        ``own`` times lower."""
        ms = float(vals["it_ms"]) * step
        out = dict(vals, it_ms=f"{ms:.1f}", it_ms_int=int(ms), step_s=f"{ms / 1000:.2f}")
        for key in ("tps", "tflops", "sps", "sps2"):
            out[key] = f"{float(vals[key]) / own:.1f}" if key in ("tps", "tflops") else \
                f"{float(vals[key]) / own:.2f}"
        return out

    def _emit(self, ranks: set[int], it: int, t: int, vals: dict) -> None:
        run = self.run
        for e in run.N["iteration"]:
            for r in run.job.who(e["who"]):
                if r in ranks:
                    for spec in (ln for ln in e["lines"].splitlines() if ln.strip()):
                        run.job.emit(r, spec, t, vals)

    def finish(self, t: int) -> int:
        """The slow ranks' endless step: the others' watchdog, the slow ranks' lost peers, the
        launchers."""
        run, job, rng = self.run, self.job, self.rng
        stuck = max(self.last_t, t - run.it_us)
        slow = set(self.slow)
        healthy = [r for r in range(job.world) if r not in slow]
        job.dead |= slow
        t_out = stuck + run.V["timeout_ms"] * 1000 + rng.randrange(1, 5) * US
        run.cascade("nccl_timeout", t_out, {"peer_rank": self.slow[0]}, hang=True)
        job.dead = set(healthy)
        peer = healthy[rng.randrange(len(healthy))]
        extra = {"peer_ip": run.V["node_vars"][job.node_of(peer)]["ip"], "peer_rank": peer}
        lost = "remote_exit" if job.style != "mindspore" else "nccl_timeout"
        t = run.cascade(lost, t_out + rng.randrange(1, 8) * US, extra)
        first = {job.node_of(self.slow[0]): self.slow[0]}
        return run.agent(t + rng.randrange(1, 5) * US, first, 1, -6)

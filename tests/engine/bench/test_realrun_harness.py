"""The real-run harness pieces that need no torch: plans and splits, data shards, node environments,
collecting a run's logs, labelling, and the programs' fault switch and clocks."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engine.bench.realrun.label import label
from engine.bench.realrun.launch import PROGRAMS, RunResult, _node_env, write_shards
from engine.bench.realrun.layout import log_files, read_job, write_job
from engine.bench.realrun.plan import (
    SAVE_EVERY,
    SEQ,
    STEPS,
    WAVE2_STEPS,
    WAVE3_STEPS,
    WAVE3_STYLES,
    WAVE5_STEPS,
    WAVE5_STYLES,
    WAVE6_STEPS,
    WAVE6_STYLES,
    WAVE7_STEPS,
    WAVE7_STYLES,
    assign_splits,
    case_plans,
    kinds,
    plan_run,
    split_of,
)

STAGES = {"init", "data_loading", "model_loading", "training", "checkpointing", "teardown"}


def test_the_corpus_plan_covers_every_stage_with_two_cases_per_kind_in_both_halves():
    plans = case_plans()
    spec = kinds()["kinds"]
    assert len(spec) >= 14
    assert {spec[k]["stage"] for k in spec} == STAGES
    per_kind = Counter(p.kind for p in plans)
    assert set(per_kind.values()) == {2}
    assert {p.style for p in plans} == {"ddp", "megatron", "hf"}
    splits = assign_splits({p.name: p.kind for p in plans})
    for kind in spec:
        assert {splits[p.name] for p in plans if p.kind == kind} == {"dev", "test"}
    # fixed by hashes, not by the order of the call
    assert assign_splits(dict(reversed(list({p.name: p.kind for p in plans}.items())))) == splits


def test_plans_are_deterministic_and_place_the_fault():
    a = plan_run("rank_sigkill-ddp-1", "ddp", "rank_sigkill", seed=1)
    assert a == plan_run("rank_sigkill-ddp-1", "ddp", "rank_sigkill", seed=1)
    assert len(a.nodes) == 4 and a.world == 8 and a.scope == "local" and len(a.fault_locals) == 1
    assert a.step % a.save_every and 0 < a.step < a.steps
    after = plan_run("x", "ddp", "fail_after_ckpt", seed=3)
    assert after.step % after.save_every == 1
    assert plan_run("p", "ddp", "port_in_use", seed=2).fault_node == 0
    assert plan_run("r", "ddp", "rendezvous_timeout", seed=2).fault_node != 0
    # every plan has a node logging with a non-UTC offset
    assert any(tz != "UTC" and fmt == "iso_offset" for tz, fmt in a.clocks)


def test_held_out_wave_2_varies_the_run_and_leaves_the_first_cases_as_they_were():
    first = plan_run("nan_loss-megatron-1", "megatron", "nan_loss", seed=1, variant=0)
    assert (first.wave, first.steps, first.prefix) == (1, STEPS, "default")
    plans = [p for p in case_plans(per_kind=4) if p.wave == 2]
    assert {p.name.rsplit("-", 1)[1] for p in plans} == {"3", "4"}
    assert {p.steps for p in plans} <= set(WAVE2_STEPS) and {p.prefix for p in plans} == {"default", "rank"}
    assert "lightning" in {p.style for p in plans}
    assert any(fmt == "none" for p in plans for _, fmt in p.clocks)  # timestamps off on some nodes
    for p in plans:
        assert 0 < p.step < p.steps or p.step == -1
    # each wave-2 case's half comes from its own name's hash: about half each, never from the order
    halves = Counter(split_of(p.name) for p in plans)
    assert halves.keys() == {"dev", "test"} and min(halves.values()) >= len(plans) // 3
    assert split_of("nan_loss-ddp-3") == split_of("nan_loss-ddp-3")


def test_held_out_wave_3_runs_every_kind_in_the_new_styles_only():
    plans = [p for p in case_plans(per_kind=6) if p.wave == 3]
    assert {p.name.rsplit("-", 1)[1] for p in plans} == {"5", "6"}
    assert {p.kind for p in plans} == set(kinds()["kinds"])
    styles = Counter(p.style for p in plans)
    assert styles.keys() == set(WAVE3_STYLES) and min(styles.values()) >= len(plans) // 3
    assert {p.steps for p in plans} <= set(WAVE3_STEPS) and {p.prefix for p in plans} == {"default", "rank"}
    assert {p.layout for p in plans} == {"console", "logdir"}
    assert all(fmt == "none" for p in plans if p.style == "nanogpt" for _, fmt in p.clocks)
    for p in plans:
        assert 0 < p.step < p.steps or p.step == -1
    # the earlier waves never run the new styles, and their plans are what they were
    earlier = case_plans(per_kind=4)
    assert not {p.style for p in earlier} & set(WAVE3_STYLES)
    assert [p.name for p in earlier] == [p.name for p in case_plans(per_kind=6) if p.wave < 3]


def test_development_wave_4_runs_the_new_styles_with_settings_of_its_own_hash():
    plans = {p.name: p for p in case_plans(per_kind=8)}
    dev = [p for p in plans.values() if p.wave == 4]
    assert {p.name.rsplit("-", 1)[1] for p in dev} == {"7", "8"}
    assert {p.style for p in dev} == set(WAVE3_STYLES) and {p.kind for p in dev} == set(kinds()["kinds"])
    assert {p.steps for p in dev} <= set(WAVE3_STEPS) and {p.layout for p in dev} == {"console", "logdir"}
    assert all(fmt == "none" for p in dev if p.style == "nanogpt" for _, fmt in p.clocks)
    # another salt: the settings are not wave 3's draws under a new name
    w3 = [p for p in plans.values() if p.wave == 3]
    assert [(p.steps, p.save_every, p.prefix, p.nodes) for p in dev[:10]] != \
        [(p.steps, p.save_every, p.prefix, p.nodes) for p in w3[:10]]
    # the earlier waves' plans are what they were
    assert [p.name for p in case_plans(per_kind=6)] == [p.name for p in plans.values() if p.wave < 4]


def test_held_out_wave_5_runs_every_kind_in_its_own_styles_some_with_elastic_restarts():
    from engine.bench.realrun.plan import NO_RESTART_KINDS

    plans = case_plans(per_kind=12)
    w5 = [p for p in plans if p.wave == 5]
    assert {p.name.rsplit("-", 1)[1] for p in w5} == {"11", "12"} and 24 <= len(w5) <= 28
    assert {p.kind for p in w5} == set(kinds()["kinds"])
    styles = Counter(p.style for p in w5)
    assert styles.keys() == set(WAVE5_STYLES) and min(styles.values()) >= len(w5) // 3
    assert {p.steps for p in w5} <= set(WAVE5_STEPS) and {p.layout for p in w5} == {"console", "logdir"}
    assert all(fmt == "none" for p in w5 if p.style == "fabric" for _, fmt in p.clocks)
    restarted = [p for p in w5 if p.restarts]
    assert len(w5) // 5 <= len(restarted) <= len(w5) // 2
    assert not {p.kind for p in restarted} & set(NO_RESTART_KINDS)
    assert all(p.prefix == "default" for p in restarted if p.layout == "console")
    assert {split_of(p.name) for p in w5} == {"dev", "test"}
    # no earlier wave runs the new styles, and their plans are what they were
    assert not {p.style for p in plans if p.wave < 5} & set(WAVE5_STYLES)
    assert [p.name for p in case_plans(per_kind=10)] == [p.name for p in plans if p.wave < 5]
    assert all(p.restarts == 0 for p in plans if p.wave < 5)


def test_held_out_wave_6_runs_every_kind_in_its_own_styles_with_srun_consoles_and_recurring_restarts():
    from engine.bench.realrun.plan import WAVE6_MONITOR_S, WAVE6_RESTART_KINDS

    plans = case_plans(per_kind=14)
    w6 = [p for p in plans if p.wave == 6]
    assert {p.name.rsplit("-", 1)[1] for p in w6} == {"13", "14"} and 24 <= len(w6) <= 28
    assert {p.kind for p in w6} == set(kinds()["kinds"])
    styles = Counter(p.style for p in w6)
    assert styles.keys() == set(WAVE6_STYLES) and min(styles.values()) >= len(w6) // 3
    assert {p.steps for p in w6} <= set(WAVE6_STEPS)
    # DeepSpeed's logger writes naive local time: one zone per job
    assert all(len(set(p.clocks)) == 1 and p.clocks[0][1] == "naive" for p in w6 if p.style == "deepspeed")
    # the two collection shapes no wave had, each on about a third
    slurm = [p for p in w6 if p.layout == "slurm"]
    restarted = [p for p in w6 if p.restarts]
    assert len(w6) // 4 <= len(slurm) <= len(w6) // 2 and len(w6) // 4 <= len(restarted) <= len(w6) // 2
    assert not {p.name for p in slurm} & {p.name for p in restarted}
    assert all(p.prefix == "rank" for p in slurm)
    assert {p.kind for p in restarted} <= set(WAVE6_RESTART_KINDS)
    assert all(p.monitor_interval == WAVE6_MONITOR_S for p in restarted)
    assert all(p.monitor_interval == 0.5 for p in plans if not p.restarts or p.wave < 6)
    # a restarted case's fault lies after its first save: the resumed attempt reaches it again
    assert all(p.step > p.save_every for p in restarted)
    # faults at the final save and in the first step after a save (a resumed attempt's first step)
    saves = [p for p in w6 if kinds()["kinds"][p.kind]["step"] == "save"]
    assert any(p.step == p.steps for p in saves)
    assert any(p.step % p.save_every == 1 for p in restarted if kinds()["kinds"][p.kind]["step"] == "mid")
    assert {split_of(p.name) for p in w6} == {"dev", "test"}
    # no earlier wave runs the new styles, and their plans are what they were
    assert not {p.style for p in plans if p.wave < 6} & set(WAVE6_STYLES)
    assert [p.name for p in case_plans(per_kind=12)] == [p.name for p in plans if p.wave < 6]
    assert all(p.layout != "slurm" for p in plans if p.wave < 6)


def test_held_out_wave_7_runs_every_kind_in_its_own_styles():
    plans = case_plans(per_kind=16)
    w7 = [p for p in plans if p.wave == 7]
    assert {p.name.rsplit("-", 1)[1] for p in w7} == {"15", "16"} and 24 <= len(w7) <= 28
    assert {p.kind for p in w7} == set(kinds()["kinds"])
    styles = Counter(p.style for p in w7)
    assert styles.keys() == set(WAVE7_STYLES) and min(styles.values()) >= len(w7) // 3
    assert {p.steps for p in w7} <= set(WAVE7_STEPS)
    assert {p.layout for p in w7} == {"console", "logdir", "slurm"}
    assert all(p.prefix == "rank" for p in w7 if p.layout == "slurm")
    # the tune style's own lines carry no time (logging's default format): only torchrun's do
    assert all(fmt == "none" for p in w7 if p.style == "tune" for _, fmt in p.clocks)
    assert any(fmt != "none" for p in w7 if p.style == "tp" for _, fmt in p.clocks)
    assert all(p.restarts == 0 for p in w7)
    assert {split_of(p.name) for p in w7} == {"dev", "test"}
    # no earlier wave runs the new styles, and their plans are what they were
    assert not {p.style for p in plans if p.wave < 7} & set(WAVE7_STYLES)
    assert [p.name for p in case_plans(per_kind=14)] == [p.name for p in plans if p.wave < 7]


def test_a_slurm_console_labels_every_rank_line_with_its_global_rank(tmp_path):
    from engine.bench.realrun.layout import is_slurm

    plan = plan_run("exception_step-ddp-1", "ddp", "exception_step", seed=1)
    plan.fault_locals = [1]
    res = _result(tmp_path, plan, "slurm")
    node = plan.nodes[plan.fault_node]
    res.agent_out[node] = AGENT.replace("[default0]:", "[rank2]:").replace("[default1]:", "[rank3]:")
    files = log_files(res)
    assert len(files) == 1 and is_slurm(files[0].rel) and files[0].rel.startswith(f"{node}/slurm-")
    lines = files[0].lines
    assert lines[0].startswith("W1201 ")  # the agent's own lines carry no task label
    assert "3: [rank3]: IndexError: index out of range in self" in lines
    assert not any(ln.startswith("[rank") for ln in lines)
    assert files[0].locals.count(1) == AGENT.count("[default1]:")
    truth = label(plan, files, res.ranks)
    assert truth["root_lines"][-1] == "3: [rank3]: IndexError: index out of range in self"
    assert truth["root_lines"][0] == "3: [rank3]: Traceback (most recent call last):"
    write_job(tmp_path / "job", files, {"job_id": "x"})
    again = read_job(tmp_path / "job", {k: v["rank"] for k, v in res.ranks.items()})
    assert [f.locals for f in again] == [f.locals for f in files]
    assert label(plan, again, res.ranks) == truth


def test_the_committed_cases_are_still_what_their_plans_say():
    from engine.bench.realrun.corpus import plan_of

    corpus = Path(__file__).resolve().parents[2] / "fixtures" / "realrun"
    for path in sorted(corpus.glob("*/truth.json")):
        truth = json.loads(path.read_text())
        plan = plan_of(truth)
        assert list(truth["nodes"]) == plan.nodes, truth["case_id"]
        drawn = (truth.get("steps", STEPS), truth.get("save_every", SAVE_EVERY),  # wave-1 truths predate
                 truth.get("prefix", "default"), truth["layout"], truth.get("wave", 1))  # these keys
        assert drawn == (plan.steps, plan.save_every, plan.prefix, plan.layout, plan.wave), truth["case_id"]
        assert truth["fault"]["step"] == plan.step and truth["fault"]["variant"] == plan.variant


def test_a_console_with_global_rank_prefixes_is_split_by_rank(tmp_path):
    plan = plan_run("exception_step-ddp-1", "ddp", "exception_step", seed=1)
    plan.fault_locals = [1]
    res = _result(tmp_path, plan, "console")
    node = plan.nodes[plan.fault_node]
    res.agent_out[node] = AGENT.replace("[default0]:", "[rank2]:").replace("[default1]:", "[rank3]:")
    files = log_files(res)
    assert files[0].locals.count(1) == AGENT.count("[default1]:")
    truth = label(plan, files, res.ranks)
    assert truth["root_lines"][-1] == "[rank3]:[rank3]: IndexError: index out of range in self"
    write_job(tmp_path / "job", files, {"job_id": "x"})
    again = read_job(tmp_path / "job", {k: v["rank"] for k, v in res.ranks.items()})
    assert [f.locals for f in again] == [f.locals for f in files]


def test_unknown_kinds_and_styles_are_clear_errors():
    with pytest.raises(ValueError, match="unknown real-run fault kind 'nope'"):
        case_plans(["nope"])
    with pytest.raises(ValueError, match="unknown styles"):
        case_plans(None, ["keras"])
    with pytest.raises(ValueError, match="has no 'hf' program"):
        plan_run("x", "hf", "straggler", seed=1)


@pytest.mark.parametrize("variant", [0, 1])
def test_a_corrupt_shard_has_exactly_one_broken_sample(tmp_path, variant):
    import random

    write_shards(tmp_path, random.Random(1), corrupt_local=1, variant=variant)
    good = (tmp_path / "train-00.jsonl").read_text().splitlines()
    assert all(len(json.loads(ln)["tokens"]) == SEQ for ln in good)
    bad = []
    for ln in (tmp_path / "train-01.jsonl").read_text().splitlines():
        try:
            if len(json.loads(ln)["tokens"]) != SEQ:
                bad.append("short")
        except ValueError:
            bad.append("json")
    assert bad == (["json"] if variant == 0 else ["short"])


def test_the_fault_reaches_only_the_faulty_node(tmp_path):
    plan = plan_run("import_error-ddp-1", "ddp", "import_error", seed=1)
    envs = [_node_env(plan, i, tmp_path, 29500, None) for i in range(len(plan.nodes))]
    for i, env in enumerate(envs):
        assert env["L4RR_HOSTNAME"] == plan.nodes[i] and env["TZ"] == plan.clocks[i][0]
        assert ("L4RR_FAULT" in env) == (i == plan.fault_node)
    stale = tmp_path / "site" / plan.nodes[plan.fault_node] / "fused_ops" / "__init__.py"
    assert "torch._six" in stale.read_text()
    shape = plan_run("shape_mismatch-ddp-1", "ddp", "shape_mismatch", seed=1)
    hidden = [_node_env(shape, i, tmp_path / "s", 1, None)["L4RR_HIDDEN"] for i in range(4)]
    assert len(set(hidden)) == 2 and hidden.count(hidden[shape.fault_node]) == 1
    ckpt = tmp_path / "resume.pt"
    ckpt.write_bytes(b"PK" + bytes(3000))
    corrupt = plan_run("ckpt_load_corrupt-ddp-1", "ddp", "ckpt_load_corrupt", seed=1)
    sizes = [Path(_node_env(corrupt, i, tmp_path / "c", 1, ckpt)["L4RR_RESUME"]).stat().st_size
             for i in range(4)]
    assert sizes.count(3002) == 3 and sizes[corrupt.fault_node] == 1000
    state = tmp_path / "step_8"  # accelerate's save_state folder: its weights are cut on the faulty node
    state.mkdir()
    (state / "model.safetensors").write_bytes(bytes(900))
    (state / "optimizer.bin").write_bytes(bytes(2000))
    folder = plan_run("ckpt_load_corrupt-accelerate-5", "accelerate", "ckpt_load_corrupt", seed=5)
    dirs = [Path(_node_env(folder, i, tmp_path / "a", 1, state)["L4RR_RESUME"]) for i in range(4)]
    assert all(d.name == "step_8" and (d / "optimizer.bin").stat().st_size == 2000 for d in dirs)
    assert [(d / "model.safetensors").stat().st_size for d in dirs].count(900) == 3
    assert (dirs[folder.fault_node] / "model.safetensors").stat().st_size == 300


def test_the_programs_fault_switch_and_clocks_without_torch():
    code = ("import _chaos as C; print(C.stamp(0)); print(C.active('host_oom', 5), C.active('host_oom', 6),"
            " C.active('rank_sigkill'))")
    base = {k: v for k, v in os.environ.items() if not k.startswith("L4RR_") and k != "RANK"}
    def run(**env: str) -> list[str]:
        full = {**base, "PYTHONPATH": str(PROGRAMS), **env}
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env=full).stdout.split("\n")

    out = run(TZ="Asia/Shanghai", L4RR_TSFMT="iso_offset", L4RR_FAULT="host_oom", L4RR_FAULT_SCOPE="local",
              L4RR_FAULT_LOCAL="1", LOCAL_RANK="1", L4RR_FAULT_STEP="5")
    assert out[0] == "1970-01-01T08:00:00.000+08:00" and out[1] == "True False False"
    out = run(TZ="UTC", L4RR_TSFMT="iso_z", L4RR_FAULT="host_oom", L4RR_FAULT_SCOPE="local",
              L4RR_FAULT_LOCAL="1", LOCAL_RANK="0", L4RR_FAULT_STEP="5")
    assert out[0] == "1970-01-01T00:00:00.000Z" and out[1] == "False False False"
    out = run(TZ="America/Los_Angeles", L4RR_TSFMT="naive")
    assert out[0] == "1969-12-31 16:00:00,000"


AGENT = """W1201 16:41:40.100000 100 torch/distributed/run.py:865] node_rank is only used for static rdzv.
[default0]:2026-12-01T16:41:41.000+08:00 INFO [rank2] trainer: step 3/24 loss=4.5 lr=1e-3
[default1]:2026-12-01T16:41:41.001+08:00 INFO [rank3] trainer: step 3/24 loss=4.4 lr=1e-3
[default1]:[rank3]: Traceback (most recent call last):
[default1]:[rank3]:   File "/job/code/train.py", line 9, in <module>
[default1]:[rank3]:     logits = model(x)
[default1]:[rank3]: IndexError: index out of range in self
[default0]:[rank2]: Traceback (most recent call last):
[default0]:[rank2]:   File "/job/code/train.py", line 12, in <module>
[default0]:[rank2]:     dist.all_reduce(t)
[default0]:[rank2]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:1234.
W1201 16:41:42.000000 100 torch/distributed/elastic/api.py:1028] Sending process 7 closing signal SIGTERM
E1201 16:41:42.100000 100 torch/distributed/elastic/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 8)
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-01_16:41:42
  host      : gpu-node-02
  rank      : 3 (local_rank: 1)
  exitcode  : 1 (pid: 8)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def _result(tmp_path, plan, layout):
    plan.layout = layout
    node = plan.nodes[plan.fault_node]
    logdir = tmp_path / "logs" / node
    if layout == "logdir":
        for local in (0, 1):
            d = logdir / "job_abc" / "attempt_0" / str(local)
            d.mkdir(parents=True)
            body = [ln.split(":", 1)[1] for ln in AGENT.splitlines() if ln.startswith(f"[default{local}]:")]
            (d / "stderr.log").write_text("\n".join(body) + "\n")
            (d / "stdout.log").write_text("")
    ranks = {(node, 0): {"rank": 2, "pid": 7}, (node, 1): {"rank": 3, "pid": 8}}
    return RunResult(plan, tmp_path, {node: AGENT}, {node: logdir}, ranks)


@pytest.mark.parametrize("layout", ["console", "logdir"])
def test_labels_root_traceback_context_and_cascade(tmp_path, layout):
    plan = plan_run("exception_step-ddp-1", "ddp", "exception_step", seed=1)
    plan.fault_locals = [1]
    res = _result(tmp_path, plan, layout)
    files = log_files(res)
    node = plan.nodes[plan.fault_node]
    if layout == "console":
        assert [f.rel for f in files] == [f"{node}/torchrun.log"]
    else:
        assert [f.rel for f in files] == [f"{node}/launcher.log", f"{node}/job_abc/attempt_0/0/stderr.log",
                                          f"{node}/job_abc/attempt_0/1/stderr.log"]  # empty stdout dropped
    truth = label(plan, files, res.ranks)
    pre = "[default1]:" if layout == "console" else ""
    assert truth["root_lines"] == [pre + "[rank3]: Traceback (most recent call last):",
                                   pre + '[rank3]:   File "/job/code/train.py", line 9, in <module>',
                                   pre + "[rank3]:     logits = model(x)",
                                   pre + "[rank3]: IndexError: index out of range in self"]
    message = pre + "[rank3]: IndexError: index out of range in self"
    assert truth["indicating"] == [{"key": "exception_step", "lines": [message]}]
    cascade = truth["cascade_lines"]
    other = "[default0]:" if layout == "console" else ""
    assert other + "[rank2]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:1234." \
        in cascade
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:" in cascade
    assert "  rank      : 3 (local_rank: 1)" in cascade and "train.py FAILED" in cascade
    assert not any("step 3/24" in ln for ln in cascade + truth["context_lines"])
    write_job(tmp_path / "job", files, {"job_id": "x"})
    assert all(p.suffix == ".gz" for p in (tmp_path / "job").rglob("*.log*"))
    again = read_job(tmp_path / "job")  # what `l4 bench realrun relabel` labels
    assert [(f.rel, f.lines, f.locals) for f in again] == [(f.rel, f.lines, f.locals) for f in files]
    assert label(plan, again, res.ranks) == truth


RESTART_LINE = ("I1201 09:00:06.600000 1083 torch/distributed/elastic/agent/server/api.py:944] [default] "
                "Worker group FAILED. 1/1 attempts left; will restart worker group")


def test_a_restarted_logdir_roots_the_first_attempt_folder_only(tmp_path):
    import shutil

    plan = plan_run("exception_step-ddp-1", "ddp", "exception_step", seed=1)
    plan.fault_locals = [1]
    res = _result(tmp_path, plan, "logdir")
    node = plan.nodes[plan.fault_node]
    run = tmp_path / "logs" / node / "job_abc"
    shutil.copytree(run / "attempt_0", run / "attempt_1")  # torchrun's --log-dir: a folder per attempt
    err = run / "attempt_1" / "1" / "stderr.log"
    err.write_text(err.read_text().replace("in self", "in self (again)"))
    res.agent_out[node] = AGENT.replace("Traceback (most recent call last):\n  File \"/venv",
                                        RESTART_LINE + "\nTraceback (most recent call last):\n  File \"/venv")
    files = log_files(res)
    assert [f.rel for f in files][1:] == [f"{node}/job_abc/attempt_{n}/{loc}/stderr.log"
                                          for loc in (0, 1) for n in (0, 1)]
    truth = label(plan, files, res.ranks)
    assert truth["root_lines"][-1] == "[rank3]: IndexError: index out of range in self"
    assert not any("(again)" in ln for ln in truth["root_lines"] + truth["cascade_lines"])
    assert "[rank3]: IndexError: index out of range in self (again)" in truth["context_lines"]


def test_a_restarted_console_roots_the_first_attempt_only(tmp_path):
    plan = plan_run("exception_step-ddp-1", "ddp", "exception_step", seed=1)
    plan.fault_locals = [1]
    res = _result(tmp_path, plan, "console")
    node = plan.nodes[plan.fault_node]
    again = AGENT.replace("index out of range in self", "index out of range in self (again)")
    res.agent_out[node] = AGENT + RESTART_LINE + "\n" + again
    truth = label(plan, log_files(res), res.ranks)
    assert truth["root_lines"][-1] == "[default1]:[rank3]: IndexError: index out of range in self"
    assert not any("(again)" in ln for ln in truth["root_lines"] + truth["cascade_lines"])
    assert "[default1]:[rank3]: IndexError: index out of range in self (again)" in truth["context_lines"]


def test_a_killed_rank_is_found_in_its_launchers_lines(tmp_path):
    plan = plan_run("rank_sigkill-ddp-1", "ddp", "rank_sigkill", seed=1)
    plan.fault_locals = [1]
    text = AGENT.replace("failed (exitcode: 1) local_rank: 1", "failed (exitcode: -9) local_rank: 1").replace(
        "  exitcode  : 1 (pid: 8)", "  exitcode  : -9 (pid: 8)  (SIGKILL)").replace(
        "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "Signal 9 (SIGKILL) received by PID 8")
    res = _result(tmp_path, plan, "console")
    res.agent_out[plan.nodes[plan.fault_node]] = text
    truth = label(plan, log_files(res), res.ranks)
    assert len(truth["root_lines"]) == 3 and all("-9" in ln or "Signal 9" in ln for ln in truth["root_lines"])


def test_generate_refuses_unknown_cases_before_running_anything(tmp_path):
    from engine.bench.realrun.corpus import generate

    with pytest.raises(ValueError, match="no such cases: nope-ddp-1"):
        generate(tmp_path / "out", cases=["nope-ddp-1"])
    assert not (tmp_path / "out" / "_history").exists()


def test_wave_views_list_each_waves_cases_beside_the_corpus(tmp_path):
    from engine.bench.evaluate import case_dirs
    from engine.bench.realrun.corpus import write_wave_views

    rows = []
    for name in ("nan_loss-ddp-1", "nan_loss-hf-2", "nan_loss-ddp-3", "nan_loss-lightning-4",
                 "nan_loss-nanogpt-6", "nan_loss-accelerate-7", "nan_loss-fabric-11", "nan_loss-fsdp2-13",
                 "nan_loss-tp-15"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "truth.json").write_text(json.dumps({"case_id": name, "split": "dev"}))
        rows.append({"case_id": name, "path": name})
    (tmp_path / "cases.json").write_text(json.dumps(rows))
    assert write_wave_views(tmp_path) == {1: 2, 2: 2, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1}
    assert [d.name for d in case_dirs(tmp_path / "_wave2")] == ["nan_loss-ddp-3", "nan_loss-lightning-4"]
    assert [d.name for d in case_dirs(tmp_path / "_wave3")] == ["nan_loss-nanogpt-6"]
    assert [d.name for d in case_dirs(tmp_path / "_wave4")] == ["nan_loss-accelerate-7"]
    assert [d.name for d in case_dirs(tmp_path / "_wave5")] == ["nan_loss-fabric-11"]
    assert [d.name for d in case_dirs(tmp_path / "_wave6")] == ["nan_loss-fsdp2-13"]
    assert [d.name for d in case_dirs(tmp_path / "_wave7")] == ["nan_loss-tp-15"]
    assert len(case_dirs(tmp_path)) == 9  # the views are not cases of the corpus

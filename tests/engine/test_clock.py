import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import jsonschema

from engine.diagnose import diagnose
from tests.engine.test_diagnose import SCHEMA
from tests.helpers.jobs import write_rank

T0 = datetime(2023, 11, 29, 10, 0, 0, tzinfo=UTC)


def _stamp(t: datetime, tz: timezone | None = None, naive: bool = False) -> str:
    local = t.astimezone(tz or UTC)
    s = local.strftime("%Y-%m-%d %H:%M:%S")
    if naive:
        return s
    return s + ("Z" if tz is None else local.strftime("%z"))


def _ranks(root, nodes=4, *, tz_of=lambda n: None, naive_shift=lambda n: timedelta(0), fault_node=1,
           back_at: int | None = None):
    """Each rank logs start-up lines and 20 iterations a minute apart; `fault_node` then fails."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.json").write_text(json.dumps({"job_id": root.name, "status": "failed"}))
    for n in range(nodes):
        lines = []
        t = T0
        start = ["initializing torch distributed", "NCCL version 2.18.1", "building train dataset",
                 "Start training"]
        for k, msg in enumerate(start):
            lines.append((t + timedelta(seconds=k), msg))
        for it in range(1, 21):
            when = t + timedelta(minutes=it)
            if back_at is not None and n == 0 and it >= back_at:
                when -= timedelta(hours=1)
            lines.append((when, f"iteration {it}/ 100 | lm loss: 2.{it:02d} |"))
        back = timedelta(hours=1) if back_at is not None and n == 0 else timedelta(0)
        end = t + timedelta(minutes=21) - back
        lines.append((end, "RuntimeError: CUDA error: an illegal memory access was encountered"
                      if n == fault_node else "Watchdog caught collective operation timeout"))
        shift = naive_shift(n)
        text = [f"{_stamp(w + shift, tz_of(n), naive=bool(shift))} {m}" for w, m in lines]
        write_rank(root / f"node-{n}" / f"rank-{n}.log", text)
    return root


def test_offsets_are_honoured_across_nodes(tmp_path):
    east = timezone(timedelta(hours=8))
    job = _ranks(tmp_path / "job", tz_of=lambda n: east if n in (0, 1) else None)
    d = diagnose(job)
    assert d.clock == []
    assert d.events[0].template.startswith("RuntimeError: CUDA error")
    assert d.events[0].first_seen == "2023-11-29T10:21:00Z"
    assert d.stage == "training"
    jsonschema.validate(d.to_dict(), SCHEMA)
    assert "clock" not in d.to_dict()


def test_a_node_logging_local_time_without_offset_is_read_in_its_zone_not_called_skewed(tmp_path):
    job = _ranks(tmp_path / "job", naive_shift=lambda n: timedelta(hours=8) if n == 2 else timedelta(0))
    d = diagnose(job)
    assert [(c.kind, c.node, c.seconds) for c in d.clock] == [("zone", "node-2", 8 * 3600)]
    assert "8 h 00 min ahead" in d.clock[0].note and "UTC+08:00" in d.clock[0].note
    assert d.events[0].first_seen == "2023-11-29T10:21:00Z"
    assert d.stage == "training"
    jsonschema.validate(d.to_dict(), SCHEMA)


def test_nodes_of_two_zones_all_without_offsets_are_put_on_one_clock(tmp_path):
    naive = timedelta(microseconds=1)  # every node naive (the stamps print whole seconds)
    job = _ranks(tmp_path / "job", naive_shift=lambda n: timedelta(hours=-5) if n in (1, 3) else naive)
    d = diagnose(job)
    assert [(c.kind, c.node, c.seconds) for c in d.clock] == [("zone", "node-1", -5 * 3600),
                                                              ("zone", "node-3", -5 * 3600)]
    assert d.events[0].first_seen == "2023-11-29T10:21:00Z"


def test_a_clock_off_by_minutes_is_still_a_skew(tmp_path):
    off = timedelta(minutes=7, seconds=20)
    job = _ranks(tmp_path / "job", naive_shift=lambda n: off if n == 2 else timedelta(0))
    d = diagnose(job)
    assert [(c.kind, c.node) for c in d.clock] == [("skew", "node-2")]
    assert d.clock[0].seconds == off.total_seconds()
    assert "7 min 20 s ahead" in d.clock[0].note


def test_a_clock_that_goes_backwards_is_noted_and_the_stage_read_from_the_lines(tmp_path):
    job = _ranks(tmp_path / "job", back_at=5, fault_node=0)
    d = diagnose(job)
    assert ("backwards", "node-0") in [(c.kind, c.node) for c in d.clock]
    assert d.stage == "training"
    out = d.to_dict()
    jsonschema.validate(out, SCHEMA)
    assert out["clock"][0]["seconds"] < 0


def test_yearless_stamps_take_the_jobs_year_not_the_machines(tmp_path):
    job = _ranks(tmp_path / "job")
    write_rank(job / "node-1" / "kernel.log", [
        "Nov 29 10:20:30 gpu7 kernel: NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.",
    ])
    d = diagnose(job)
    xid = next(e for e in d.events if "Xid" in e.template)
    assert xid.first_seen == "2023-11-29T10:20:30Z"
    assert d.events[0] is xid  # it comes first in time, and it is the severest


IST = timezone(timedelta(hours=5, minutes=30))


def _glog(t: datetime, tz: timezone, msg: str) -> str:
    """A torchrun agent's line: glog-style, naive local time, no year."""
    return t.astimezone(tz).strftime("W%m%d %H:%M:%S.000000 4242 torch/distributed/run.py:865] ") + msg


def _mixed_node(tz: timezone, *, fails: bool, layout: str = "console") -> dict[str, list[str]]:
    """One node: the launcher's naive local lines around the program's offset-aware ones (in one
    console, or the launcher's own log beside the rank's file), 12 iterations a minute apart."""
    agent = [_glog(T0, tz, "Starting elastic_operator with launch configs"),
             _glog(T0 + timedelta(seconds=2), tz, "Rendezvous complete for workers")]
    setup = ["initializing torch distributed", "building train dataset", "Start training"]
    prog = [f"{_stamp(T0 + timedelta(seconds=20 + k), tz)} - INFO - {m}" for k, m in enumerate(setup)]
    prog += [f"{_stamp(T0 + timedelta(minutes=it), tz)} - INFO - iteration {it}/ 100 | lm loss: 2.{it:02d} |"
             for it in range(1, 13)]
    end = T0 + timedelta(minutes=12, seconds=30)
    error = ("RuntimeError: CUDA error: an illegal memory access" if fails
             else "Watchdog caught collective operation timeout")
    prog.append(f"{_stamp(end, tz)} - ERROR - {error}")
    agent += [_glog(end + timedelta(seconds=5), tz, "Sending process 4243 closing signal SIGTERM"),
              _glog(end + timedelta(seconds=6), tz, "failed (exitcode: 1) local_rank: 0 (pid: 4243)")]
    if layout == "console":
        return {"console.log": agent[:2] + prog + agent[2:]}
    return {"launcher.log": agent, "rank0/stderr.log": prog}


def _mixed_job(root, zones: list[timezone], layout: str = "console", fault_node: int = 1):
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.json").write_text(json.dumps({"job_id": root.name, "status": "failed"}))
    for n, tz in enumerate(zones):
        for name, lines in _mixed_node(tz, fails=n == fault_node, layout=layout).items():
            write_rank(root / f"node-{n}" / name, lines)
    return root


def test_naive_launcher_stamps_are_read_in_the_zone_of_the_nodes_aware_stamps(tmp_path):
    job = _mixed_job(tmp_path / "job", [IST, IST, UTC, UTC])
    d = diagnose(job)
    assert [(c.kind, c.node, c.seconds) for c in d.clock] == [("zone", "node-0", 19800.0),
                                                              ("zone", "node-1", 19800.0)]
    assert "UTC+05:30" in d.clock[0].note
    assert d.events[0].template.startswith("RuntimeError: CUDA error")
    assert d.events[0].first_seen == "2023-11-29T10:12:30Z"
    assert d.stage == "training"
    jsonschema.validate(d.to_dict(), SCHEMA)


def test_a_launcher_log_beside_the_rank_files_is_read_in_the_nodes_zone_too(tmp_path):
    job = _mixed_job(tmp_path / "job", [UTC, IST, timezone(timedelta(hours=-5)), UTC], layout="logdir")
    d = diagnose(job)
    assert [(c.kind, c.node, c.seconds) for c in d.clock] == [("zone", "node-1", 19800.0),
                                                              ("zone", "node-2", -18000.0)]
    assert "UTC-05:00" in d.clock[1].note


def test_nodes_whose_naive_stamps_already_fit_get_no_zone_note(tmp_path):
    d = diagnose(_mixed_job(tmp_path / "job", [UTC, UTC, UTC]))
    assert d.clock == []


REAL = Path(__file__).parents[1] / "fixtures" / "realrun" / "_wave3" / "exception_step-accelerate-5"


def test_a_real_accelerate_run_mixing_zones_is_read_without_a_clock_going_back():
    """Real run (dev half of wave 3): accelerate's logger writes +01:00 / +05:30 on three nodes, the
    torchrun agent beside it naive local time (``--log-dir`` layout: launcher.log beside the ranks')."""
    assert json.loads((REAL / "truth.json").read_text())["split"] == "dev"
    d = diagnose(REAL / "failed")
    # the fourth node's accelerate logger writes naive US-format local time ("12/01/2026 09:50:37",
    # read since w6-rootx) and no offset anywhere: 5 h behind the others, whole hours, so another zone
    assert {(c.kind, c.node, round(c.seconds)) for c in d.clock} == {
        ("zone", "ip-10-1-2-23", 3600), ("zone", "ip-10-1-3-23", 3600), ("zone", "ip-10-1-5-23", 19800),
        ("zone", "ip-10-1-4-23", -18000)}
    assert d.stage == "training"


def test_one_aware_event_among_naive_launcher_lines_settles_the_zone_by_line_order(tmp_path):
    """A torchrun console (real runs of wave 1): the agent's glog lines naive local time, the program's
    iteration lines (one event) with +08:00 between them; read in UTC the clock would seem to go back."""
    root = tmp_path / "job"
    root.mkdir()
    (root / "job.json").write_text(json.dumps({"job_id": "j", "status": "failed"}))
    cst = timezone(timedelta(hours=8))
    for n in range(2):
        t = T0.astimezone(cst)
        lines = [f"W1129 {t:%H:%M:%S}.100000 4242 torch/distributed/run.py:865] node_rank is only used here"]
        for k in range(1, 9):
            at = (t + timedelta(seconds=10 * k)).isoformat(timespec="milliseconds")
            lines.append(f"[default0]:{at} iteration {k}/ 100 | lm loss: 2.{k:02d} |")
        end = t + timedelta(seconds=95)
        lines.append(f"E1129 {end:%H:%M:%S}.500000 4242 elastic/multiprocessing/api.py:1002] failed "
                     "(exitcode: 1) local_rank: 0 (pid: 4243) of binary: python3")
        write_rank(root / f"node-{n}" / "torchrun.log", lines)
    d = diagnose(root)
    assert [c.kind for c in d.clock] == ["zone", "zone"]  # no clock going back by 8 h
    assert all(c.seconds == 28800.0 for c in d.clock)

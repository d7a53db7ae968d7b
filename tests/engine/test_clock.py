import json
from datetime import UTC, datetime, timedelta, timezone

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


def test_a_node_logging_local_time_without_offset_is_noted_as_skewed(tmp_path):
    job = _ranks(tmp_path / "job", naive_shift=lambda n: timedelta(hours=8) if n == 2 else timedelta(0))
    d = diagnose(job)
    assert [(c.kind, c.node) for c in d.clock] == [("skew", "node-2")]
    assert d.clock[0].seconds == 8 * 3600
    assert "8 h 00 min ahead" in d.clock[0].note
    jsonschema.validate(d.to_dict(), SCHEMA)


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

"""`l4 learn` a succeeded job, then `l4 diagnose` a failed one without --history: noise that both
log is filtered although the separate parses generalised it differently (CLI in subprocesses)."""
import json
import os
import sqlite3
import subprocess
import sys

from tests.helpers.jobs import insert_lines, make_job
from tests.helpers.wait import WAIT

NOISE = "NCCL WARN NET/IB : Got completion with error {n} during {op} of store key"


def _l4(*args: str, db) -> subprocess.CompletedProcess:  # noqa: ANN001
    env = {**os.environ, "L4_DATABASE_URL": f"sqlite:///{db}"}
    return subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True,
                          env=env, timeout=WAIT)


def _noise(ops: list[str]):  # noqa: ANN202
    return lambda rank: [f"[rank{rank}]: [2026-05-01 10:00:0{i},000] " + NOISE.format(n=rank * 3 + i, op=op)
                         for i, op in enumerate(ops)]


def test_pool_from_a_separate_parse_filters_common_noise(tmp_path):
    db = tmp_path / "kb.db"
    ok = make_job(tmp_path / "ok", status="succeeded", fault_node=None)
    insert_lines(ok, 0, _noise(["get", "set", "wait"]))  # this parse masks the operation
    failed = make_job(tmp_path / "failed", fault_node=2)
    insert_lines(failed, 0, _noise(["get"]))  # this one keeps it: "... during get of store key"

    before = _l4("diagnose", str(failed), "--format", "json", "--no-match", db=db)
    assert before.returncode == 0, before.stderr
    noise_events = [e["template"] for e in json.loads(before.stdout)["events"] if "NET/IB" in e["template"]]
    assert noise_events  # without a pool the noise is reported

    r = _l4("learn", str(ok), db=db)
    assert r.returncode == 0, r.stderr
    pool = {t for (t,) in sqlite3.connect(db).execute("SELECT template FROM normal_event")}
    assert not set(noise_events) & pool  # the pool's text differs: exact comparison would keep it

    r = _l4("diagnose", str(failed), "--format", "json", db=db)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    fault = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
    assert [e["template"] for e in d["events"]] == [fault]
    # nor does the noise match a knowledge-base pattern (an InfiniBand fault) any more
    assert [m["pattern_id"] for m in d["matches"]] == ["cuda-uncorrectable-ecc"]

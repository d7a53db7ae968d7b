import json
import os
import subprocess
import sys

from tests.helpers.jobs import make_job
from tests.helpers.wait import WAIT


def run_l4(*args, env=None, db=None):
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("L4_DATABASE_URL", f"sqlite:///{db}" if db else "sqlite://")
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args], capture_output=True, text=True, env=full_env, timeout=WAIT
    )


def test_missing_folder_exits_2_with_one_line(tmp_path):
    r = run_l4("diagnose", str(tmp_path / "nope"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "no such job folder" in r.stderr


def test_empty_folder_exits_2(tmp_path):
    r = run_l4("diagnose", str(tmp_path))
    assert r.returncode == 2 and "no log files" in r.stderr


def test_unknown_job_id_and_traversal(tmp_path):
    r = run_l4("diagnose", "job-404", env={"L4_LOG_ROOT": str(tmp_path)})
    assert r.returncode == 2 and "unknown job 'job-404'" in r.stderr
    r = run_l4("diagnose", "../no-such-job-xyz", env={"L4_LOG_ROOT": str(tmp_path / "x")})
    assert r.returncode == 2 and "no such job folder" in r.stderr


def test_json_output_by_job_id(tmp_path):
    make_job(tmp_path / "job-0042", nodes=3, fault_node=0)
    r = run_l4("diagnose", "job-0042", "--format", "json", "--no-match", env={"L4_LOG_ROOT": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["schema"] == "l4.diagnosis/v1" and d["job_id"] == "job-0042"
    assert d["nodes"][0]["node"] == "node-000"


def test_text_and_html(tmp_path):
    job = make_job(
        tmp_path / "j",
        nodes=3,
        fault_node=0,
        fault_lines=("RuntimeError: boom <!channel> <script>alert(1)</script>",),
    )
    r = run_l4("diagnose", str(job))
    assert r.returncode == 0 and "Failure-indicating events" in r.stdout
    r = run_l4("diagnose", str(job), "--format", "html")
    assert r.returncode == 0 and "<script>alert" not in r.stdout and "&lt;script&gt;" in r.stdout


def test_rank_file_without_newline(tmp_path):
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "r0.log").write_bytes(
        b"RuntimeError: CUDA error: an illegal memory access was encountered"
    )
    r = run_l4("diagnose", str(tmp_path / "j"), "--format", "json")
    assert r.returncode == 0
    assert json.loads(r.stdout)["events"][0]["examples"] == [
        "RuntimeError: CUDA error: an illegal memory access was encountered"
    ]


def test_second_job_with_a_known_fault_is_matched(tmp_path):
    db = tmp_path / "kb.db"
    fault = ("NVRM: Xid (PCI:0000:06:00): 79, pid=1234, name=python, GPU has fallen off the bus.",)
    make_job(tmp_path / "a", nodes=3, fault_node=1, fault_lines=fault)
    r = run_l4("diagnose", str(tmp_path / "a"), "--format", "json", db=db)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["status"] == "matched" and d["matches"][0]["category"] == "hardware/accelerator"
    r = run_l4("diagnose", str(tmp_path / "a"), "--format", "json", "--no-match", db=db)
    assert json.loads(r.stdout)["status"] == "analyzed"

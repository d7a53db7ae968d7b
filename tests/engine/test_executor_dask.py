"""The Dask executor against a real LocalCluster (2 worker processes)."""
import functools
import json
import random
import subprocess
import sys

import pytest

distributed = pytest.importorskip("distributed")

from bot.cluster import parse_on_cluster  # noqa: E402
from engine.bench.generate import generate_case  # noqa: E402
from engine.decoration import learn_job  # noqa: E402
from engine.diagnose import analyze  # noqa: E402
from engine.executor_dask import DaskExecutor, DaskUnavailable, analyse_on_worker  # noqa: E402
from engine.executors import InProcessExecutor, PoolExecutor  # noqa: E402
from engine.ingest import JobError, RankFile, discover  # noqa: E402
from engine.job_analysis import analyse_job  # noqa: E402
from engine.parse import parse_jobs  # noqa: E402
from engine.scan import head_decoration, head_lines, scan_planned  # noqa: E402
from tests.helpers.dying_worker import call_or_die_once  # noqa: E402
from tests.helpers.jobs import write_failed_job, write_rank  # noqa: E402
from tests.helpers.wait import WAIT  # noqa: E402

UNREACHABLE = "tcp://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(scope="module")
def cluster():
    # a free port for the scheduler's HTTP server (None still binds 8787, which parallel runs share)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0", host="127.0.0.1", silence_logs=40) as c:
        yield c


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask-cases")
    rng = random.Random(3)
    out = []
    for kind, style in (("xid79", "megatron"), ("nccl_timeout", "deepspeed")):
        try:
            generate_case(root / kind, kind, style, rng, nodes=4, ranks_per_node=2, iterations=30)
        except (KeyError, ValueError):
            continue
        out.append(root / kind)
    assert out
    return out


def _json(case, executor, jobs=None) -> str:
    history = sorted(p for p in case.iterdir() if p.name.startswith("history"))
    parsed = parse_jobs(jobs or [case / "failed", *history], executor=executor)
    d = analyze(parsed[0], parsed[1:]).to_dict(detail=True)
    d["stats"]["seconds"] = 0
    return json.dumps(d, sort_keys=True)


def test_diagnoses_are_byte_identical_to_in_process(cluster, cases):
    with DaskExecutor(cluster.scheduler_address) as ex:
        assert ex.workers == 2
        for case in cases:
            assert _json(case, ex) == _json(case, InProcessExecutor())


class _KillOnce(DaskExecutor):
    """Kills a worker the first time it runs a task of the map of `during` (one of parse_jobs' steps)."""

    def __init__(self, *args, marker: str, during, **kw):
        super().__init__(*args, **kw)
        self.marker, self.during = marker, during

    def map(self, fn, items):
        if fn is self.during:
            fn = functools.partial(call_or_die_once, self.marker, fn)
        return super().map(fn, items)


@pytest.mark.parametrize("during", [head_decoration, scan_planned], ids=["head-pass", "scan"])
def test_a_worker_killed_mid_job_changes_nothing(cluster, cases, tmp_path, during):
    marker = tmp_path / "killed"
    with _KillOnce(cluster.scheduler_address, marker=str(marker), during=during) as ex:
        got = _json(cases[0], ex)
    assert marker.exists()  # a worker really died
    assert got == _json(cases[0], InProcessExecutor())


def _decorated_job(root):
    """A failed job whose files show decorations the job decides together, and a plain history job."""
    rank = [f"[trainer0|0]:2024-05-01 10:00:0{i % 10} step {i} ok" for i in range(12)]
    rank.append("[trainer0|0]:RuntimeError: CUDA error: an illegal memory access was encountered")
    tagged = [f"[default{r}]:[trainer0|0]:2024-05-01 10:00:0{i} step {i} ok"
              for i in range(5) for r in (0, 1)]
    console = ["agent started", "agent: spawning", *tagged, "agent: worker exited", "agent: done"]
    coloured = [f"\x1b[32m2024-05-01 10:00:0{i}\x1b[0m INFO step {i}" for i in range(6)]
    plain = [f"2024-05-01 10:00:0{i} INFO step {i}" for i in range(6)]
    failed = write_failed_job(root / "failed", {"node-0/rank0.log": rank, "node-0/console.log": console,
                                               "node-1/coloured.log": coloured, "node-1/plain.log": plain,
                                               "node-2/empty.log": []})
    write_rank(failed / "node-2" / "rank1.log", rank, gz=True)
    history = write_failed_job(root / "history", {"node-0/rank0.log": plain * 3})
    return [failed, history]


def test_decorations_are_decided_alike_in_process_in_a_pool_and_on_dask(cluster, tmp_path):
    jobs = _decorated_job(tmp_path)
    files = [f for j in jobs for f in discover(j).files]
    expected = learn_job([head_lines(f) for f in files])  # the job's decision over every file's start
    console = next(d for f, d in zip(files, expected, strict=True) if f.path.endswith("console.log"))
    assert console is not None and console.prefix is not None  # taken from the rank files (read twice)
    assert {d.name for d in expected if d is not None} == {"ansi-sgr+constant-tag", "ansi-sgr"}
    runs = {"serial": InProcessExecutor(), "pool": PoolExecutor(2)}
    with DaskExecutor(cluster.scheduler_address) as dask:
        runs["dask"] = dask
        got = {name: parse_jobs(jobs, executor=ex) for name, ex in runs.items()}
        diagnoses = {name: _json(tmp_path, ex, jobs) for name, ex in runs.items()}
    for name, parsed in got.items():
        decided = {**parsed[0].file_decorations, **parsed[1].file_decorations}
        assert decided == {f.path: d for f, d in zip(files, expected, strict=True) if d is not None}, name
    assert diagnoses["pool"] == diagnoses["serial"] and diagnoses["dask"] == diagnoses["serial"]


def test_an_unreachable_scheduler_is_one_line():
    with pytest.raises(DaskUnavailable) as err:
        DaskExecutor(UNREACHABLE, connect_timeout=1)
    assert "Dask scheduler tcp://127.0.0.1:9 unreachable" in str(err.value)
    assert "\n" not in str(err.value)


def test_workers_that_cannot_see_the_files_are_one_line(cluster, tmp_path):
    with DaskExecutor(cluster.scheduler_address) as ex, pytest.raises(DaskUnavailable) as err:
        list(ex.map(len, [RankFile(str(tmp_path / "nowhere" / "rank-0.log"), "n", 1)]))
    assert "cannot read" in str(err.value) and "same path" in str(err.value)


def test_fallback_to_this_machine(cases, caplog):
    jobs = [cases[0] / "failed"]
    with pytest.raises(DaskUnavailable):
        parse_on_cluster(jobs, scheduler=UNREACHABLE, fallback=None, connect_timeout=1)
    parsed = parse_on_cluster(jobs, scheduler=UNREACHABLE, fallback="local", connect_timeout=1)
    assert parsed[0].stats.files > 0
    assert any("parsing on this machine instead" in r.getMessage() for r in caplog.records)


def test_cli_dask_flag_unreachable_exits_2_with_one_line(cases, tmp_path):
    env = {"L4_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.sqlite'}", "PATH": "/usr/bin:/bin",
           "L4_DASK_CONNECT_TIMEOUT": "1"}
    out = subprocess.run([sys.executable, "-m", "bot.cli", "diagnose", str(cases[0] / "failed"), "--dask",
                          UNREACHABLE, "--format", "json"], capture_output=True, text=True, env=env,
                         timeout=WAIT)
    assert out.returncode == 2
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unreachable" in lines[0]


@pytest.mark.parametrize("spread_from", [0, 1 << 40], ids=["files-over-the-cluster", "in-the-task"])
def test_a_whole_analysis_as_one_task_is_the_same_as_here(cluster, cases, spread_from):
    case = cases[0]
    job = discover(case / "failed")
    history = [discover(p) for p in sorted(case.iterdir()) if p.name.startswith("history")]
    here = analyse_job(job, history, [], parse=lambda jobs: parse_jobs(jobs, executor=InProcessExecutor()))
    with distributed.Client(cluster, set_as_default=False) as client:
        task = client.submit(analyse_on_worker, job, history, [], spread_from=spread_from, pure=False)
        there = task.result()
    for a in (here, there):
        a.diagnosis.stats.seconds = 0
    assert json.dumps(there.diagnosis.to_dict(detail=True), sort_keys=True) == \
        json.dumps(here.diagnosis.to_dict(detail=True), sort_keys=True)
    assert [t.template for t in there.fresh] == [t.template for t in here.fresh]
    assert there.evidence.node_last_iter == here.evidence.node_last_iter
    assert there.started <= there.finished


def test_bad_input_in_the_task_is_the_job_error(cluster, tmp_path):
    (tmp_path / "empty" / "node-0").mkdir(parents=True)
    (tmp_path / "empty" / "node-0" / "rank-0.log").write_bytes(b"")
    with distributed.Client(cluster, set_as_default=False) as client, pytest.raises(JobError) as err:
        client.submit(analyse_on_worker, discover(tmp_path / "empty"), [], [], pure=False).result()
    assert "no log lines" in str(err.value)

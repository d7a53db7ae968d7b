"""Known fault signatures as ranking evidence (engine.known through engine.diagnose)."""
import json
from pathlib import Path

from engine.diagnose import diagnose
from engine.events import score_events
from engine.filter import candidate_events, normal_pool
from engine.known import KnownSignature
from engine.parse import parse_jobs
from tests.helpers.jobs import make_job

WEDGED = "frobnicator: widget 3 wedged on bus 0000:3a:00"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "realrun" / "_wave1" / "bad_world_size-ddp-2"


def _scored(job: Path, known: list[KnownSignature]) -> dict[str, object]:
    parsed = parse_jobs([job])
    events = score_events(parsed[0], candidate_events(parsed[0], normal_pool([])), known=known)
    return {parsed[0].templates[e.id].template: e for e in events}


def test_no_signatures_change_nothing_on_a_fixture():
    history = sorted(p for p in (FIXTURE / "history").iterdir() if p.is_dir())
    plain = diagnose(FIXTURE / "failed", history).to_dict()
    none = diagnose(FIXTURE / "failed", history, known=()).to_dict()
    unmatched = diagnose(FIXTURE / "failed", history,
                         known=[KnownSignature("nothing", ("zzz never logged zzz",))]).to_dict()
    for d in (plain, none, unmatched):
        d["stats"].pop("seconds")
    assert plain == none == unmatched
    assert not any("known" in e for e in plain["events"])
    assert json.dumps(plain)  # still the plain JSON contract


def test_a_root_signature_lifts_a_quiet_line_above_the_watchdogs(tmp_path):
    job = make_job(tmp_path / "job", fault_lines=(WEDGED,))
    assert not diagnose(job).events[0].template.startswith("frobnicator")
    known = [KnownSignature("widget-wedged", (r"widget \d+ wedged",), weight=0.95)]
    d = diagnose(job, known=known)
    assert d.events[0].template.startswith("frobnicator") and d.events[0].known == "widget-wedged"
    assert d.to_dict()["events"][0]["known"] == "widget-wedged"


def test_a_consequence_signature_makes_its_line_a_cascade(tmp_path):
    job = make_job(tmp_path / "job", fault_lines=(ECC, "ERROR comm aborted: peer rank 7 gone away"))
    before = _scored(job, [])
    line = next(t for t in before if t.startswith("ERROR comm") or "comm aborted" in t)
    assert before[line].role is None
    after = _scored(job, [KnownSignature("peer-gone", (r"comm aborted: peer rank",), root=False)])
    assert after[line].role == "cascade" and after[line].known == "peer-gone"
    assert after[line].score < before[line].score


def test_an_explained_match_logged_later_is_the_explainer_s_consequence(tmp_path):
    xid = "2026-05-01 10:39:00 kernel: NVRM: Xid (PCI:0000:3a:00): 79, GPU has fallen off the bus."
    cuda = "2026-05-01 10:39:30 RuntimeError: CUDA error: unspecified launch failure"
    known = [KnownSignature("xid-79", (r"NVRM: Xid .*\b79\b",), weight=1.0, explains=("cuda-*",)),
             KnownSignature("cuda-launch-failure", (r"unspecified launch failure",), weight=0.95)]
    job = make_job(tmp_path / "job", fault_lines=(xid, cuda))
    scored = _scored(job, known)
    launch = next(e for t, e in scored.items() if "unspecified launch failure" in t)
    assert launch.role == "cascade" and launch.known == "cuda-launch-failure"
    # the other way round in time: the library's guess yields to the job's order
    job2 = make_job(tmp_path / "job2", fault_lines=(cuda.replace("10:39:30", "10:38:00"), xid))
    launch2 = next(e for t, e in _scored(job2, known).items() if "unspecified launch failure" in t)
    assert launch2.role is None


def test_a_signature_re2_cannot_compile_is_skipped(tmp_path):
    job = make_job(tmp_path / "job", fault_lines=(WEDGED,))
    known = [KnownSignature("lookbehind", (r"(?<=widget )\d+",)),
             KnownSignature("widget-wedged", (r"widget \d+ wedged",), weight=0.95)]
    assert diagnose(job, known=known).events[0].known == "widget-wedged"

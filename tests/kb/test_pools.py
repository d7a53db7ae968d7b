from __future__ import annotations

import pytest
from sqlmodel import select

from engine.model import ParsedJob, TemplateStat
from kb import KbError
from kb import db as kbdb
from kb.models import NormalEvent
from kb.pools import family_key, learn, learned_jobs, normal_templates

SETTINGS = {"model": "llama-70b", "framework": "megatron", "image": "img:1", "extra": {"b": 1, "a": [1, 2]}}


def _job(job_id: str, templates: dict[str, int], settings: dict = SETTINGS,
         status: str | None = "succeeded") -> ParsedJob:
    return ParsedJob(job_id=job_id, settings=settings, status=status,
                     templates=[TemplateStat(template=t, count=c) for t, c in templates.items()])


def test_family_key_is_canonical() -> None:
    reordered = {"extra": {"a": [1, 2], "b": 1}, "image": "img:1", "framework": "megatron",
                 "model": "llama-70b"}
    assert family_key(SETTINGS) == family_key(reordered)
    assert family_key(SETTINGS) != family_key({**SETTINGS, "model": "llama-8b"})
    assert len(family_key({})) == 64 and family_key(None) == family_key({})


def test_learn_is_idempotent_and_counts(engine) -> None:  # noqa: ANN001
    with kbdb.session(engine) as s:
        assert learn(s, _job("ok-1", {"iteration <*> loss <*>": 100, "saving checkpoint <*>": 2}))
        assert not learn(s, _job("ok-1", {"iteration <*> loss <*>": 100}))  # same job again
        assert learn(s, _job("ok-2", {"iteration <*> loss <*>": 50, "NCCL INFO Init COMPLETE": 8}))
        s.commit()
    with kbdb.session(engine) as s:
        assert normal_templates(s, SETTINGS) == {"iteration <*> loss <*>", "saving checkpoint <*>",
                                                 "NCCL INFO Init COMPLETE"}
        assert normal_templates(s, SETTINGS, min_jobs=2) == {"iteration <*> loss <*>"}
        ev = s.exec(select(NormalEvent).where(NormalEvent.template == "iteration <*> loss <*>")).one()
        assert ev.jobs_seen == 2 and ev.total_count == 150
        assert learned_jobs(s, SETTINGS) == ["ok-1", "ok-2"]
        assert normal_templates(s, {"model": "other"}) == set()


def test_failed_job_is_refused(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        with pytest.raises(KbError, match="failed"):
            learn(s, _job("bad", {"x <*>": 1}, status="failed"))


def test_long_templates_are_pooled(sqlite_engine) -> None:  # noqa: ANN001
    long_t = "x" * 20000 + " <*>"
    with kbdb.session(sqlite_engine) as s:
        learn(s, _job("long", {long_t: 1}))
        s.commit()
        assert normal_templates(s, SETTINGS) == {long_t}

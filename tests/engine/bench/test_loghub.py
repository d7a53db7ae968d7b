"""Grouping accuracy on a 300-row Loghub-2k fixture (HDFS, Zookeeper); see fixtures/loghub/SOURCE.md."""
from __future__ import annotations

from pathlib import Path

import pytest

from engine.bench.loghub import CONFIGS, format_table, grouping_accuracy, score_all, score_system

FIXTURE = Path(__file__).parent / "fixtures" / "loghub"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return score_all(FIXTURE)


def test_scores_fixture_systems(rows: list[dict]) -> None:
    assert [r["system"] for r in rows] == ["HDFS", "Zookeeper"]
    for r in rows:
        assert r["messages"] == 300
        assert r["gt_groups"] >= 1
        assert set(r["ga"]) == set(CONFIGS)
        for config in CONFIGS:
            assert 0.0 <= r["ga"][config] <= 1.0
            assert r["clusters"][config] >= 1


def test_l4_on_hdfs(rows: list[dict]) -> None:
    hdfs = next(r for r in rows if r["system"] == "HDFS")
    assert hdfs["ga"]["l4"] >= 0.8


def test_table_has_mean_row(rows: list[dict]) -> None:
    table = format_table(rows)
    lines = table.splitlines()
    assert lines[0].startswith("| system | drain3-default | drain3-mask | l4 | gt groups | l4 clusters |")
    assert any(line.startswith("| MEAN (2) |") for line in lines)
    assert any(line.startswith("| MEAN, masks apply (2/2) |") for line in lines)


def test_missing_system_raises() -> None:
    with pytest.raises(FileNotFoundError):
        score_system(FIXTURE, "Linux")
    with pytest.raises(ValueError):
        score_system(FIXTURE, "HDFS", gt="bogus")


def test_grouping_accuracy_definition() -> None:
    # cluster {0,1} == group a -> 2 correct; cluster {2,3} mixes b and c -> 0; cluster {4} == group d -> 1
    assert grouping_accuracy([0, 0, 1, 1, 2], ["a", "a", "b", "c", "d"]) == pytest.approx(3 / 5)
    # over-splitting a group makes all its messages wrong
    assert grouping_accuracy([0, 1], ["a", "a"]) == 0.0

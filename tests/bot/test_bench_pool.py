"""`l4 bench eval --history-mode`: the pool mode learns history jobs into a real temporary KB."""
import json

from bot.bench_pool import kb_pool
from bot.cli import main
from engine.bench.evaluate import separate_pool
from engine.bench.generate import generate_suite


def test_kb_pool_equals_separate_parses(tmp_path):
    case = generate_suite(tmp_path, 1, seed=3, kinds=["xid79"])[0]
    history = sorted(p for p in (case / "history").iterdir() if p.is_dir())
    pool = kb_pool(case / "failed", history)
    assert pool and pool == separate_pool(case / "failed", history)


def test_eval_compares_history_modes(tmp_path, capsys):
    generate_suite(tmp_path / "cases", 2, seed=4, kinds=["xid79", "oom"])
    out = tmp_path / "figures.json"
    assert main(["bench", "eval", str(tmp_path / "cases"), "--history-mode", "parse,pool,none",
                 "--json", str(out)]) == 0
    report = capsys.readouterr().out
    for mode in ("parse", "pool", "none"):
        assert f"| {mode} |" in report
    figures = json.loads(out.read_text())
    assert set(figures) == {"parse", "pool", "none"} and figures["pool"]["cases"] == 2


def test_bad_history_mode_is_one_line(tmp_path, capsys):
    generate_suite(tmp_path, 1, seed=4, kinds=["oom"])
    assert main(["bench", "eval", str(tmp_path), "--history-mode", "pool,psrse"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--history-mode" in err

import json

from engine.diagnose import diagnose
from tests.helpers.jobs import write_rank


def _job(root, lines_by_rank):
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.json").write_text(json.dumps({"job_id": root.name, "status": "failed"}))
    for rank, lines in lines_by_rank.items():
        write_rank(root / f"node-{rank}" / f"rank-{rank}.log", lines)
    return root


def _healthy(n: int, its: int) -> list[str]:
    return [f"iter {i} fwd 12.{i % 10}ms bwd 30.1ms" for i in range(1, its + 1)] + [
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE) ran for 600044"]


def test_progress_in_a_wording_no_rule_knows_is_training(tmp_path):
    failing = [f"iter {i} fwd 12.{i % 10}ms bwd 30.1ms" for i in range(1, 30)] + [
        "RuntimeError: injected fault at step 30"]
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: _healthy(1, 29), 2: _healthy(2, 29)}))
    assert d.events[0].template.startswith("RuntimeError: injected fault")
    assert d.stage == "training"


def test_a_finished_checkpoint_save_does_not_make_the_stage_checkpointing(tmp_path):
    failing = ([f"{{'loss': 2.{i}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}" for i in range(1, 6)]
               + ["Saving checkpoint to /ckpt/step-5", "Checkpoint saved in 2.1 s"]
               + ["ValueError: loss is nan at step 6"])
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: _healthy(1, 5), 2: _healthy(2, 5)}))
    assert d.stage == "training"


def test_a_failure_inside_an_open_checkpoint_window_is_checkpointing(tmp_path):
    failing = ([f"{{'loss': 2.{i}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}" for i in range(1, 6)]
               + ["Saving checkpoint to /ckpt/step-5", "OSError: [Errno 28] No space left on device"])
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: _healthy(1, 5), 2: _healthy(2, 5)}))
    assert d.stage == "checkpointing"


def test_the_innermost_known_frame_of_the_failing_traceback_names_the_stage(tmp_path):
    failing = [f"iter {i} fwd 12.{i % 10}ms" for i in range(1, 6)] + [
        "Traceback (most recent call last):",
        '  File "/w/train.py", line 80, in <module>',
        "    main()",
        '  File "/w/train.py", line 70, in train',
        "    for batch in loader:",
        '  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 630, in __next__',
        "    data = self._next_data()",
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.",
    ]
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: _healthy(1, 5), 2: _healthy(2, 5)}))
    assert d.stage == "data_loading"


def test_nothing_that_shows_a_stage_gives_unknown(tmp_path):
    failing = [f"hello {w}" for w in ("alpha", "beta", "gamma", "delta", "eps")] + [
        "ValueError: something odd happened here"]
    d = diagnose(_job(tmp_path / "j", {0: failing}))
    assert d.stage == "unknown"

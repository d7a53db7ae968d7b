from engine.diagnose import diagnose
from tests.helpers.jobs import write_failed_job as _files_job
from tests.helpers.stages import rules_stage


def _job(root, lines_by_rank):
    """A failed job of one rank file per node: rank r's lines in node-r/rank-r.log."""
    return _files_job(root, {f"node-{rank}/rank-{rank}.log": lines for rank, lines in lines_by_rank.items()})


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
    # the rules' answer; where only text exists the learned model answers (engine/stage_model.py)
    assert rules_stage(_job(tmp_path / "j", {0: failing})) == "unknown"


def test_a_failure_after_the_third_periodic_save_line_is_checkpointing(tmp_path):
    # "saving checkpoint to …/step_N" recurs with a rising number like progress, but each one opens
    # a checkpoint window that its "saved" line closes
    failing = []
    for step in range(1, 19):
        failing.append(f"INFO trainer: step {step}/30 loss=4.{step:02d} lr=1.0e-03")
        if step % 6 == 0:
            failing.append(f"INFO trainer: saving checkpoint to /ckpt/step_{step:05d}")
            if step < 18:
                failing.append(f"INFO trainer: checkpoint saved: /ckpt/step_{step:05d} (20427 bytes)")
    failing.append("PermissionError: [Errno 13] Permission denied: '/ckpt/step_00018'")
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: _healthy(1, 18), 2: _healthy(2, 18)}))
    assert d.events[0].template.startswith("PermissionError")
    assert d.stage == "checkpointing"


def test_a_launcher_log_that_shows_only_its_rendezvous_takes_the_stage_from_the_peers_tracebacks(tmp_path):
    launcher = [
        "Starting elastic_operator with launch configs:",
        "[default] Rendezvous complete for workers. Result:",
        "failed (exitcode: -9) local_rank: 1 (pid: 4711) of binary: /usr/bin/python3",
    ]
    peer = ["setup done, world_size=8"] + [
        "Traceback (most recent call last):",
        '  File "/job/train.py", line 90, in <module>',
        "    main()",
        '  File "/job/train.py", line 61, in main',
        "    loss.backward()",
        '  File "/usr/lib/python3/site-packages/torch/autograd/__init__.py", line 353, in backward',
        "    _engine_run_backward(",
        "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:4242",
    ]
    d = diagnose(_files_job(tmp_path / "j", {"node-1/launcher.log": launcher, "node-2/rank-2.log": peer,
                                             "node-2/rank-3.log": peer}))
    assert d.events[0].template.startswith("failed (exitcode: -")
    assert d.stage == "training"


def test_a_pasted_error_with_its_frames_after_it_and_no_traceback_head(tmp_path):
    pasted = [
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.01 GiB. GPU 6 has a total "
        "capacity of 79.33 GiB of which 6.37 GiB is free.",
        "    self.optimizer = self._configure_zero_optimizer(basic_optimizer)",
        '  File "/env/site-packages/deepspeed/runtime/engine.py", line 1503, in _configure_zero_optimizer',
        "    optimizer = DeepSpeedZeroOptimizer(",
    ]
    # the rules' answer; where only text exists the learned model answers (engine/stage_model.py)
    assert rules_stage(_job(tmp_path / "j", {0: pasted})) == "model_loading"


def test_a_rank_whose_stdout_the_console_lists_after_its_traceback(tmp_path):
    # torchrun tails a rank's stdout and stderr apart: its traceback may come before what it printed
    console = [
        "[default0]:[rank0]: Traceback (most recent call last):",
        '[default0]:[rank0]:   File "/job/train.py", line 195, in <module>',
        "[default0]:[rank0]:     main()",
        "[default0]:[rank0]: TypeError: Object of type Tensor is not JSON serializable",
        "[default1]:[rank1]: RuntimeError: Connection closed by peer [127.0.0.1]:30633",
        "[default0]:> initializing torch distributed ...",
        "[default0]:training ...",
        "[default0]:[after training is done] datetime: 2026-12-01 01:35:48",
        "W1201 01:35:51.395000 21982 api.py:1028] Sending process 22053 closing signal SIGTERM",
    ]
    d = diagnose(_files_job(tmp_path / "j", {"node-1/torchrun.log": console}))
    assert d.events[0].template.startswith("TypeError")
    assert d.stage == "teardown"

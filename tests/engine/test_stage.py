from engine.diagnose import diagnose
from engine.stage import traceback_start
from engine.window import Window
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
        "ValueError: Caught ValueError in DataLoader worker process 0: sample 96 has 12 tokens, expected 17",
    ]
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: _healthy(1, 5), 2: _healthy(2, 5)}))
    assert d.stage == "data_loading"


def test_a_killed_worker_noticed_in_a_batch_fetch_is_in_the_stage_the_rank_had_reached(tmp_path):
    """The traceback of a death notice is where the survivor noticed it (the next batch fetch), not
    the stage: the rank had been training (real runs: accelerate, DDP; a public pipedream thread)."""
    failing = [f"iter {i} fwd 12.{i % 10}ms" for i in range(1, 6)] + [
        "Traceback (most recent call last):",
        '  File "/w/train.py", line 70, in train',
        "    for batch in loader:",
        '  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 630, in __next__',
        "    data = self._next_data()",
        '  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1298, in _try_get_data',
        "    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e",
        "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Killed.",
    ]
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: _healthy(1, 5), 2: _healthy(2, 5)}))
    assert d.events[0].template.startswith("RuntimeError: DataLoader worker")
    assert d.stage == "training"
    at_start = ["initializing torch distributed", "building train dataset"] + failing[5:]
    d = diagnose(_job(tmp_path / "k", {0: at_start, 1: _healthy(1, 5), 2: _healthy(2, 5)}))
    assert d.stage == "data_loading"  # killed before any progress: the rank's log shows the data set


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


def _nano(i: int) -> str:
    return f"iter {i}: loss 4.{i:02d}, time 49.6ms, mfu 0.00%"


def test_a_failure_after_the_other_nodes_workers_finished_is_teardown(tmp_path):
    """torchrun's agents wait at the exit barrier only once their workers finished: training was over."""
    failing = [_nano(i) for i in range(1, 12)] + [
        "Traceback (most recent call last):",
        '  File "/job/train.py", line 197, in main',
        '    json.dump({"iter_num": iter_num, "loss": final}, f)',
        "TypeError: Object of type Tensor is not JSON serializable"]
    done = [_nano(i) for i in range(1, 12)] + [
        "E1201 23:27:40.123000 4242 torch/distributed/elastic/agent/server/api.py:1234] Error waiting on "
        "exit barrier. Elapsed: 300.0 seconds"]
    d = diagnose(_job(tmp_path / "j", {0: failing, 1: done, 2: done}))
    assert d.events[0].template.startswith("TypeError")
    assert d.stage == "teardown"
    d = diagnose(_job(tmp_path / "k", {0: failing, 1: done[:-1], 2: done[:-1]}))
    # nothing shows the others had finished: no teardown; the stage the progress shows under way, unless the
    # failure's own words say a save (`json.dump` of the loss to a file reads as one: engine.stage_model's
    # `under_way_stage`)
    assert d.stage in ("training", "checkpointing")


def test_a_start_up_check_every_node_fails_alike_is_init(tmp_path):
    def rank(r: int) -> list[str]:
        return [f"Process index: {r}", "Device: cpu:0", "Mixed precision type: no",
                "Traceback (most recent call last):",
                '  File "/job/train.py", line 203, in <module>',
                "    main()",
                '  File "/job/train.py", line 67, in main',
                "    assert gradient_accumulation_steps % ddp_world_size == 0",
                "AssertionError"]
    d = diagnose(_job(tmp_path / "j", {r: rank(r) for r in range(3)}))
    assert d.stage == "init"


def test_progress_only_one_rank_prints_is_the_jobs_stage(tmp_path):
    """nanoGPT prints `iter N` from the master rank only; a node preempted mid-run shows set-up lines."""
    master = ["Initializing a new model from scratch", "number of parameters: 0.02M"] + [
        _nano(i) for i in range(0, 14)]
    preempted = ["Initializing a new model from scratch", "number of parameters: 0.02M",
                 "W1201 17:53:04.174000 25870 torch/distributed/elastic/agent/server/api.py:753] Received 15 "
                 "death signal, shutting down workers"]
    quiet = ["Initializing a new model from scratch", "number of parameters: 0.02M"] * 3
    d = diagnose(_job(tmp_path / "j", {0: master, 1: preempted, 2: quiet}))
    assert "death signal" in d.events[0].template
    assert d.stage == "training"


def test_stack_frames_and_retries_are_no_progress():
    from engine.stage import log_stage
    from engine.window import Window

    lines = ["[W1201 10:43:06.357933301 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to "
             f"host 127.0.0.1:46309 - retrying (try={k}, timeout=20000ms, delay=334ms): Connection reset"
             for k in range(4)]
    lines += [f"frame #{k}: c10::Error::Error(c10::SourceLocation) + 0x9d (0x7f72e4179b in libc10.so)"
              for k in range(6)]
    lines += ["torch.distributed.DistNetworkError: The server socket has failed to listen on any address"]
    assert log_stage(Window(path="x", anchor=len(lines) - 1, lines=lines)) is None
    steps = [f"iter {i}: loss 4.{i:02d}, time 49.6ms, mfu 0.00%" for i in range(4)]
    assert log_stage(Window(path="x", anchor=len(lines) + 3, lines=steps + lines)) == "training"


_TB = ["step 1 loss 2.0", "step 2 loss 1.9", "Traceback (most recent call last):",
       '  File "train.py", line 9, in <module>', "    main()", '  File "train.py", line 5, in main',
       "    step()", "RuntimeError: boom"]


def _at_end(lines: list[str]) -> Window:
    return Window(path="rank0.log", anchor=len(lines) - 1, lines=lines)


def test_one_traceback_walk_finds_where_the_failure_s_own_lines_start():
    assert traceback_start(_at_end(_TB)) == 2  # its head
    assert traceback_start(_at_end(_TB[:2] + _TB[3:])) == 2  # pasted without its head: the outermost frame
    # the exception's message may take lines between the frames and the failure line
    assert traceback_start(_at_end([*_TB[:-1], "RuntimeError: NCCL error", "ncclInternalError: x",
                                    "Last error:", "socket failed"])) == 2
    chained = ["loading data", "Traceback (most recent call last):", '  File "d.py", line 1, in get',
               "    return d['x']", "KeyError: 'x'", "",
               "During handling of the above exception, another exception occurred:", "", *_TB[2:]]
    assert traceback_start(_at_end(chained)) == 1  # the first traceback of a chain
    assert traceback_start(_at_end(["a", "b", "RuntimeError: x"])) == 2  # no traceback: the failure line


def test_frames_behind_a_launchers_label_on_indented_lines_are_read(tmp_path):
    # othergen2 seed-1 dev og2-s1-039: `srun -l` labels every line; the header parser strips "0: " only
    # before a non-blank, so the traceback's indented frame lines keep their label
    failing = [f"0: iteration {i}/ 100 | loss: 2.{i}" for i in range(1, 6)] + [
        "0: Traceback (most recent call last):",
        '0:   File "/workspace/megatron/core/datasets/indexed_dataset.py", line 424, in __init__',
        "0:     self.index = _IndexReader(idx_path, self.multimodal)",
        "0: FileNotFoundError: [Errno 2] No such file or directory: '/data/pile_text_document.idx'",
    ]
    assert rules_stage(_job(tmp_path / "j", {0: failing})) == "data_loading"


def test_a_faulthandler_dump_s_crashing_thread_names_the_stage(tmp_path):
    # othergen seed-1 dev og1-007: "Fatal Python error" and faulthandler's frames (no comma before "in",
    # innermost first), the crashing thread listed after the others
    failing = ["setting up the model", "Fatal Python error: Segmentation fault", "",
               "Thread 0x00007f0a416c0390 (most recent call first):", "<no Python frame>", "",
               "Current thread 0x00007f3433 (most recent call first):",
               '  File "/env/site-packages/flash_attn/flash_attn_interface.py", line 851 in __del__',
               '  File "/w/train.py", line 40 in forward', "", "Extension modules: numpy.core"]
    assert rules_stage(_job(tmp_path / "j", {0: failing})) == "teardown"


def test_a_killed_worker_whose_stderr_stops_at_set_up_while_its_stdout_ran(tmp_path):
    # othergen seed-1 dev og1-017: the rank's stderr shows only "loading weights file" before the death
    # notice; its stdout, beside it, shows the run's steps
    job = _files_job(tmp_path / "j", {
        "node-0/stderr-rank40.log": [
            "[INFO|modeling_utils.py:3373] 2025-06-16 16:13:11,628 >> loading weights file /m/w.bin",
            "Traceback (most recent call last):",
            '  File "/env/site-packages/torch/utils/data/dataloader.py", line 986, in _try_get_data',
            "RuntimeError: DataLoader worker (pid 3992879) is killed by signal: Bus error."],
        "node-0/stdout-rank40.log": [f"step {i} loss 2.{i}" for i in range(1, 9)],
        "node-0/stdout-rank41.log": [f"step {i} loss 2.{i}" for i in range(1, 9)],
    })
    assert rules_stage(job) == "training"


def test_an_import_at_a_modules_top_level_is_init_whatever_the_modules_file_is_about():
    from engine.stage import frame_rule_evidence

    frames = [("/x/examples/sequence_parallel/data/__init__.py", "<module>",
               "from colossalai.legacy.context import ParallelMode"),
              ("train.py", "<module>", "from data.bert_helper import SequenceParallelDataIterator")]
    assert frame_rule_evidence(frames) == ("init", False, False)
    # inside a function the file still speaks: a lazy import in a data module is that module's work
    assert frame_rule_evidence([("/x/data/loader.py", "get_batch", "import numpy")])[0] == "data_loading"


def test_the_standard_librarys_frames_name_no_stage_however_its_path_was_pasted():
    """`os.environ[...]` fails in the standard library's `_Environ.__getitem__`, which is no data set's
    `__getitem__`: the program's frame under it says where it was, whether the interpreter's path was
    pasted whole, relative or in Windows' layout; a project's own `lib/` folder is the program's."""
    from engine.stage import frame_rule_evidence

    for stdlib in ("/usr/lib/python3.9/os.py", "lib/python3.9/os.py",
                   "C:\\Users\\u\\anaconda3\\envs\\pt\\lib\\os.py", "C:\\Python39\\Lib\\os.py"):
        frames = [(stdlib, "__getitem__", 'raise KeyError(key) from None'),
                  ("lib/python3.9/site-packages/bmtrain/init.py", "init_distributed",
                   'local_rank = int(os.environ["LOCAL_RANK"])')]
        assert frame_rule_evidence(frames)[0] == "init", stdlib
    # mmcv's, basicsr's and many a repository's own `init_dist(launcher)` reads the launcher's variables
    assert frame_rule_evidence([("/usr/lib/python3.8/os.py", "__getitem__", ""),
                                ("train.py", "init_dist", "rank = int(os.environ['RANK'])")])[0] == "init"
    for own in ("/home/u/proj/lib/dataset.py", "D:\\proj\\lib\\dataset.py",
                "C:\\Users\\u\\anaconda3\\lib\\site-packages\\x\\dataset.py"):
        assert frame_rule_evidence([(own, "__getitem__", "img = self.load(i)")])[0] == "data_loading", own


def test_a_save_opened_in_other_words_is_a_checkpoint_window_and_a_saved_model_closes_it():
    """A word or two may stand between "Saving" and what is saved ("Saving latest checkpoint", "Saving
    DeepSpeed Model and Optimizer", "Saving current state to …"), and "Saved model to …" ends the save."""
    from engine.stage import _closed, stage_of_template

    for line in ("Saving latest checkpoint model trained for 3 complete epochs",
                 "Saving DeepSpeed Model and Optimizer", "Saving current state to out/checkpoint-6928"):
        assert stage_of_template(line) == "checkpointing", line
    assert _closed().search("Saved model to /scratch/models/run_chkpt00031.chkpt")
    assert _closed().search("Saved best checkpoint at step 300")
    assert stage_of_template("Saving the dataset") is None


def test_an_aborted_or_destroyed_nccl_communicator_is_no_sign_of_init():
    """NCCL's INFO lines mark set-up, but "comm … - Abort COMPLETE" and "Destroy COMPLETE" follow a failure
    at any stage (public wave 10: ranks aborting their communicators after the last save)."""
    from engine.stage import stage_of_template

    for verb in ("Abort", "Destroy"):
        line = f"gcn66:17:19 [2] NCCL INFO comm 0xf1a9890 rank 2 nranks 4 cudaDev 2 - {verb} COMPLETE"
        assert stage_of_template(line) != "init", verb
    init = "gcn66:1:2 [2] NCCL INFO comm 0xf1a9890 rank 2 nranks 4 cudaDev 2 - Init COMPLETE"
    assert stage_of_template(init) == "init"


def test_progress_whose_numbers_grow_a_digit_is_still_one_line_shape(tmp_path):
    """A progress line is known by its shape with each run of digits as one: "iter 990" and "iter 1000",
    "time 1097.65ms" and "time 35392.33ms" (a step slowed by a save) are the same line (public:
    nanoGPT's iteration after its checkpoint save, the failure right after)."""
    failing = [f"iter {i}: loss 3.9{i % 7}, time 10{i % 9}.3ms" for i in range(960, 1000, 10)]
    failing += ["saving checkpoint to out", "iter 1000: loss 4.2490, time 35392.33ms",
                "iter 1010: loss nan, time 1019.95ms"]
    assert rules_stage(_job(tmp_path / "j", {0: failing})) == "training"


def test_a_failure_where_the_periodic_save_was_due_is_checkpointing(tmp_path):
    """MXNet logs a save when it is done ("Saved checkpoint to …"): a failure right after the line that
    each earlier time came just before a save is in that save (public: a write that failed at epoch 39)."""
    failing = []
    for epoch in range(36, 40):
        failing += [f"INFO:root:Epoch[{epoch}] Batch [{b}]  Speed: 18.3 samples/sec" for b in (20, 40, 60)]
        failing += [f"INFO:root:Epoch[{epoch}] Time cost=76.{epoch}"]
        if epoch < 39:
            failing += [f'INFO:root:Saved checkpoint to "./models/r152-00{epoch + 1}.params"',
                        f"INFO:root:Epoch[{epoch}] Validation-accuracy=0.46"]
    failing += ["[16:24:41] src/io/local_filesys.cc:39: Check failed: std::fwrite(ptr, 1, size, fp_) == size"]
    assert rules_stage(_job(tmp_path / "j", {0: failing})) == "checkpointing"
    # the same line, never followed by a save before: the rank was training
    plain = [line for line in failing if "Saved checkpoint" not in line]
    assert rules_stage(_job(tmp_path / "k", {0: plain})) == "training"


def test_the_end_of_a_run_in_lightnings_or_fairseqs_words_marks_teardown():
    from engine.stage import stage_of_template

    assert stage_of_template("INFO | fairseq_cli.train | done training in 162.1 seconds") == "teardown"
    assert stage_of_template("`Trainer.fit` stopped: `max_epochs=10` reached.") == "teardown"
    assert stage_of_template("`Trainer.fit` stopped: `max_steps=500` reached.") == "teardown"


def test_a_tqdm_bar_is_one_line_shape_whatever_its_filling(tmp_path):
    """A bar's glyphs change as it fills ("|▍         |", "|███▍      |"): the same progress line all the
    same (real run: TorchTune's "1|7|Loss: 4.44:  30%|███       | 7/23" after a periodic save)."""
    from engine.stage import _shape

    assert _shape("1|7|Loss: 4.44:  30%|███       | 7/23 [00:00<00:00, 19.97it/s]") == _shape(
        "1|12|Loss: 4.1:  52%|█████▏    | 12/23 [00:01<00:00, 19.1it/s]")


def test_a_clock_in_set_up_lines_every_rank_writes_is_no_progress():
    """A logger's own stamp behind a prefix the parser does not read ("[titan] 2026-… - root - INFO - …" in a
    pod's CRI log) stays in the message and rises on every line: four ranks' set-up lines are no training
    progress; a step count still is."""
    from engine.stage import log_stage

    def pod(k: int, msg: str) -> str:
        stamp = f"2026-11-20 17:45:0{k}"
        return f"{stamp.replace(' ', 'T')}.{k}00Z stderr F [titan] {stamp},{k}00 - root - INFO - {msg}"

    setup = [pod(k, f"Applied FSDP to the model; memory for the model: {gib}GiB")
             for k, gib in enumerate((69.7, 64.3, 59.6, 54.2))]
    failure = ["2026-11-20T17:45:08.000Z stderr F [rank2]: RuntimeError: Error(s) in loading state_dict"]
    assert log_stage(_at_end(setup + failure)) != "training"
    assert log_stage(_at_end(setup + [pod(5, "Loading the checkpoint from /ckpt/step-500")] + failure)) == \
        "model_loading"
    steps = [pod(k, f"step: {10 * k}  loss: 7.{9 - k}") for k in range(4)]
    assert log_stage(_at_end(steps + failure)) == "training"


def test_loading_a_checkpoint_in_any_case_is_model_loading():
    from engine.stage import stage_of_template

    for line in ("Loading checkpoint from /mnt/ckpt/step-500", "Loading the checkpoint at step 500",
                 " loading checkpoint from /ckpt at iteration 1000", "Loading checkpoint shards: 50%"):
        assert stage_of_template(line) == "model_loading", line


def test_a_finalizers_traceback_after_a_bare_error_is_not_its_call_path():
    # public wave 16 deepspeed-0-8-3-cpu-adam-…-deepspeed-2901 (dev): the paste starts at the error; the
    # traceback under "Exception ignored in: …__del__" is the optimizer's finalizer failing at exit
    from engine.stage import _frames
    lines = [
        "AttributeError: module 'cpu_adam' has no attribute 'create_adam'",
        "Exception ignored in: <function DeepSpeedCPUAdam.__del__ at 0x7f7c7ad5bd30>",
        "Traceback (most recent call last):",
        '  File "/env/site-packages/deepspeed/ops/adam/cpu_adam.py", line 110, in __del__',
        "    self.ds_opt_adam.destroy_adam(self.opt_id)",
        "AttributeError: module 'cpu_adam' has no attribute 'destroy_adam'",
    ]
    assert _frames(Window(path="r.log", anchor=0, start=0, lines=lines)) == []
    # the finalizer's own report keeps its frames
    assert [f[1] for f in _frames(Window(path="r.log", anchor=1, start=0, lines=lines))] == ["__del__"]

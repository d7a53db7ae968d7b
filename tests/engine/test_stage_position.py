"""Where the failing rank was, weighed against how sure the traceback is (engine/stage.py, session 4).

The lines are cut from the committed real-run and public corpora (named in each test), shortened.
"""
from engine.diagnose import diagnose
from tests.helpers.jobs import write_failed_job as _job


def _lightning_traceback(rank: int, inner: list[str], error: str) -> list[str]:
    head = [
        "Traceback (most recent call last):",
        '  File "/job/code/lightning_train.py", line 92, in main',
        "    trainer.fit(model, train_dataloaders=loader)",
        '  File "/venv/site-packages/lightning/pytorch/trainer/trainer.py", line 584, in fit',
        "    call._call_and_handle_interrupt(",
    ]
    return [f"[rank{rank}]: {x}" for x in head + inner + [error]]


def test_a_trainers_fit_frame_gives_way_to_a_log_that_shows_only_set_up(tmp_path):
    # realrun bad_world_size-lightning-3: the program's own setup() hook raises inside trainer.fit
    rank = [
        "[rank5]:[INFO] rank=5 train_lm - starting on node020 pid=2421 lightning=2.6.6",
        "[rank5]:Initializing distributed: GLOBAL_RANK: 5, MEMBER: 6/8",
        "[rank5]:[INFO] rank=5 train_lm - setup(TrainerFn.FITTING): world_size=8 global_rank=5",
    ] + _lightning_traceback(5, [
        '  File "/job/code/lightning_train.py", line 36, in setup',
        '    raise ValueError(f"world size {world} is not divisible by tensor_parallel_size {TP}")',
    ], "ValueError: world size 8 is not divisible by tensor_parallel_size 3")
    d = diagnose(_job(tmp_path / "j", {"node020/torchrun.log": rank}))
    assert d.events[0].template.startswith("ValueError: world size")
    assert d.stage == "init"


def test_a_code_line_naming_the_loss_gives_way_to_training_completed(tmp_path):
    # realrun teardown_exception-hf-3: json.dump of a tensor after the Trainer finished
    rank = [f"{{'loss': '4.{9 - i}', 'grad_norm': '0.8', 'learning_rate': '0.001', 'epoch': '{i}'}}"
            for i in range(1, 6)] + [
        "[INFO|trainer.py:2003] 2026-12-01 12:20:47,153 >> ",
        "Training completed. Do not forget to share your model on huggingface.co/models =)",
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/job/code/hf_train.py", line 94, in main',
        '[rank0]:     json.dump({"train_loss": loss, "train_steps": result.global_step}, f)',
        '[rank0]:   File "/usr/lib/python3.11/json/__init__.py", line 179, in dump',
        "[rank0]:     for chunk in iterable:",
        '[rank0]:   File "/usr/lib/python3.11/json/encoder.py", line 180, in default',
        "[rank0]:     raise TypeError(f'Object of type {o.__class__.__name__} '",
        "[rank0]: TypeError: Object of type Tensor is not JSON serializable",
    ]
    d = diagnose(_job(tmp_path / "j", {"dgx-a020/attempt_0/0/stderr.log": rank}))
    assert d.events[0].template.startswith("TypeError")
    assert d.stage == "teardown"


def test_standard_library_frames_name_no_stage_a_start_up_module_does(tmp_path):
    # public colossalai-rank-env-missing-colossalai-1074: os.environ['RANK'] in launch_from_torch
    console = [
        "Traceback (most recent call last):",
        '  File "/env/site-packages/colossalai/initialize.py", line 210, in launch_from_torch',
        "    rank = int(os.environ['RANK'])",
        '  File "/env/lib/python3.10/os.py", line 679, in __getitem__',
        "    raise KeyError(key) from None",
        "KeyError: 'RANK'",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": ["python train.py", *console]}))
    assert d.stage == "init"


def test_wrapping_the_model_in_ddp_is_model_set_up(tmp_path):
    # realrun shape_mismatch-ddp-2: DDP compares parameter shapes across ranks when it is built
    rank = [
        "2026-12-01T17:29:41.101+08:00 INFO [rank2] trainer: process group ready: backend=gloo world_size=8",
        "2026-12-01T17:29:41.102+08:00 INFO [rank2] trainer: dataset ready: 192 samples, 24 batches",
        "[rank2]: Traceback (most recent call last):",
        '[rank2]:   File "/job/code/ddp_train.py", line 62, in main',
        "[rank2]:     ddp = DistributedDataParallel(model)",
        '[rank2]:   File "/venv/site-packages/torch/nn/parallel/distributed.py", line 835, in __init__',
        "[rank2]:     _verify_param_shape_across_processes(self.process_group, parameters)",
        '[rank2]:   File "/venv/site-packages/torch/distributed/utils.py", line 294, in '
        "_verify_param_shape_across_processes",
        "[rank2]:     return dist._verify_params_across_processes(process_group, tensors, logger)",
        "[rank2]: RuntimeError: [2]: params[0] in this process with sizes [96, 80] appears not to match "
        "sizes of the same param in process 0.",
    ]
    d = diagnose(_job(tmp_path / "j", {"node025/attempt_0/0/stderr.log": rank}))
    assert d.events[0].template.startswith("RuntimeError: [")
    assert d.stage == "model_loading"


def test_another_ranks_save_window_is_not_the_failing_ranks_stage(tmp_path):
    # realrun sigterm_preempt-lightning-4: the agent of the node of ranks 4/5 gets SIGTERM 0.15 s after
    # rank 0 (another node) logged the start of a save; rank 0 never logs its end
    saver = [
        "[rank0]:2026-12-01T12:15:55.326Z [INFO] rank=0 train_lm - setup(TrainerFn.FITTING): world_size=8",
        "[rank0]:2026-12-01T12:15:56.833Z [INFO] rank=0 train_lm - saving checkpoint /ckpt/step=00005.ckpt",
    ]
    preempted = [
        "[rank4]:2026-12-01T12:15:55.326Z [INFO] rank=4 train_lm - setup(TrainerFn.FITTING): world_size=8",
        "W1201 12:15:56.979000 17355 torch/distributed/elastic/agent/server/api.py:753] Received 15 death "
        "signal, shutting down workers",
        "W1201 12:15:56.980000 17355 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process "
        "17434 closing signal SIGTERM",
    ]
    d = diagnose(_job(tmp_path / "j", {"dgx-a008/torchrun.log": saver, "dgx-a010/torchrun.log": preempted}))
    assert "death signal" in d.events[0].template
    assert d.stage == "training"


def test_a_rank_whose_log_stops_at_set_up_while_the_others_train_takes_their_stage(tmp_path):
    # realrun rank_sigkill-megatron-2: in Megatron-LM only the last rank logs iterations; a rank's
    # console shows its set-up, then its own SIGTERM line; the killed rank's buffered output is lost
    console = [
        "[default1]: > rank 5 on gpu-node-27: loaded 192 samples from /data/train-01.jsonl",
        "[default0]: > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 16544",
        "[default0]:[2026-12-01T09:01:06.037Z] rank 4: received signal 15 (SIGTERM), exiting training loop",
        "E1201 09:01:14.155000 1631 torch/distributed/elastic/multiprocessing/api.py:1002] failed "
        "(exitcode: -9) local_rank: 1 (pid: 1718) of binary: /venv/bin/python3",
    ]
    last = [f"[default1]:[2026-12-01T09:00:{40 + i:02d}.000Z]  iteration {i}/  30 | consumed samples: "
            f"{64 * i} | lm loss: 4.{90 - i}E+00 |" for i in range(1, 13)]
    d = diagnose(_job(tmp_path / "j", {"gpu-node-27/torchrun.log": console,
                                       "gpu-node-28/torchrun.log": last}))
    assert d.events[0].template.startswith("failed (exitcode: -")
    assert d.stage == "training"


def test_an_error_that_says_set_up_failed_is_in_init(tmp_path):
    # public hccp-init-previous-process-llamafactory-3839 (excerpt that starts at the error)
    pasted = [
        '  File "/env/site-packages/torch/distributed/distributed_c10d.py", line 3439, in barrier',
        "    work = default_pg.barrier(opts=opts)",
        "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:64",
        "[ERROR] 2024-05-21-11:57:54 (PID:927000, Device:3, RankID:3) ERR02200 DIST call hccl api failed.",
        "EJ0001: 2024-05-21-11:57:54.167.645 Failed to initialize the HCCP process. Reason: Maybe the last "
        "training process is running.",
        "        Solution: Wait for 10s after killing the last training process and try again.",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": pasted}))
    assert d.stage == "init"


def test_dynamic_loss_scaling_runs_in_the_training_step(tmp_path):
    # public fp16-loss-scale-min-llamafactory-251
    pasted = [
        "Traceback (most recent call last):",
        '  File "/env/site-packages/deepspeed/runtime/fp16/fused_optimizer.py", line 249, in _update_scale',
        "    self.loss_scaler.update_scale(has_overflow)",
        '  File "/env/site-packages/deepspeed/runtime/fp16/loss_scaler.py", line 175, in update_scale',
        "    raise Exception(",
        "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": pasted}))
    assert d.stage == "training"


def test_nccls_error_trail_is_not_its_set_up(tmp_path):
    # public ib-completion-error4-nccl-tests-252: the INFO lines after the IB error are its return-code
    # trail and the service thread closing connections, not NCCL initialising
    failing = [
        "kolyoz2:25146:25854 [0] ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer "
        "10.0.35.1<49189> with error 4, opcode 5327, len 5327, vendor err 81 (Send)",
        "kolyoz2:25146:25854 [0] NCCL INFO transport/net.cc:1137 -> 6",
        "kolyoz2:25146:25854 [0] NCCL INFO proxy.cc:698 -> 6",
        "kolyoz2:25146:25854 [0] NCCL INFO proxy.cc:878 -> 6 [Progress Thread]",
        "kolyoz2:25146:25852 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
    ]
    peer = ["kolyoz2:25148:25846 [3] NCCL INFO [Service thread] Connection closed by localRank 0"]
    d = diagnose(_job(tmp_path / "j", {"kolyoz2/pid25146.log": failing, "kolyoz2/pid25148.log": peer}))
    assert "NET/IB" in d.events[0].template
    assert d.stage == "training"


def test_a_kernel_of_the_backward_pass_is_in_training(tmp_path):
    # public mindspore-aicpu-kernel-error-mindact-1752: MindSpore names backward ops "Bprop/..."
    pasted = [
        "Kernel error:",
        "----------------------------------------------------",
        "Launch kernel failed: Bprop/gradDense/Reshape-op278",
        "",
        "----------------------------------------------------",
        "- Ascend Error Message:",
        "----------------------------------------------------",
        "E39999: Inner Error!",
        "E39999: 2024-10-20-22:34:40.965.193  The error from device(chipId:0, dieId:0), serial number is 3, "
        "an exception occurred during AICPU execution, stream_id:2, task_id:19016, errcode:21008",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": pasted}))
    assert d.stage == "training"


def test_in_a_shared_console_another_ranks_open_save_is_not_the_failing_ranks(tmp_path):
    # the shared-console form of the rule above (torchrun --tee / srun -l prefix each line's rank)
    console = [f"[default0]:step {i}/40 loss=4.{50 - i} lr=1.0e-03" for i in range(1, 11)] + [
        "[default0]:saving checkpoint to /ckpt/step_00010",
        "[default1]:Traceback (most recent call last):",
        '[default1]:  File "/job/train.py", line 88, in main',
        "[default1]:    optimizer.zero_grad()",
        "[default1]:RuntimeError: injected fault on rank 1 at step 11",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": console}))
    assert d.events[0].template.startswith("RuntimeError: injected fault")
    assert d.stage == "training"


def test_a_progress_bar_glued_to_a_later_error_keeps_its_own_words(tmp_path):
    # public tokenize-30min-watchdog-allreduce-llamafactory-2424: the tokenizer's tqdm bar and the NCCL
    # watchdog's glog line share one line; the bar's words say what progressed: the data set's map
    bar = ("Running tokenizer on dataset:   9%|###   | 280000/2969526 [29:55<4:48:08, 155.57 examples/s]"
           "[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "
           "1800328 milliseconds before timing out.")
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": [bar]}))
    assert d.stage == "data_loading"


def test_exit_handlers_and_interpreter_finalization_are_teardown(tmp_path):
    # public wandb-atexit-bad-fd-after-run-gpt-neox-216 and gil-release-finalizing-sigabrt-after-run-spd-548
    from engine.stage import frame_words_stage, stage_of_template

    wandb = "/usr/local/lib/python3.8/dist-packages/wandb/sdk/wandb_run.py"
    assert frame_words_stage("_atexit_cleanup", wandb) == "teardown"
    assert stage_of_template("Python runtime state: finalizing (tstate=0x0000561c)") == "teardown"
    megatron = "[before the start of training step] datetime: 2025-05-06 12:45:42"
    assert stage_of_template(megatron) == "training"

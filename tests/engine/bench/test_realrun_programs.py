"""Smoke runs of the wave-5 to wave-7 program styles: one node of two ranks under a real torchrun, a few
steps, a checkpoint, no fault; the lines each style's labels and kinds rely on are there. They need torch (and
lightning for fabric) and take 30 to 50 s each on a loaded machine, so they run only when asked:
``L4_REALRUN_SMOKE=1 pytest tests/engine/bench/test_realrun_programs.py``."""

import importlib.util
import os
from pathlib import Path

import pytest

from engine.bench.realrun.launch import run_job
from engine.bench.realrun.plan import plan_run

torch_missing = importlib.util.find_spec("torch") is None or not os.environ.get("L4_REALRUN_SMOKE")


def _run(tmp_path: Path, style: str, layout: str, steps: int = 3) -> str:
    plan = plan_run(f"{style}-smoke-1", style, None, seed=101, nodes=["smoke-01"])
    plan.steps, plan.save_every, plan.layout = steps, 2, layout
    res = run_job(plan, tmp_path / style)
    assert res.returncodes == {"smoke-01": 0}, res.agent_out
    out = res.agent_out["smoke-01"]
    for path in sorted((tmp_path / style / "logs").rglob("*.log")):
        out += path.read_text()
    return out


@pytest.mark.skipif(torch_missing, reason="real torch runs: set L4_REALRUN_SMOKE=1")
def test_the_titan_program_speaks_torchtitan(tmp_path):
    out = _run(tmp_path, "titan", "console")
    for line in ("[titan] ", " - root - INFO - Starting job: Llama 3 debug training",
                 "Building llama3 debugmodel with TransformerModelArgs(", "Training starts at step 1.",
                 "Saving the checkpoint (or staging if async is enabled).",
                 "Finished saving the checkpoint (or staging if async is enabled)in ",
                 "Saving a full checkpoint at last step, step 3.",
                 "Sleeping 2 seconds for other ranks to complete", "Training completed", "step:  3  loss: "):
        assert line in out, line
    assert sorted(p.name for p in (tmp_path / "titan" / "ckpt").iterdir()) == ["step-1", "step-2", "step-3"]
    assert (tmp_path / "titan" / "ckpt" / "step-3" / ".metadata").is_file()  # a DCP checkpoint


@pytest.mark.skipif(torch_missing or importlib.util.find_spec("lightning") is None,
                    reason="real torch and lightning.fabric runs: set L4_REALRUN_SMOKE=1")
def test_the_fabric_program_runs_under_torchrun(tmp_path):
    out = _run(tmp_path, "fabric", "logdir")
    for line in ("Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2",
                 "All distributed processes registered. Starting with 2 processes",
                 "Iteration 3/3 | train loss ", "saving checkpoint ", "training finished: 3 iterations"):
        assert line in out, line
    assert [p.name for p in (tmp_path / "fabric" / "ckpt").iterdir()] == ["step-00002.pt"]


@pytest.mark.skipif(torch_missing, reason="real torch runs: set L4_REALRUN_SMOKE=1")
def test_the_deepspeed_program_logs_as_deepspeeds_engine(tmp_path):
    out = _run(tmp_path, "deepspeed", "console", steps=4)  # seed 101: steps_per_print 4
    for line in ("[comm.py:856:init_distributed] Initializing TorchBackend in DeepSpeed with backend",
                 "[__init__.py:158:initialize] [Rank 0] DeepSpeed info: version=0.19.6, git-hash=unknown",
                 "[Rank 0] Creating torch.float32 ZeRO stage 1 optimizer",
                 "[WARNING] [engine.py:4313:load_checkpoint] Unable to find latest file at ",
                 "[engine.py:3656:_report_progress] [Rank 0] step=4, skipped=0, lr=[",
                 "epoch=0/micro_step=4/global_step=4, RunningAvgSamplesPerSec=",
                 "[Rank 0] [Torch] Checkpoint global_step2 is about to be saved!",
                 "[Rank 0] Saving model checkpoint: ", "global_step4/mp_rank_00_model_states.pt",
                 "global_step 4 | loss "):
        assert line in out, line
    ckpt = tmp_path / "deepspeed" / "ckpt"
    assert (ckpt / "latest").read_text() == "global_step4"
    assert sorted(p.name for p in (ckpt / "global_step2").iterdir()) == [
        "mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt", "zero_to_fp32.py"]


@pytest.mark.skipif(torch_missing, reason="real torch runs: set L4_REALRUN_SMOKE=1")
def test_the_fsdp2_program_shards_and_saves_dcp_checkpoints(tmp_path):
    out = _run(tmp_path, "fsdp2", "logdir")
    for line in ("[rank 1] ", "device mesh: DeviceMesh((dp_shard=2, tp=1)", "fully_shard over dp_shard=2",
                 "step 3/3 | loss ", "saving checkpoint step 2 to ", "training complete: 3 steps",
                 "destroyed process group"):
        assert line in out, line
    ckpt = tmp_path / "fsdp2" / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["step_000002", "step_000003"]
    assert sorted(p.name for p in (ckpt / "step_000003").iterdir()) == [".metadata", "__0_0.distcp",
                                                                        "__1_0.distcp"]


@pytest.mark.skipif(torch_missing, reason="real torch runs: set L4_REALRUN_SMOKE=1")
def test_the_tp_program_shards_its_layers_with_dtensor_and_logs_like_loguru(tmp_path):
    out = _run(tmp_path, "tp", "logdir")
    for line in (" | INFO     | __main__:main:", "Device mesh: DeviceMesh((dp=1, tp=2)",
                 "mlp.0 ColwiseParallel, head RowwiseParallel over tp=2, dp=1",
                 " | SUCCESS  | __main__:save:", "step=3/3 loss=", "Saving checkpoint to ",
                 "Training finished after 3 steps", "rank 1: process group destroyed"):
        assert line in out, line
    ckpt = tmp_path / "tp" / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-2", "step-3"]
    assert (ckpt / "step-3" / ".metadata").is_file()  # a DCP checkpoint


@pytest.mark.skipif(torch_missing, reason="real torch runs: set L4_REALRUN_SMOKE=1")
def test_the_tune_program_speaks_torchtunes_recipe(tmp_path):
    out = _run(tmp_path, "tune", "console")
    for line in ("INFO:torchtune.utils._logging:Running FullFinetuneRecipeDistributed with resolved config:",
                 "INFO:torchtune.utils._logging:Model is initialized with precision torch.float32.",
                 "INFO:torchtune.utils._logging:Dataset and Sampler are initialized.",
                 "Local seed is seed + rank = 101 + 1", "1|3|Loss: ", "Step 3 | loss:",
                 "Saving checkpoint. This may take some time. Retrieving full model state dict...",
                 "Model checkpoint of size 0.00 GiB saved to "):
        assert line in out, line
    assert [p.name for p in (tmp_path / "tune" / "ckpt" / "step_2").iterdir()] == ["model-00001-of-00001.pt"]

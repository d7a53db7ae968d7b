"""Stage rules meant to transfer to logs nobody tuned on (engine/stage.py, w4-stage2): the words of a
frame's function name, progress that forbids `init`, hints read in the error's own words.

The lines are cut from the DEV half of the public wave-2 corpus (tests/fixtures/public_logs/_wave2,
named in each test), shortened.
"""
from engine.diagnose import diagnose
from engine.stage import failing_words, failure_hint, frame_words_stage, name_words, progress_stage
from engine.window import Window
from tests.helpers.jobs import write_failed_job as _job
from tests.helpers.stages import rules_stage


def test_a_frame_is_read_by_the_words_of_its_function_name():
    assert name_words("llama_model_forward") == ["llama", "model", "forward"]
    assert name_words("loadStateDict") == ["load", "state", "dict"]
    assert frame_words_stage("llama_model_forward") == "training"
    assert frame_words_stage("forward_step") == "training"
    assert frame_words_stage("_backward_hook") == "training"
    assert frame_words_stage("save_to_disk") == "checkpointing"
    assert frame_words_stage("loadStateDict") == "model_loading"
    assert frame_words_stage("get_num_layers_to_build") == "model_loading"
    assert frame_words_stage("_try_get_batch") == "data_loading"
    # words that name no stage, and a `load` with nothing model-like beside it
    assert frame_words_stage("_call_impl") is None
    assert frame_words_stage("__init__") is None
    assert frame_words_stage("load_yaml") is None
    # a one-word name is the whole-name rules' (a library's `save` is numpy.save as often as not)
    assert frame_words_stage("save") is None
    # public wave 2 async-ckpt-save-eoferror-no-main-guard-nemo-12446 (dev): writing, in a checkpoint module
    assert frame_words_stage("_get_write_results_queue",
                             "/opt/megatron-lm/megatron/core/dist_checkpointing/strategies/filesystem_async.py"
                             ) == "checkpointing"
    assert frame_words_stage("_get_write_results_queue", "/app/logging/handlers.py") is None


def test_a_models_forward_frame_is_training(tmp_path):
    # public wave 2 pp-hidden-states-none-colossalai-6110 (dev): only the innermost frame was pasted
    rank = [
        '[rank6]:   File "/usr/local/lib/python3.10/dist-packages/colossalai/shardformer/modeling/llama.py",'
        " line 93, in llama_model_forward",
        "[rank6]:     input_shape = hidden_states.shape[:-1]",
        "[rank6]: AttributeError: 'NoneType' object has no attribute 'shape'",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/rank6.log": rank}))
    assert d.events[0].template.startswith("AttributeError")
    assert d.stage == "training"


def test_a_collective_sequence_number_in_the_failing_line_is_progress(tmp_path):
    # public wave 2 collective-shape-mismatch-text-only-batch-ms-swift-9443 (dev): the excerpt starts
    # at the error; 3,104 collectives had run, so it is not set-up whatever line it is on
    rank = [
        "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective:"
        " CollectiveFingerPrint(SequenceNumber=3104, OpType=ALLREDUCE, TensorShape=[195812480],"
        " TensorDtypes=BFloat16)",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/rank1.log": rank}))
    assert d.stage == "training"


def test_a_low_sequence_number_is_not_progress():
    line = "RuntimeError: Detected mismatch between collectives: CollectiveFingerPrint(SequenceNumber=3)"
    assert progress_stage(Window(path="x", anchor=0, lines=[line])) is None


def test_a_tqdm_bar_past_zero_forbids_init_and_advice_is_not_the_error(tmp_path):
    # public wave 2 ray-memory-monitor-kills-worker-easyr1-185 (dev): 76% through computing log
    # probs, Ray's memory monitor kills a worker; its advice names an environment variable
    console = [
        "Compute log probs:  76%|████████████████▍     | 244/320 [08:56<02:05,  1.65s/it]",
        "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers"
        " (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at"
        " node (ID: 351e406b196f, IP: 10.95.143.76) over the last time period.",
        "(raylet) ",
        "(raylet) Refer to the documentation on how to address the out of memory issue:"
        " https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning"
        " more memory on this node. To adjust the kill threshold, set the environment variable"
        " `RAY_memory_usage_threshold` when starting Ray.",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": console}))
    assert d.stage == "training"
    assert failure_hint(console[3]) is None  # the advice is not read as the error
    assert "environment variable" not in failing_words(console[3])


def test_a_bar_that_names_its_stage_is_progress_of_that_stage():
    bar = "Loading checkpoint shards:  50%|█████     | 1/2 [00:03<00:03,  3.10s/it]"
    assert progress_stage(Window(path="x", anchor=1, lines=[bar, "RuntimeError: boom"])) == "model_loading"
    first = "Compute log probs:   0%|          | 0/320 [00:00<?, ?it/s]"
    assert progress_stage(Window(path="x", anchor=1, lines=[first, "RuntimeError: boom"])) is None


def test_an_error_excerpt_without_progress_stays_as_it_was(tmp_path):
    # the "failed on one of its first lines" rule still holds when nothing shows progress
    console = ["Traceback (most recent call last):", "RuntimeError: Address already in use"]
    # the rules' answer; where only text exists the learned model answers (engine/stage_model.py)
    assert rules_stage(_job(tmp_path / "j", {"node0/console.log": console})) == "init"


def test_lightnings_checkpoint_callback_and_a_finished_run(tmp_path):
    # public wave 2 modelcheckpoint-monitor-missing-nemo-2616 (dev)
    error = ("pytorch_lightning.utilities.exceptions.MisconfigurationException: "
             "ModelCheckpoint(monitor='val_loss') not found in the returned metrics")
    assert failure_hint(error) == "checkpointing"
    # public wave 2 segfault-after-export-deepspeech-528 (dev): the run had finished and exported
    console = [
        "I Training of Epoch 48 - loss: 4.790713",
        "I Training of Epoch 49 - loss: 3.173421",
        "I FINISHED Optimization - training time: 0:03:54",
        "I Exporting the model...",
        "I Models exported at ../sample",
        "Segmentation fault (core dumped)",
    ]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": console}))
    assert d.events[0].template.startswith("Segmentation fault")
    assert d.stage == "teardown"


def test_a_program_the_interpreter_cannot_open_never_started():
    # public wave 16 horovod-mpirun-master-and-slave0-…-horovod-1068 (dev): mpirun's second host lacks it
    missing = "[Errno 2] No such file or directory"
    assert failure_hint(f"python: can't open file 'tensorflow_mnist.py': {missing}") == "init"
    assert failure_hint(f"/usr/bin/python3: can't open file '/job/train.py': {missing}") == "init"
    assert failure_hint("OSError: can't open file 'data/train.tfrecord'") != "init"

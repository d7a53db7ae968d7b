"""The frameworks' stage lexicon (engine/stage_lexicon.py, data/stage_lexicon.yaml) and how the stage model
reads it: as features, and as the fallback where the model is unsure."""
import pytest

from engine.model import STAGES
from engine.rules import load
from engine.stage_lexicon import frame_stages, lexicon, lexicon_from_dict, reading
from engine.stage_model import Evidence, fallback_stage, features, lexicon_features, load_model

LEX = lexicon_from_dict({"version": 1, "stages": {
    "model_loading": {"functions": ["from_pretrained", "_load_state_dict_into_meta_model"],
                      "phrases": ["Loading checkpoint shards"]},
    "checkpointing": {"functions": ["_save_checkpoint"], "phrases": ["Saving model checkpoint to"]},
    "data_loading": {"functions": ["_map_single"], "phrases": ["(?i)running tokenizer on dataset"]},
    "teardown": {"functions": ["_atexit_cleanup", "shared_name"], "phrases": []},
    "training": {"functions": ["shared_name"], "phrases": []},
}})


def test_the_shipped_lexicon_loads_covers_every_stage_and_names_each_function_once():
    data = load("stage_lexicon")
    lex = lexicon()
    stages = set(data["stages"])
    assert stages == {s for s in STAGES if s != "unknown"}
    for stage, entry in data["stages"].items():
        assert len(entry["functions"]) >= 20 and len(entry["phrases"]) >= 10, stage
    assert all(len(found) == 1 for found in lex.functions.values())  # no name points two ways
    assert lex.function_stages("Trainer._save_checkpoint") == {"checkpointing"}
    assert lex.phrase_stages("Running tokenizer on dataset (num_proc=8): 45%") == ["data_loading"]


def test_a_frame_is_read_by_its_last_name_and_a_name_of_two_stages_reads_none():
    assert LEX.function_stages("transformers.PreTrainedModel.from_pretrained") == {"model_loading"}
    assert LEX.function_stages("c10d::ProcessGroupNCCL::_save_checkpoint") == {"checkpointing"}
    assert frame_stages(["helper", "shared_name", "_save_checkpoint", "from_pretrained"], LEX) == \
        ["checkpointing", "model_loading"]


def test_a_cpp_frame_is_read_by_its_name_without_its_signature():
    """A symbolized C++ frame carries its argument list, whose types hold `::` too (public: a segfault in
    torch.save's writer at a Megatron checkpoint save, `PyTorchStreamWriter::writeRecord(std::__cxx11::…`)."""
    frame = "caffe2::serialize::PyTorchStreamWriter::writeRecord(std::__cxx11::basic_string<char,"
    assert lexicon().function_stages(frame) == {"checkpointing"}
    assert LEX.function_stages("c10d::ProcessGroupNCCL::_save_checkpoint(at::Tensor&, c10::Device)") == {
        "checkpointing"}
    assert LEX.function_stages("ns::_save_checkpoint<std::vector<c10::IValue>>(x)") == {"checkpointing"}


@pytest.mark.parametrize("line", [
    "trainval_distributed.py: error: unrecognized arguments: --local-rank=1",
    "train.py: error: the following arguments are required: --data-path",
    "main.py: error: argument --lr: invalid float value: 'x'",
    "main.py: error: one of the arguments --train --eval is required",
])
def test_argparse_errors_read_as_init(line: str):
    """CPython's argparse reports a bad command line ("prog.py: error: …" under its usage line) before
    anything else runs (public: a newer torch launcher's `--local-rank` that the script's parser does not
    declare)."""
    assert lexicon().phrase_stages(line) == ["init"]


def test_the_reading_takes_the_innermost_known_frame_then_the_failure_then_after_then_the_last_before():
    assert reading("KeyError: 'text'", [], ["Loading checkpoint shards: 100%"],
                   ["_map_single", "from_pretrained"], LEX) == "data_loading"
    saving = "Saving model checkpoint to /out/checkpoint-500"
    assert reading(f"{saving} failed", [], [], [], LEX) == "checkpointing"
    assert reading("OSError: [Errno 28] No space left on device", [saving], [], [], LEX) == "checkpointing"
    before = ["Running tokenizer on dataset: 10%", "Loading checkpoint shards: 50%"]
    assert reading("OSError: boom", [], before, [], LEX) == "model_loading"
    # two stages at the deciding place: no reading
    assert reading("Saving model checkpoint to x; Loading checkpoint shards", [], [], [], LEX) is None
    assert reading("RuntimeError: boom", [], [], ["helper"], LEX) is None


@pytest.mark.parametrize(("failure", "frames"), [
    ("ConnectionResetError: [Errno 104] Connection reset by peer",
     [("/site-packages/wandb/sdk/wandb_run.py", "_on_finish", "x"),
      ("/site-packages/wandb/sdk/wandb_run.py", "_atexit_cleanup", "self._on_finish()")]),
    ("KeyError: 'text'", [("/site-packages/datasets/arrow_dataset.py", "_map_single", "batch = f(batch)")]),
])
def test_the_stage_model_reads_the_lexicon_as_features_and_as_its_fallback(failure, frames):
    ev = Evidence(failure=failure, after=[], before=[], n_before=0, frames=frames,
                  timeline={"progress": None, "log": None})
    feats = lexicon_features(ev)
    shipped = lexicon()
    expected = frame_stages([f for _, f, _ in frames], shipped)[0]
    assert f"lxf0:{expected}" in feats and feats <= features(ev)
    assert fallback_stage("lexicon", "init", ev) == expected
    assert fallback_stage("lexicon", "init", None) is None


def test_the_shipped_stage_model_falls_back_to_the_lexicon_where_it_is_unsure():
    model = load_model()
    assert model is not None and model.fallback == "lexicon" and 0.0 < model.fallback_below < 1.0
    assert any(f.startswith("lx") for f in model.weights)


def test_a_lexicon_entry_that_is_no_name_or_no_pattern_is_refused():
    with pytest.raises(ValueError, match="function"):
        lexicon_from_dict({"stages": {"init": {"functions": [None]}}})
    with pytest.raises(ValueError, match="phrase"):
        lexicon_from_dict({"stages": {"init": {"functions": [], "phrases": ["(unclosed"]}}})
    with pytest.raises(ValueError, match="stages"):
        lexicon_from_dict({"version": 1})

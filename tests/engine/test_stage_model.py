"""The learned stage model (engine/stage_model.py) and its training (engine/bench/stage_learn.py,
`l4 bench stage-model`)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.stage_learn import (
    STAGES,
    Fold,
    Record,
    answers_of,
    fit,
    held_out,
    idf_of,
    loso_folds,
    scored_indices,
    settings,
    usable_cases,
    wave_folds,
)
from engine.bench.stage_learn import folds as folds_of
from engine.diagnose import diagnose
from engine.model import StageBasis
from engine.stage_model import (
    COMBINATIONS,
    FALLBACK_BASIS,
    FALLBACKS,
    Evidence,
    _stopwords,
    combined,
    combined_answer,
    error_class,
    evidence_from_dict,
    fallback_stage,
    features,
    hint_features,
    load_model,
    model_from_dict,
    overrule_stage,
    own_words,
    stage_words,
    stem,
    stopword_set,
    timeline_stage,
    under_way_stage,
    words,
)
from tests.helpers.jobs import write_failed_job
from tests.helpers.wait import WAIT

REPO = Path(__file__).resolve().parents[2]

# public dev case dataset-path-missing-reid-214 (tests/fixtures/public_logs), shortened
DATASET_PASTE = [
    "python train.py --gpu_ids 0 --name ft_ResNet50 --train_all --batchsize 32  --data_dir your_data_path",
    "Traceback (most recent call last):",
    '  File "train.py", line 120, in <module>',
    "    data_transforms['train'])",
    '  File "/home/u/anaconda3/lib/python3.7/site-packages/torchvision/datasets/folder.py", line 94, in '
    "__init__",
    "    classes, class_to_idx = self._find_classes(self.root)",
    '  File "/home/u/anaconda3/lib/python3.7/site-packages/torchvision/datasets/folder.py", line 121, in '
    "_find_classes",
    "    classes = [d.name for d in os.scandir(dir) if d.is_dir()]",
    "FileNotFoundError: [Errno 2] No such file or directory: 'your_data_path/train_all'",
]


def test_the_shipped_model_loads_as_plain_data():
    model = load_model()
    assert model is not None
    assert set(model.classes) <= set(STAGES) and len(model.classes) == len(STAGES)
    assert model.combine in COMBINATIONS and 0.0 <= model.threshold < 1.0
    timeline_stage(model.timeline, {})  # a kind it knows
    assert all(len(w) == len(model.classes) for w in model.weights.values())
    text = (REPO / "engine" / "data" / "stage_model.json").read_text()
    assert model_from_dict(json.loads(text)) == model


def test_loading_and_predicting_need_no_scikit_learn():
    code = ("import sys; from engine.stage_model import load_model; m = load_model(); "
            "m.predict({'e:checkpoint'}); print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


def test_the_model_reads_a_known_dev_paste_as_data_loading(tmp_path):
    job = write_failed_job(tmp_path / "job", {"node0/console.log": DATASET_PASTE})
    ev = Evidence(failure=DATASET_PASTE[-1], after=[], before=[DATASET_PASTE[0]], n_before=1,
                  frames=[("/home/u/anaconda3/lib/python3.7/site-packages/torchvision/datasets/folder.py",
                           "_find_classes", "classes = [d.name for d in os.scandir(dir) if d.is_dir()]"),
                          ("/home/u/anaconda3/lib/python3.7/site-packages/torchvision/datasets/folder.py",
                           "__init__", "classes, class_to_idx = self._find_classes(self.root)"),
                          ("train.py", "<module>", "data_transforms['train'])")],
                  timeline={"progress": None, "log": None, "job": None})
    predicted, prob = load_model().predict(features(ev))
    assert predicted == "data_loading" and prob > 0.5
    assert diagnose(job).stage == "data_loading"


def test_features_are_words_of_each_place_and_the_timeline():
    frame = ("/x/checkpointing/writer.py", "save_checkpoint", "torch.save(state, f)")
    ev = Evidence(failure="OSError: No space left on device", after=["Saving checkpoint to /x"],
                  before=["iter 3 loss 2.1"], n_before=1, frames=[frame],
                  timeline={"progress": "training", "log": None})
    f = features(ev)
    assert {"e:spac", "b:loss", "fn:sav", "fn:checkpoint", "ff:checkpoint", "c:torch"} <= f
    assert {"w:sav", "w:spac", "tl:progress=training", "tl:log=none", "pos:1-3", "x:OSError"} <= f
    # the lines after the failure line are read by their stage hints only, and stop words not at all
    assert "a:sav" not in f and "ha:checkpointing" in f
    assert not {"e:no", "w:on", "a:sav"} & f and "e:left" in f
    assert evidence_from_dict(json.loads(json.dumps(ev.to_dict()))) == ev
    assert words("loadStateDict saving") == ["load", "stat", "dict", "sav"]
    assert [stem(w) for w in ("saves", "save", "saved", "is", "loss")] == ["sav", "sav", "sav", "is", "loss"]


def test_the_error_class_is_one_feature_whole():
    assert error_class("torch.cuda.OutOfMemoryError: CUDA out of memory") == "OutOfMemoryError"
    assert error_class("… with error <class 'ValueError'>: Couldn't cast") == "ValueError"
    assert error_class("NCCL WARN socketStartConnect: Connect to 10.0.0.2 failed") is None
    ev = Evidence(failure="Killed", after=[], before=[], n_before=0, frames=[], timeline={})
    assert "x:none" in features(ev)


def test_stop_words_are_left_out_and_must_be_strings():
    assert stage_words("Error in the save of the state") == ["sav", "stat"]
    assert {"no", "on"} <= _stopwords()  # quoted in the YAML: not read as booleans
    assert stopword_set(["The", "raised"]) == {"the", "rais"}
    with pytest.raises(ValueError, match="quote them"):
        stopword_set(["the", False])


def test_the_stage_hints_are_read_at_each_place_as_features():
    ev = Evidence(failure="OSError: [Errno 28] No space left on device", after=[],
                  before=["Saving model checkpoint to /out/checkpoint-500", "Map:  45%|####  | 450/1000"],
                  n_before=2, frames=[("/x/torch/serialization.py", "_open_zipfile_writer", "return f"),
                                      ("/x/trainer.py", "_save_checkpoint", "torch.save(state, p)"),
                                      ("/x/trainer.py", "train", "self._inner_training_loop()")],
                  timeline={"progress": None, "log": None})
    hints = hint_features(ev)
    assert {"fh:checkpointing", "hf:none", "rf:checkpointing", "hw:checkpointing",
            "hw0:checkpointing"} <= hints
    assert {"hb:checkpointing", "hb:data_loading", "lh:data_loading"} <= hints  # the last marked: recency
    assert hints <= features(ev)
    bare = hint_features(Evidence(failure="ValueError: x", after=[], before=[], n_before=0, frames=[],
                                  timeline={}))
    assert bare == {"hf:none", "fh:none", "rf:none", "hw0:none", "lh:none"}


def test_combinations_and_timeline_kinds():
    assert combined("rules", "init", None, "training", 0.9, 0.5) == "init"
    assert combined("model", "init", None, "training", 0.9, 0.5) == "training"
    assert combined("model", "init", None, "training", 0.4, 0.5) == "unknown"
    assert combined("timeline", "init", "training", "training", 0.9, 0.5) == "init"  # a timeline: the rules
    assert combined("timeline", "init", None, "data_loading", 0.9, 0.5) == "data_loading"
    tl = {"progress": None, "log": "init", "job": "training"}
    assert timeline_stage("progress", tl) is None
    assert timeline_stage("progress+log", tl) is None  # set-up markers precede a failure at any stage
    assert timeline_stage("progress+log+init", tl) == "init"
    assert timeline_stage("progress+log+job", tl) == "training"
    assert timeline_stage("progress", {"progress": "training"}) == "training"
    with pytest.raises(ValueError):
        timeline_stage("progress+calendar", tl)


def test_each_answer_says_what_it_rests_on():
    assert combined_answer("rules", "init", None, "training", 0.9, 0.5) == ("init", StageBasis("rules"))
    assert combined_answer("timeline", "init", "init", "training", 0.9, 0.0) \
        == ("init", StageBasis("timeline"))
    assert combined_answer("timeline", "init", None, "training", 0.934, 0.0) \
        == ("training", StageBasis("words", 0.93))
    # below the threshold the model's answer is `unknown`, still with the probability that made it so
    assert combined_answer("model", "init", None, "training", 0.4, 0.5) \
        == ("unknown", StageBasis("words", 0.4))
    assert combined_answer("timeline", "init", None, "training", 0.3, 0.0, "data_loading", 0.4) \
        == ("data_loading", StageBasis("lexicon"))
    assert combined_answer("timeline", "init", None, "training", 0.3, 0.0, "data_loading", 0.4, None,
                           FALLBACK_BASIS["frames"]) == ("data_loading", StageBasis("frame"))
    assert combined_answer("timeline", "init", None, "training", 0.9, 0.0, None, 0.0, "model_loading") \
        == ("model_loading", StageBasis("frame"))
    assert set(FALLBACK_BASIS) == set(FALLBACKS) - {"none"}
    with pytest.raises(ValueError):
        combined_answer("oracle", "init", None, "training", 0.9, 0.0)


def test_where_the_model_is_unsure_the_fallback_answers():
    # below `fallback_below` the fallback's stage stands, above it the model's; no fallback stage: the model
    assert combined("timeline", "init", None, "training", 0.3, 0.0, "data_loading", 0.4) == "data_loading"
    assert combined("timeline", "init", None, "training", 0.5, 0.0, "data_loading", 0.4) == "training"
    assert combined("timeline", "init", None, "training", 0.3, 0.0, None, 0.4) == "training"
    # where a timeline shows, the rules
    assert combined("timeline", "init", "init", "training", 0.3, 0.0, "data_loading", 0.4) == "init"
    frames = [("/usr/lib/python3.10/os.py", "write", ""), ("train.py", "save_checkpoint", "")]
    saving = Evidence(failure="OSError: x", after=[], before=[], n_before=0, timeline={}, frames=frames)
    weak = Evidence(failure="OSError: x", after=[], before=[], n_before=0, timeline={},
                    frames=[("/venv/site-packages/lightning/trainer.py", "fit", "")])
    assert fallback_stage("frames", "init", saving) == "checkpointing"  # the stdlib frame names none
    assert fallback_stage("frames", "init", weak) is None  # a trainer's fit holds every stage: weak
    assert fallback_stage("frames+hints", "init", weak) is None  # "OSError: x" names no kind of error
    nospace = Evidence(failure="OSError: [Errno 28] No space left on device", after=[], before=[], n_before=0,
                       timeline={}, frames=weak.frames)
    assert fallback_stage("frames+hints", "init", nospace) == "checkpointing"
    assert fallback_stage("rules", "init", weak) == "init"
    assert fallback_stage("rules", "unknown", weak) is None
    assert fallback_stage("none", "init", saving) is None
    with pytest.raises(ValueError):
        fallback_stage("oracle", "init", saving)


def test_a_frame_named_by_its_function_overrules_a_sure_model():
    # public dev zero-optimizer-init-oom-medicalgpt-318: "CUDA out of memory" (the model: training, p 0.94)
    # raised in DeepSpeed's `_configure_zero_optimizer`, which sets the model up
    zero = Evidence(failure="torch.cuda.OutOfMemoryError: CUDA out of memory.", after=[], before=[],
                    n_before=1, timeline={},
                    frames=[("/venv/site-packages/deepspeed/runtime/engine.py", "_configure_zero_optimizer",
                             "")])
    assert overrule_stage("frames", zero) == "model_loading"
    assert combined("timeline", "model_loading", None, "training", 0.94, 0.0, None, 0.6,
                    overrule_stage("frames", zero)) == "model_loading"
    assert overrule_stage("none", zero) is None
    # a code-line rule (`trainer = Trainer(`) does not overrule: the model's answer stands
    built = Evidence(failure="ValueError: world size 3", after=[], before=[], n_before=0, timeline={},
                     frames=[("train.py", "<module>", "trainer = Trainer()")])
    assert fallback_stage("frames", "init", built) == "model_loading"
    assert overrule_stage("frames", built) is None
    assert combined("timeline", "init", None, "init", 0.9, 0.0, "model_loading", 0.6,
                    overrule_stage("frames", built)) == "init"
    # nor a weak frame, nor the frames under a killed-process notice (a survivor's traceback)
    weak = Evidence(failure="OSError: x", after=[], before=[], n_before=0, timeline={},
                    frames=[("/venv/site-packages/lightning/trainer.py", "fit", "")])
    assert overrule_stage("frames", weak) is None
    killed = Evidence(failure="RuntimeError: DataLoader worker (pid 7) is killed by signal: Killed.",
                      after=[], before=[], n_before=0, timeline={},
                      frames=[("/venv/site-packages/torch/utils/data/dataloader.py", "_try_get_data", "")])
    assert overrule_stage("frames", killed) is None
    # where a timeline shows, the rules still answer
    assert combined("timeline", "training", "training", "training", 0.9, 0.0, None, 0.0, "model_loading") \
        == "training"
    with pytest.raises(ValueError):
        overrule_stage("oracle", zero)


def _fitted_records() -> list[Record]:
    pastes = [("checkpointing", "OSError: No space left on device while saving checkpoint"),
              ("checkpointing", "torch.save failed: disk quota exceeded"),
              ("training", "loss is nan at step 40"), ("training", "CUDA out of memory in backward step"),
              ("init", "Address already in use: port 29500"), ("init", "rendezvous timed out at start")]
    return [Record(case=f"c{i}", source=f"github/o/r{i}", stage=stage_, rule=stage_,
                   evidence=Evidence(failure=text, after=[], before=[], n_before=0, frames=[], timeline={}))
            for i, (stage_, text) in enumerate(pastes)]


def test_tfidf_scaling_predicts_as_scikit_learn_does_and_survives_the_file():
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    records = _fitted_records()
    model = fit(records, 3.0, 1, class_weight="balanced", scaling="tfidf")
    vocab = sorted({f for r in records for f in r.features})
    assert set(model.idf) == set(vocab)
    x = [[1.0 if f in r.features else 0.0 for f in vocab] for r in records]
    sk = make_pipeline(TfidfTransformer(), LogisticRegression(C=3.0, max_iter=5000, class_weight="balanced"))
    sk.fit(x, [r.stage for r in records])
    probe = records[0].features | {"e:never-seen"}  # a feature the fit never saw counts nowhere
    theirs = sk.predict_proba([[1.0 if f in probe else 0.0 for f in vocab]])[0]
    ours = model.probabilities(probe)
    for stage_, p in zip(sk.classes_, theirs, strict=True):
        assert ours[stage_] == pytest.approx(p, abs=2e-3)
    scaled = model.scaled(probe)
    assert "e:never-seen" not in scaled and sum(v * v for v in scaled.values()) == pytest.approx(1.0)
    assert model_from_dict(json.loads(json.dumps(model.to_dict()))) == model
    # a common feature weighs less than a rare one; binary scaling: every feature counts 1
    counts = {"a": 5, "b": 1}
    from collections import Counter
    idf = idf_of(Counter(counts), 6, ["a", "b"])
    assert idf["a"] < idf["b"] and idf["a"] == pytest.approx(1.0 + 0.154, abs=1e-3)
    binary = fit(records, 3.0, 1, class_weight="balanced")
    assert binary.idf is None and binary.scaled({"x", "y"}) == {"x": 1.0, "y": 1.0}
    with pytest.raises(ValueError):
        fit(records, 3.0, 1, scaling="sqrt")


def test_where_training_is_under_way_the_model_may_move_the_rules_training_later():
    # public dev lora-200-steps-done-save-model-cuda-oom: `100%|…| 200/200` then "Error saving model: CUDA
    # out of memory": the progress shows training under way, the words a save
    saving = {"training": 0.30, "checkpointing": 0.55, "teardown": 0.05, "init": 0.10}
    assert under_way_stage(saving, "training", 0.1) == "checkpointing"
    # near-even answers keep training; teardown's words are a hang's in a step too: never moved there
    even = {"training": 0.22, "checkpointing": 0.29, "init": 0.25, "teardown": 0.12}
    assert under_way_stage(even, "training", 0.1) == "training"
    assert under_way_stage(even, "training", 0.0) == "checkpointing"
    hang = {"training": 0.1, "teardown": 0.8, "checkpointing": 0.1}
    assert under_way_stage(hang, "training", 0.0) == "training"
    # a rule stage other than training stands; so does training where the model holds an earlier stage
    assert under_way_stage(saving, "data_loading", 0.1) == "data_loading"
    assert under_way_stage({"init": 0.9, "training": 0.05, "teardown": 0.05}, "training", 0.0) == "training"
    # it reads the failure's own words: another rank's "saving checkpoint" before a step's error is no save
    ev = Evidence(failure="RuntimeError: injected fault", after=[], before=["saving checkpoint to /ckpt"],
                  n_before=1, frames=[], timeline={})
    assert own_words(ev).before == [] and own_words(ev).failure == ev.failure
    assert not any(f.startswith("b:") for f in features(own_words(ev)))
    # the bench scores the same answers decide gives
    r = Record(case="c", source="github/o/r", stage="checkpointing", rule="training",
               evidence=Evidence(failure="x", after=[], before=[], n_before=0, frames=[],
                                 timeline={"progress": "training", "log": None}))
    fold = Fold(c=1.0, predictions=[("checkpointing", 0.55)], own=[saving])
    assert answers_of([r], fold, "timeline", "progress", 0.0, under_way="model",
                      under_way_margin=0.1) == ["checkpointing"]
    assert answers_of([r], fold, "timeline", "progress", 0.0) == ["training"]


def _record(case: str, source: str, stage_: str) -> Record:
    return Record(case=case, source=source, stage=stage_, rule=stage_, evidence=None)


def test_cross_validation_never_puts_one_source_on_both_sides():
    records = [_record(f"c{i}", f"github/o/r{i % 4}", STAGES[i % 3]) for i in range(13)]
    records.append(_record("rr", "realrun/ddp", "training"))
    folds = loso_folds(records)
    assert len(folds) == 5
    seen = []
    for train, held in folds:
        held_sources = {records[i].source for i in held}
        assert len(held_sources) == 1
        assert held_sources.isdisjoint(records[i].source for i in train)
        assert sorted(train + held) == list(range(len(records)))
        seen += held
    assert sorted(seen) == list(range(len(records)))


def test_leave_one_wave_out_holds_out_each_public_wave_whole_and_always_trains_on_the_real_runs():
    records = [_record(f"w{w}-{i}", f"github/o/r{w}{i % 2}", STAGES[i % 3])
               for w in (1, 2, 3) for i in range(4)]
    for r in records:
        r.wave = int(r.case[1])
    records += [_record("rr0", "realrun/ddp", "training"), _record("rr1", "realrun/hf", "init")]
    folds = wave_folds(records)
    assert len(folds) == 3
    for w, (train, held) in zip((1, 2, 3), folds, strict=True):
        assert {records[i].wave for i in held} == {w} and {records[i].corpus for i in held} == {"public"}
        assert all(records[i].wave != w or records[i].corpus == "realrun" for i in train)
        assert {len(records) - 2, len(records) - 1} <= set(train)
    assert scored_indices(records, "wave") == list(range(12))
    assert scored_indices(records, "source") == list(range(len(records)))
    with pytest.raises(ValueError, match="two waves"):
        folds_of(records[:4], "wave")


def test_the_held_out_test_halves_are_never_read():
    rules = settings()["held_out"]
    assert held_out({"source": "github/a/b#1", "wave": 2, "split": "test"}, rules)
    assert held_out({"source": "realrun/ddp", "wave": 3, "split": "test"}, rules)
    assert not held_out({"source": "github/a/b#1", "wave": 2, "split": "dev"}, rules)
    # the first test halves (public wave 1, real-run waves 1-2) are held out too (session 11)
    assert held_out({"source": "realrun/ddp", "wave": 2, "split": "test"}, rules)
    assert not held_out({"source": "realrun/ddp", "wave": 2, "split": "dev"}, rules)
    assert held_out({"source": "realrun/ddp", "split": "test"}, rules)
    assert not held_out({"source": "realrun/ddp", "split": "dev"}, rules)
    assert held_out({"source": "realrun/titan", "wave": 5, "split": "test"}, rules)
    assert not held_out({"source": "realrun/titan", "wave": 5, "split": "dev"}, rules)  # measured: trains
    assert held_out({"source": "realrun/fsdp2", "wave": 6, "split": "test"}, rules)
    assert not held_out({"source": "realrun/fsdp2", "wave": 6, "split": "dev"}, rules)  # measured: trains
    # real-run wave 7 (session 9): its test half held out, its measured dev half trains
    assert held_out({"source": "realrun/tune", "wave": 7, "split": "test"}, rules)
    assert not held_out({"source": "realrun/tune", "wave": 7, "split": "dev"}, rules)  # measured: trains
    assert held_out({"source": "github/a/b#1", "wave": 5, "split": "test"}, rules)
    assert held_out({"source": "github/a/b#1", "wave": 4, "split": "test"}, rules)
    assert held_out({"source": "github/a/b#1", "split": "test"}, rules)  # public wave 1: its test half too
    assert not held_out({"source": "github/a/b#1", "split": "dev"}, rules)
    assert held_out({"source": "github/a/b#1", "wave": 3, "split": "test"}, rules)
    # public wave 6 (session 8): measured on the session's starting engine, so its dev half trains
    assert not held_out({"source": "github/a/b#1", "wave": 6, "split": "dev"}, rules)
    assert held_out({"source": "github/a/b#1", "wave": 6, "split": "test"}, rules)
    assert not held_out({"source": "github/a/b#1", "wave": 3, "split": "dev"}, rules)  # measured: trains
    # public wave 7 (session 9): measured on the session's starting engine, so its dev half trains
    assert not held_out({"source": "github/a/b#1", "wave": 7, "split": "dev"}, rules)
    assert held_out({"source": "github/a/b#1", "wave": 7, "split": "test"}, rules)
    # public wave 8 (session 10): measured on the session's starting engine, so its dev half trains
    assert not held_out({"source": "github/a/b#1", "wave": 8, "split": "dev"}, rules)
    assert held_out({"source": "github/a/b#1", "wave": 8, "split": "test"}, rules)
    # public wave 9 (session 12): measured on the session's starting engine, so its dev half trains
    assert not held_out({"source": "github/a/b#1", "wave": 9, "split": "dev"}, rules)
    assert held_out({"source": "github/a/b#1", "wave": 9, "split": "test"}, rules)
    names = {c.name for c, _ in usable_cases([REPO / "tests/fixtures/public_logs/_wave2"], rules)}
    index = json.loads((REPO / "tests/fixtures/public_logs/_wave2/cases.json").read_text())
    assert names and names <= {c["path"] for c in index if c.get("split") == "dev"}


def _case(root: Path, name: str, source: str, stage_: str, lines: list[str]) -> None:
    write_failed_job(root / name / "failed", {"node0/rank0.log": lines})
    (root / name / "truth.json").write_text(json.dumps(
        {"kind": "k", "stage": stage_, "source": source, "split": "dev", "faulty_nodes": [], "indicating": [],
         "root_lines": [lines[-1]]}))


def test_the_training_command_runs_on_a_tiny_corpus(tmp_path):
    cases = tmp_path / "cases"
    for i in range(3):
        _case(cases, f"save-{i}", f"github/o/save{i}", "checkpointing",
              ["Traceback (most recent call last):", f'  File "train{i}.py", line 9, in save_checkpoint',
               "    torch.save(state, path)", "OSError: [Errno 28] No space left on device"])
        _case(cases, f"init-{i}", f"github/o/init{i}", "init",
              ["Traceback (most recent call last):", f'  File "run{i}.py", line 3, in init_process_group',
               "    store = TCPStore(host, port)", "RuntimeError: Address already in use"])
    out = tmp_path / "model.json"
    run = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "stage-model", "train", str(cases),
                          "-o", str(out)], capture_output=True, text=True, cwd=REPO, timeout=WAIT)
    assert run.returncode == 0, run.stderr
    assert "leave-one-source-out" in run.stdout and "6 cases scored, 6 sources" in run.stdout
    model = model_from_dict(json.loads(out.read_text()))
    assert set(model.classes) == {"checkpointing", "init"}
    bad = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "stage-model", "cv",
                          str(tmp_path / "nope")], capture_output=True, text=True, cwd=REPO, timeout=WAIT)
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr


def test_extract_reads_the_fault_library_as_eval_does_unless_told_not_to(tmp_path):
    """`extract` ranks with the knowledge base's fault library, as `l4 bench eval` and `l4 diagnose` do, so a
    record holds the failing line the shipped engine finds; `--no-library` extracts without it."""
    cases = tmp_path / "cases"
    _case(cases, "save-0", "github/o/save0", "checkpointing",
          ["Traceback (most recent call last):", '  File "train.py", line 9, in save_checkpoint',
           "    torch.save(state, path)", "OSError: [Errno 28] No space left on device"])
    written = {}
    for flag in ([], ["--no-library"]):
        out = tmp_path / f"records{len(flag)}.json"
        run = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "stage-model", "extract", str(cases),
                              "-o", str(out), *flag], capture_output=True, text=True, cwd=REPO, timeout=WAIT)
        assert run.returncode == 0, run.stderr
        written[bool(flag)] = json.loads(out.read_text())["records"]
    assert [r["case"] for r in written[False]] == [r["case"] for r in written[True]] == ["save-0"]

"""Cross-job filtering: exact text for the same parse, token-wise compatibility for learned pools."""
import random

import pytest

from engine.filter import NormalPool, candidate_events, compatible, normal_pool
from engine.model import ParsedJob, TemplateStat


@pytest.mark.parametrize(("failed", "normal"), [
    # a word kept constant in one parse, masked in the other (both directions)
    ("[Rank <*>] loaded checkpoint shard <*>", "[Rank <*>] <*> checkpoint shard <*>"),
    ("Finish saving checkpoint <*>", "Finish saving checkpoint llama0_00b_rank_0-0000_0.ckpt"),
    ("[train.py:<*>:train_step] rank=<*> step=<*> <*> grad_norm=<*> step_time=<*>",
     "[train.py:<*>:train_step] rank=<*> step=<*> loss=<*> grad_norm=<*> step_time=<*>"),
    # masks inside tokens that can stand for the same text
    ("[launch.py:<*>:main] WORLD INFO DICT: {'<*>': <*>, '<*>': <*>, ...}",
     "[launch.py:<*>:main] WORLD INFO DICT: {'gpu-a00-<*>': <*>, 'gpu-a00-<*>': <*>, ...}"),
    ("failed to resolve gpu-a00-<*>, retrying in <*> (attempt <*>/<*>)",
     "failed to resolve <*> retrying in <*> (attempt <*>/<*>)"),
    # numbers of another length (every digit is "0" after parsing)
    ("[Torch] Checkpoint global_step00 is ready now!", "[Torch] Checkpoint global_step0000 is ready now!"),
    # one host name that differs between the jobs, with plenty in common
    ("gpu-a00-<*>: [<*>] [INFO] [train.py:<*>:main] ***** Running training *****",
     "gpu-b00-<*>: [<*>] [INFO] [train.py:<*>:main] ***** Running training *****"),
])
def test_differently_generalised_templates_are_compatible(failed, normal):
    assert compatible(failed, normal)
    assert failed in NormalPool(tolerant=[normal])


@pytest.mark.parametrize(("failed", "normal"), [
    # different words are different events
    ("NCCL WARN NET/IB : Got completion with error <*>", "NCCL WARN NET/IB : Got completion with status <*>"),
    ("[Rank <*>] loaded checkpoint shard <*>", "[Rank <*>] wrote checkpoint shard <*>"),
    # different token counts
    ("Killed process <*>", "Killed process <*> ( <*> )"),
    # over-general pool templates
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "<*> <*> <*> <*> <*> <*>"),
    ("[Rank <*>] Segfault", "[Rank <*>] <*>"),
    ("<*>: [<*>] [ERROR] [engine.py:<*>:step] NaN detected in loss",
     "<*>: [<*>] [ERROR] [engine.py:<*>:step] <*> <*> <*> <*>"),
    # a conflicting identifier is tolerated once, and only with enough in common
    ("node-a00 link down", "node-b00 link down"),
    ("gpu-a00-<*>: mlx0_0 port <*> state DOWN on gpu-a00-<*>",
     "gpu-b00-<*>: mlx0_0 port <*> state DOWN on gpu-b00-<*>"),
    # masks inside tokens whose constant parts disagree
    ("open <*>.ckpt failed", "open <*>.json failed"),
])
def test_other_events_and_over_general_templates_do_not_match(failed, normal):
    assert not compatible(failed, normal)
    assert failed not in NormalPool(tolerant=[normal])


def test_an_all_mask_template_matches_nothing():
    pool = NormalPool(tolerant=["<*>", "<*> <*>", "<*> <*> <*>"])
    assert "<*> <*>" in pool  # its own text, exactly
    assert "Killed" not in pool and "Segmentation fault" not in pool and "a b c" not in pool


def test_same_parse_templates_match_only_exactly():
    pool = NormalPool(exact=["[Rank <*>] <*> checkpoint shard <*>"])
    assert "[Rank <*>] <*> checkpoint shard <*>" in pool
    assert "[Rank <*>] loaded checkpoint shard <*>" not in pool


def _job(*templates: str) -> ParsedJob:
    return ParsedJob(job_id="j", templates=[TemplateStat(template=t) for t in templates])


def test_candidate_events_with_history_and_pool():
    failed = _job("[Rank <*>] loaded checkpoint shard <*>", "RuntimeError: CUDA error: out of memory",
                  "iteration <*> loss <*>")
    history = [_job("iteration <*> loss <*>")]
    # a plain set keeps working (exact text)
    assert candidate_events(failed, {"iteration <*> loss <*>"}) == [0, 1]
    assert candidate_events(failed, normal_pool(history, ["[Rank <*>] <*> checkpoint shard <*>"])) == [1]
    assert candidate_events(failed, normal_pool([], [])) == [0, 1, 2]


def test_index_lookup_agrees_with_pairwise_rule():
    rng = random.Random(7)
    words = ["[Rank", "<*>]", "<*>", "checkpoint", "shard", "loss", "gpu-a00-<*>:", "gpu-b00-<*>:",
             "step00", "step0000", "[INFO]", "error", "<*>,", "x<*>", "done"]
    pool = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 6))) for _ in range(300)]
    normal = NormalPool(tolerant=pool)
    for _ in range(600):
        t = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
        assert (t in normal) == (t in pool or any(compatible(t, p) for p in pool)), t

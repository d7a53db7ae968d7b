"""A file's line decoration (engine/decoration.py): learned from the file, stripped before the headers."""

from engine.decoration import learn, learn_job
from engine.diagnose import diagnose
from engine.headers import parse_header
from engine.parse import parse_job, parse_jobs
from tests.helpers.jobs import write_failed_job

QUOTED = [
    "> 2023-03-22 09:31:56 iter 2990: loss 3.8853, time 1096.65ms, mfu 15.34%",
    ">",
    "> 2023-03-22 09:32:32 step 3000: train loss 4.0390, val loss 4.0427",
    "> ",
    "> Traceback (most recent call last):",
    ">   File \"train.py\", line 12, in <module>",
    ">     dataset = load_dataset(",
    "> RuntimeError: CUDA error: an illegal memory access was encountered",
]


def test_a_markdown_quote_on_every_line_is_the_files_decoration():
    deco = learn(QUOTED)
    assert deco is not None and deco.name == "markdown-quote"
    h = parse_header(QUOTED[0], decoration=deco)
    assert h.ts == "2023-03-22T09:31:56.000000Z" and h.message.startswith("iter 2990: loss")
    assert parse_header(QUOTED[-1], decoration=deco).level == "ERROR"
    assert deco.strip(QUOTED[6]) == "    dataset = load_dataset("  # a code line keeps its indent


def test_lines_that_only_sometimes_start_alike_carry_no_decoration():
    lines = ["> a quoted remark", "2024-01-01 10:00:00 INFO start", "RuntimeError: boom", "> more"]
    assert learn(lines) is None
    assert learn(["> one", "> two"]) is None  # too few lines to tell


def test_a_line_number_gutter_counts_up_and_a_rank_label_does_not():
    gutter = [f"{n:4d} | [2024-09-11 17:52:{n:02d}] [ERROR] step {n} failed" for n in range(10, 20)]
    deco = learn(gutter)
    assert deco is not None and deco.name == "line-gutter"
    assert parse_header(gutter[0], decoration=deco).level == "ERROR"
    srun = [f"{r}: step {i} ok" for i in range(5) for r in (0, 1)]
    assert learn(srun) is None  # srun -l's labels repeat: the header rules read them as ranks
    assert parse_header(srun[1]).rank == 1


def test_a_tag_every_line_repeats_is_stripped_unless_the_header_rules_read_it():
    tagged = ["[trainer0|0]:ncclInternalError: Internal check failed.", "[trainer0|0]:Last error:",
              "[trainer0|0]:ncclSocketInit: connecting to address  with family 59936"]
    deco = learn(tagged)
    assert deco is not None and deco.name == "constant-tag"
    assert parse_header(tagged[1], decoration=deco).message == "Last error:"
    assert learn([f"[rank0]: step {i}" for i in range(5)]) is None  # torchrun's prefix is the headers'
    assert learn([f"[INFO] step {i}" for i in range(5)]) is None
    # a tag a date follows (torchtitan's logger) is stripped too: the date and level under it are read
    titan = [f"[titan] 2026-12-01 10:00:0{i},123 - root - INFO - step: {i}" for i in range(5)]
    h = parse_header(titan[0], decoration=learn(titan))
    assert h.ts == "2026-12-01T10:00:00.123000Z"


def test_colour_codes_are_removed_wherever_they_are():
    lines = [f"\x1b[32m2024-05-01 10:00:0{i}\x1b[0m | \x1b[1mINFO\x1b[0m | step {i}" for i in range(4)]
    lines.append("\x1b[31m2024-05-01 10:00:05\x1b[0m | \x1b[1mERROR\x1b[0m | CUDA error: out of memory")
    deco = learn(lines)
    assert deco is not None and deco.name == "ansi-sgr"
    h = parse_header(lines[-1], decoration=deco)
    assert h.ts == "2024-05-01T10:00:05.000000Z" and "\x1b" not in h.message


def test_a_quoted_paste_is_parsed_and_diagnosed_as_its_lines_say(tmp_path):
    job = write_failed_job(tmp_path / "job", {"node0/console.log": QUOTED})
    parsed = parse_job(job)
    templates = {t.template: t for t in parsed.templates}
    assert not any(t.startswith(">") for t in templates)
    err = next(t for k, t in templates.items() if k.startswith("RuntimeError: CUDA error"))
    assert err.level == "ERROR" and err.examples == [QUOTED[-1]]  # shown as it was written
    assert any(t.first_seen == "2023-03-22T09:31:56.000000Z" for t in templates.values())
    d = diagnose(job)
    assert d.events[0].template.startswith("RuntimeError: CUDA error")


def test_a_decoration_learned_in_one_file_is_stripped_where_other_files_of_the_job_carry_it():
    rank = [f"[trainer0|0]:step {i} ok" for i in range(5)]
    tagged = [f"[default{r}]:[trainer0|0]:step {i} ok" for i in range(3) for r in (0, 1)]
    console = ["agent started", "agent: spawning", *tagged, "agent: worker exited", "agent: done"]
    assert learn(console) is None  # launcher lines interleave: not on 90 % of its own lines
    got = learn_job([rank, console, ["2024-01-01 10:00:00 plain history line"] * 5])
    assert got[0] is not None and got[0].name == "constant-tag"
    assert got[1] is not None and got[1].prefix == got[0].prefix  # the console's tagged lines, the same
    read = parse_header(console[2], decoration=got[1])
    assert read.message == parse_header(rank[0], decoration=got[0]).message
    assert read.rank == 0  # the launcher's prefix stays read
    assert got[2] is None  # a file whose lines do not carry it keeps them as they are


def test_a_quoted_paste_beside_a_plain_one_strips_the_quote_in_the_paste_only():
    plain = ["2023-03-22 09:31:56 iter 2990: loss 3.8853", ">>> import torch", "RuntimeError: boom",
             "2023-03-22 09:31:57 iter 2991: loss 3.8", "done"]
    got = learn_job([QUOTED, plain])
    assert got[0] is not None and got[0].name == "markdown-quote"
    assert got[1] is None  # one line in five starts with ">": no evidence of a quote in this file


def test_colour_codes_one_file_shows_are_removed_in_every_file_of_the_job():
    coloured = [f"\x1b[32m2024-05-01 10:00:0{i}\x1b[0m INFO step {i}" for i in range(4)]
    later = ["2024-05-01 10:00:00 INFO start", *[f"2024-05-01 10:00:0{i} INFO step {i}" for i in range(4)]]
    got = learn_job([coloured, later])
    assert got[1] is not None and got[1].anywhere is not None and got[1].prefix is None


def test_a_job_console_and_its_rank_files_share_their_templates(tmp_path):
    rank = [f"[trainer0|0]:2024-05-01 10:00:0{i} step {i} ok" for i in range(6)]
    tagged = [f"[default{r}]:[trainer0|0]:2024-05-01 10:00:0{i} step {i} ok"
              for i in range(4) for r in (0, 1)]
    console = ["agent started", "agent: spawning", *tagged, "agent: done", "agent: bye"]
    rank.append("[trainer0|0]:RuntimeError: boom")
    failed = write_failed_job(tmp_path / "failed", {"node0/rank0.log": rank})
    hist = write_failed_job(tmp_path / "hist", {"node0/console.log": console})
    job, history = parse_jobs([failed, hist])
    shared = {t.template for t in history.templates}
    step = next(t for t in job.templates if "step" in t.template)
    assert step.template in shared and step.first_seen == "2024-05-01T10:00:00.000000Z"

"""A file's line decoration (engine/decoration.py): learned from the file, stripped before the headers."""

from engine.decoration import learn
from engine.diagnose import diagnose
from engine.headers import parse_header
from engine.parse import parse_job
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
    # a tag a date follows is the logger's own format (torchtitan's), learned in no file, so the job's
    # rank files and a history console where other lines interleave give the same templates
    assert learn([f"[titan] 2026-12-01 10:00:0{i},123 - root - INFO - step: {i}" for i in range(5)]) is None


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

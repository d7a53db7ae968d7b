from engine.stacks import Stack, group_stacks, parse_faulthandler, parse_pyspy

PYSPY = """Process 26442: /usr/bin/python3 -u train.py
Python v3.11.7 (/usr/bin/python3.11)

Thread 26442 (idle): "MainThread"
    broadcast (torch/distributed/distributed_c10d.py:3151)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)
    train_step (train.py:98)
    <module> (train.py:156)
Thread 26684 (idle): "Thread-1 (_watchdog)"
    _watchdog (train.py:69)
    Thread.run (threading.py:982)
"""

FAULTHANDLER = """2026-12-01 08:46:47,238 INFO step 6/12
[default3]:Current thread 0x00007f96d6b266c0 (most recent call first):
[default3]:  File "/app/train.py", line 63 in _dump
[default3]:  File "/usr/lib/python3.11/threading.py", line 982 in run
[default3]:
[default3]:Thread 0x00007f96f79e2b80 (most recent call first):
[default3]:  File "/usr/lib/python3.11/site-packages/torch/utils/data/dataloader.py", line 1318 in _next_data
[default3]:  File "/app/train.py", line 131 in main
[default3]:  File "/app/train.py", line 154 in <module>
2026-12-01 08:46:57,000 ERROR collective failed
"""


def test_pyspy_main_thread_innermost_first():
    assert parse_pyspy(PYSPY) == [
        "broadcast (distributed_c10d.py)", "_exception_logger.<locals>.wrapper (c10d_logger.py)",
        "train_step (train.py)", "<module> (train.py)"]


def test_faulthandler_block_inside_a_log_with_launcher_prefixes():
    assert parse_faulthandler(FAULTHANDLER.splitlines()) == [
        "_next_data (dataloader.py)", "main (train.py)", "<module> (train.py)"]


def test_a_python_traceback_is_not_a_stack_dump():
    text = 'Traceback (most recent call last):\n  File "x.py", line 1 in <module>\nValueError: x\n'
    assert parse_faulthandler(text.splitlines()) == []


def test_the_small_group_outside_the_dominant_one_is_the_outlier():
    wait = ["all_reduce (distributed_c10d.py)", "train_step (train.py)", "<module> (train.py)"]
    # line numbers are not part of the frames, so ranks one line apart still group
    stacks = [Stack(r, wait, "x") for r in range(7)]
    stacks.append(Stack(7, ["sleep (time.py)", "train_step (train.py)", "<module> (train.py)"], "x"))
    groups = group_stacks(stacks)
    assert [g.ranks for g in groups] == [[0, 1, 2, 3, 4, 5, 6], [7]]
    assert [g.outlier for g in groups] == [False, True]
    # <module> says nothing about where a rank is: dropped from the group's frames
    assert groups[0].frames == ["all_reduce (distributed_c10d.py)", "train_step (train.py)"]


def test_no_outlier_when_the_groups_are_even():
    a, b = ["f (a.py)"], ["g (b.py)"]
    groups = group_stacks([Stack(0, a, ""), Stack(1, a, ""), Stack(2, b, ""), Stack(3, b, "")])
    assert not any(g.outlier for g in groups)

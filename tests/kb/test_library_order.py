"""Root versus consequence: the match that explains the others comes first."""
from __future__ import annotations

from kb import library
from kb.matcher import Matcher

WATCHDOG = ("[rank3]:[E ProcessGroupNCCL.cpp:455] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 milliseconds "
            "before timing out.")


def _order(lines: list[str]) -> list[str]:
    return [m.pattern_id for m in Matcher(library.builtin_patterns()).match_lines(lines)]


def test_xid_before_the_nccl_errors_it_caused() -> None:
    got = _order([WATCHDOG,
                  "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:410, unhandled system error",
                  "NVRM: Xid (PCI:0000:89:00): 48, pid=218402, name=python3, An uncorrectable double bit "
                  "error (DBE) has been detected on GPU (0000:89:00)."])
    assert got[0] == "xid-48-double-bit-ecc"
    assert got.index("nccl-unhandled-system-error") < got.index("nccl-watchdog-timeout")


def test_host_oom_before_the_sigkill() -> None:
    got = _order(["  traceback : Signal 9 (SIGKILL) received by PID 14750",
                  "slurmstepd: error: Detected 1 oom_kill event in StepId=7.0. Some of the step tasks "
                  "have been OOM Killed."])
    assert got[:2] == ["slurm-oom-kill", "worker-sigkill-host-oom"]


def test_disk_full_before_the_checkpoint_exception() -> None:
    got = _order(["RuntimeError: [enforce fail at inline_container.cc:445] . PytorchStreamWriter failed "
                  "writing file data/2: file write failed",
                  "OSError: [Errno 28] No space left on device"])
    assert got[:2] == ["disk-full", "checkpoint-stream-writer-failed"]


def test_storage_hang_before_the_generic_hung_task() -> None:
    got = _order(["[  479.971084] INFO: task nfsd:3780 blocked for more than 120 seconds."])
    assert got == ["storage-daemon-hung-task", "kernel-soft-lockup-hung-task"]


def test_explains_chain_and_cycle_from_plain_patterns() -> None:
    """explains given on the patterns themselves (SRE dicts) orders a chain and survives a cycle."""
    def pat(pid: str, regex: str, explains: list[str]) -> dict:
        return {"id": pid, "title": pid, "category": "framework", "kind": "root", "severity": "high",
                "signature": [regex], "explains": explains}

    chain = [pat("c-third", "third", []), pat("b-second", "second", ["c-third"]),
             pat("a-first", "first", ["b-*"])]
    got = [m.pattern_id for m in Matcher(chain).match_lines(["third", "second", "first"])]
    assert got == ["a-first", "b-second", "c-third"]
    cycle = [pat("x-one", "one", ["y-two"]), pat("y-two", "two", ["x-one"])]
    got = [m.pattern_id for m in Matcher(cycle).match_lines(["two", "one"])]
    assert sorted(got) == ["x-one", "y-two"]

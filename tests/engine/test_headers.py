import pytest

from engine.headers import parse_header

CASES = [
    (
        "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective",
        "2026-12-06T18:44:12.715298746",
        "ERROR",
        3,
        "[Rank 3] Watchdog caught collective",
    ),
    ("[default0]:2026-05-01 10:22:31,123 - INFO - hello", "2026-05-01T10:22:31.123", "INFO", 0, "hello"),
    (
        "node17-2:36748:36748 [0] NCCL WARN NET/IB : Got completion with error 12",
        None,
        "WARN",
        None,
        "NCCL WARN NET/IB : Got completion with error 12",
    ),
    (
        "[ERROR] HCCL(123,python):2024-05-21-11:57:54.167.645 [hccl.cc:12] error cqe status",
        "2024-05-21T11:57:54",
        "ERROR",
        None,
        "error cqe status",
    ),
    (
        "EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 "
        "The wait execution of the Notify register times out.",
        "2025-10-11T15:09:34",
        "ERROR",
        None,
        "EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 "
        "The wait execution of the Notify register times out.",
    ),
    (
        "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.",
        None,
        "ERROR",
        None,
        "NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.",
    ),
    (
        "Nov 29 12:00:01 gpu7 kernel: NVRM: Xid (PCI:0000:06:00): 48, DBE",
        "2026-11-29T12:00:01",
        "ERROR",
        None,
        "NVRM: Xid (PCI:0000:06:00): 48, DBE",
    ),
    (
        "slurmstepd: error: *** JOB 1 ON n3 CANCELLED AT 2024-05-01T10:00:00 DUE TO PREEMPTION ***",
        None,
        "ERROR",
        None,
        "*** JOB 1 ON n3 CANCELLED AT 2024-05-01T10:00:00 DUE TO PREEMPTION ***",
    ),
    ("INFO:torch.distributed.run:Using nproc_per_node=8", None, "INFO", None, "Using nproc_per_node=8"),
    (
        "[2024-09-11 17:52:18,030] [INFO] [logging.py:96:log_dist] [Rank 0] step=40",
        "2024-09-11T17:52:18.030",
        "INFO",
        None,
        "[logging.py:96:log_dist] [Rank 0] step=40",
    ),
    (
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        None,
        "ERROR",
        None,
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    ),
]


@pytest.mark.parametrize("line,ts,level,rank,message", CASES)
def test_header_shapes(line, ts, level, rank, message):
    h = parse_header(line, year=2026)
    assert (h.ts, h.level, h.rank, h.message) == (ts, level, rank, message)


def test_garbage_never_raises():
    for line in ["", "\x00\x01\ufffd", "[" * 1000, "E1206 " * 50, ":" * 10]:
        parse_header(line)

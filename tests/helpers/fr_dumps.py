"""Flight-recorder dumps in PyTorch's layout (the keys `_dump_fr_trace` writes), for tests."""
from __future__ import annotations

import json
import pickle
from pathlib import Path


def entry(seq: int, *, op: str = "nccl:all_reduce", pg: str = "0", desc: str = "default_pg",
          state: str = "completed", sizes: list | None = None, dtypes: list | None = None,
          record_id: int | None = None, p2p: bool = False) -> dict:
    return {
        "record_id": seq if record_id is None else record_id, "pg_id": int(pg) if pg.isdigit() else 0,
        "process_group": (pg, desc), "collective_seq_id": 0 if p2p else seq, "p2p_seq_id": seq if p2p else 0,
        "op_id": seq, "profiling_name": op, "time_created_ns": 1_000_000 * (seq if record_id is None
                                                                             else record_id),
        "input_sizes": sizes or [[1024]], "input_dtypes": dtypes or ["Float"],
        "output_sizes": sizes or [[1024]], "output_dtypes": dtypes or ["Float"], "state": state,
        "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
        "retired": state == "completed", "timeout_ms": 600000, "is_p2p": p2p,
        "frames": [{"name": "all_reduce", "filename": "distributed_c10d.py", "line": 3245}],
    }


def dump(entries: list[dict], *, world: int, completed: int = -1, enqueued: int = -1,
         extra_pgs: dict | None = None) -> dict:
    pgs = {"0": {"name": "0", "desc": "default_pg", "ranks": json.dumps(list(range(world)))}}
    pgs.update(extra_pgs or {})
    return {"version": "2.10", "comm_lib_version": "2.21.5", "pg_config": pgs,
            "pg_status": {"0": {"last_enqueued_collective": enqueued, "last_started_collective": -1,
                                "last_completed_collective": completed}},
            "entries": entries}


def write(folder: Path, rank: int, data: dict, *, fmt: str = "pickle", name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"nccl_trace_rank_{rank}")
    path.write_bytes(pickle.dumps(data) if fmt == "pickle" else json.dumps(data).encode())
    return path


def healthy_until(last: int, *, pending: bool = True, op: str = "nccl:all_reduce") -> list[dict]:
    """Entries 1..last: all completed but the last one, which is still scheduled when `pending`."""
    return [entry(s, op=op, state="scheduled" if pending and s == last else "completed")
            for s in range(1, last + 1)]

"""Reading PyTorch flight-recorder dumps (pickle, the default, or JSON) safely.

Each rank writes its ring buffer of recent collectives when its watchdog or heartbeat fires
(`TORCH_FR_BUFFER_SIZE` / `TORCH_NCCL_TRACE_BUFFER_SIZE` > 0; `TORCH_FR_DUMP_TEMP_FILE` prefix,
default `/tmp/nccl_trace_rank_<rank>`; `_dump_fr_trace_json` for JSON). Fields as PyTorch writes them:
`version`, `pg_config`, `pg_status`, `comm_lib_version`, `entries[]`. Pickles are loaded with
`engine.safepickle` (plain data only) and size-capped; a dump that cannot be read is reported with
its reason, never raised.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.hangfiles import UnreadableDump, dump_rank_host, read_capped
from engine.rules import load, size_text
from engine.safepickle import UnsafePickle, loads_plain


@dataclass
class FREntry:
    record_id: int
    pg_name: str  # the process group's name (process_group[0]), "" when absent
    pg_desc: str
    collective_seq_id: int
    p2p_seq_id: int
    is_p2p: bool
    op: str  # profiling_name, e.g. "nccl:all_reduce"
    state: str  # scheduled | started | completed
    input_sizes: list
    input_dtypes: list
    output_sizes: list
    output_dtypes: list
    time_created_ns: int | None
    retired: bool
    timeout_ms: int | None


@dataclass
class FRDump:
    path: str
    rank: int
    host: str | None
    version: str
    pg_ranks: dict[str, list[int]]  # process group name -> its global ranks (from pg_config)
    pg_status: dict[str, dict]  # pg id -> last_enqueued/started/completed_collective
    entries: list[FREntry] = field(default_factory=list)


class DumpError(ValueError):
    """A dump that cannot be used (hostile, too big, not a dump); its text is the one-line reason."""


def _int(v: object, default: int | None = None) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def _ranks(text: object) -> list[int]:
    if isinstance(text, (list, tuple)):
        return [r for r in text if isinstance(r, int)]
    if isinstance(text, str):
        try:
            value = json.loads(text)
        except ValueError:
            return []
        return _ranks(value)
    return []


def _entry(e: dict) -> FREntry | None:
    seq = _int(e.get("collective_seq_id"))
    if seq is None:
        return None
    pg = e.get("process_group")
    name, desc = (str(pg[0]), str(pg[1])) if isinstance(pg, (list, tuple)) and len(pg) >= 2 else ("", "")

    def lst(key: str) -> list:
        v = e.get(key)
        return list(v) if isinstance(v, (list, tuple)) else []

    return FREntry(
        record_id=_int(e.get("record_id"), -1), pg_name=name, pg_desc=desc, collective_seq_id=seq,
        p2p_seq_id=_int(e.get("p2p_seq_id"), 0), is_p2p=bool(e.get("is_p2p")),
        op=str(e.get("profiling_name") or ""), state=str(e.get("state") or ""),
        input_sizes=lst("input_sizes"), input_dtypes=lst("input_dtypes"),
        output_sizes=lst("output_sizes"), output_dtypes=lst("output_dtypes"),
        time_created_ns=_int(e.get("time_created_ns")), retired=bool(e.get("retired")),
        timeout_ms=_int(e.get("timeout_ms")))


def parse_dump(data: bytes, path: str, rank: int | None, host: str | None) -> FRDump:
    """One dump's bytes as an `FRDump`; `DumpError` with a one-line reason when it cannot be used."""
    caps = load("hang")["flight_recorder"]
    if len(data) > caps["max_bytes"]:
        raise DumpError(f"flight-recorder dump over {size_text(caps['max_bytes'])}, not read")
    try:
        obj = json.loads(data) if data.lstrip()[:1] == b"{" else loads_plain(data)
    except UnsafePickle as exc:
        raise DumpError(f"{exc} (a dump holds plain data only; not loaded)") from None
    except ValueError as exc:
        raise DumpError(f"not a flight-recorder dump ({exc})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("entries", []), list):
        raise DumpError("not a flight-recorder dump (no entries list)")
    raw = obj.get("entries") or []
    if len(raw) > caps["max_entries"]:
        raise DumpError(f"flight-recorder dump with over {caps['max_entries']} entries, not read")
    if rank is None:
        rank = _int(obj.get("rank"))
    if rank is None:
        raise DumpError("flight-recorder dump whose rank is unknown (name it nccl_trace_rank_<N>)")
    pg_ranks: dict[str, list[int]] = {}
    config = obj.get("pg_config")
    if isinstance(config, dict):
        for key, cfg in config.items():
            if isinstance(cfg, dict):
                pg_ranks[str(key)] = _ranks(cfg.get("ranks"))
    status = obj.get("pg_status") if isinstance(obj.get("pg_status"), dict) else {}
    entries = [x for x in (_entry(e) for e in raw if isinstance(e, dict)) if x is not None]
    return FRDump(path=path, rank=rank, host=host, version=str(obj.get("version") or ""),
                  pg_ranks=pg_ranks, pg_status={str(k): v for k, v in status.items() if isinstance(v, dict)},
                  entries=entries)


def read_dumps(paths: list[Path]) -> tuple[list[FRDump], list[str]]:
    """The readable dumps of `paths` (one per rank, the latest file wins) and "path: reason" for the rest."""
    dumps: dict[int, FRDump] = {}
    bad: list[str] = []
    cap = load("hang")["flight_recorder"]["max_bytes"]
    for path in paths:
        rank, host = dump_rank_host(path)
        try:
            dump = parse_dump(read_capped(path, cap, "flight-recorder dump"), str(path), rank, host)
        except (DumpError, UnreadableDump) as exc:
            bad.append(f"{path}: {exc}")
            continue
        dumps[dump.rank] = dump
    return [dumps[r] for r in sorted(dumps)], bad

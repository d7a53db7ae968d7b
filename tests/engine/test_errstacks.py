"""Reports that span lines: the C++ abort's what() message and its body, return traces read innermost-first,
an excerpt of one template, an abort with no message."""
from engine.diagnose import diagnose
from engine.filter import NormalPool, candidate_events
from engine.parse import parse_jobs
from engine.roles import CONTEXT, event_roles
from engine.severity import severity
from tests.helpers.jobs import write_failed_job


def _routine(n: int, host: str = "") -> list[str]:
    return [f"2025-02-03 04:0{k // 10}:{k % 10}0 INFO {host}step {k} loss 2.{k:02d} tokens/s 91{k}"
            for k in range(n)]


def test_the_what_line_and_its_wrapped_body_hold_the_abort_s_message(tmp_path):
    lines = _routine(12) + [
        "terminate called after throwing an instance of 'std::runtime_error'",
        "  what():  arena.cc:212: pinned host buffer reservation fail",
        "ed: cannot allocate 4194304 bytes",
    ]
    job = write_failed_job(tmp_path / "j", {"host-a/worker.log": lines})
    d = diagnose(job)
    assert "what():" in d.events[0].template and "pinned host buffer" in d.events[0].template
    parsed = parse_jobs([job])[0]
    cands = candidate_events(parsed, NormalPool())
    sev = {i: severity(parsed.templates[i].template, parsed.templates[i].level) for i in cands}
    roles = event_roles(parsed, cands, sev)
    by_text = {parsed.templates[i].template.split()[0]: i for i in cands}
    assert roles.role.get(by_text["terminate"]) == CONTEXT  # the type only
    assert roles.role.get(by_text["ed:"]) == CONTEXT  # the wrapped rest of the message
    assert roles.inherited[by_text["what():"]] >= sev[by_text["ed:"]]  # it weighs what its body says


def test_the_stack_header_between_an_abort_and_its_what_line_is_no_message(tmp_path):
    """c10's "Exception raised from … (most recent call first):" may come before the what() line (srun -l
    task prefixes in front): it names where the error was raised, the what() line after it still holds
    the message."""
    lines = [f"{k % 8}: {line}" for k, line in enumerate(_routine(12))] + [f"4: {line}" for line in (
        "terminate called after throwing an instance of 'c10::Error'",
        "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 "
        "(most recent call first):",
        "  what():  CUDA error: an illegal memory access was encountered",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1f851ed76494 in libc10.so)",
    )] + ["srun: error: gpu-a254: task 4: Exited with exit code 1"]
    job = write_failed_job(tmp_path / "j", {"host-a/worker.log": lines})
    top = diagnose(job).events[0].template
    assert "what():" in top and "illegal memory access" in top


def test_a_terminate_line_with_no_message_after_it_stays_an_event(tmp_path):
    job = write_failed_job(tmp_path / "j", {"host-a/worker.log": _routine(12) + [
        "terminate called after throwing an instance of 'c10::Error'"]})
    assert "terminate called" in diagnose(job).events[0].template


def _nccl(host: str, pid: int, later: bool) -> list[str]:
    out = _routine(6, host + " ") + [
        f"{host}:{pid}:{pid + 70} [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
        f"10.1.0.{pid % 7}<4711> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
        f"{host}:{pid}:{pid + 70} [0] NCCL INFO transport/net.cc:1008 -> 6",
        f"{host}:{pid}:{pid + 70} [0] NCCL INFO proxy.cc:679 -> 6",
    ]
    if later:
        out += [f"{host}:{pid}:{pid} [1] enqueue.cc:402 NCCL WARN Cuda failure 'misaligned address'",
                f"{host}:{pid}:{pid} [1] NCCL INFO group.cc:57 -> 1"]
    return out


def test_the_first_return_trace_s_message_is_the_cause_and_its_frames_are_context(tmp_path):
    files = {f"{h}/pid{p}.log": _nccl(h, p, later=(h == "gpu7")) for h, p in
             (("gpu7", 4001), ("gpu8", 5002), ("gpu9", 6003))}
    job = write_failed_job(tmp_path / "j", files)
    d = diagnose(job)
    assert "Got completion from peer" in d.events[0].template  # on every node, and first
    assert not any(" -> " in e.template for e in d.events)  # frames are no events
    later = [k for k, e in enumerate(d.events) if "Cuda failure" in e.template]
    assert later and later[0] > 0
    parsed = parse_jobs([job])[0]
    cands = candidate_events(parsed, NormalPool())
    sev = {i: severity(parsed.templates[i].template, parsed.templates[i].level) for i in cands}
    roles = event_roles(parsed, cands, sev)
    assert ["Cuda failure" in parsed.templates[i].template for i in roles.late] == [True]
    assert all(roles.role.get(i) == CONTEXT for i in cands if " -> " in parsed.templates[i].template)


def test_an_excerpt_of_one_template_reports_it(tmp_path):
    lines = [f"    shape of key encoder.layer.{k}.attn.bias differs: stored [768], built [1024]"
             for k in range(3)]
    job = write_failed_job(tmp_path / "j", {"node0/console.log": lines})
    d = diagnose(job)
    assert len(d.events) == 1 and "shape of key" in d.events[0].template


def test_a_job_of_several_routine_templates_gets_no_floor(tmp_path):
    lines = [line for k in range(3)
             for line in (f"epoch {k} done", f"saving to out/ckpt-{k}", f"lr now 0.{k}1")]
    job = write_failed_job(tmp_path / "j", {"node0/console.log": lines})
    assert diagnose(job).events == []


def test_an_abort_with_no_message_after_the_rank_s_own_timeout_ranks_below_it(tmp_path):
    files = {}
    for r in range(4):
        files[f"n{r}/rank{r}.log"] = _routine(8) + [
            f"[E1203 04:02:00.0000{r} ProcessGroupNCCL.cpp:1664] [PG 0 Rank {r}] Exception (either an error "
            f"or timeout) detected by watchdog at work: 77, last enqueued NCCL work: 77, last completed: 76."]
    files["n2/rank2.log"].append("terminate called after throwing an instance of 'c10::DistBackendError'")
    d = diagnose(write_failed_job(tmp_path / "j", files))
    assert "detected by watchdog" in d.events[0].template

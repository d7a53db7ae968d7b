"""Reports that span lines: the C++ abort's what() message and its body, return traces read innermost-first,
an excerpt of one template, an abort with no message."""
import pytest

from engine.diagnose import diagnose
from engine.filter import NormalPool, candidate_events
from engine.parse import parse_jobs
from engine.roles import CONTEXT, event_roles
from engine.severity import severity
from tests.helpers.jobs import write_failed_job


def _routine(n: int, host: str = "") -> list[str]:
    return [f"2025-02-03 04:0{k // 10}:{k % 10}0 INFO {host}step {k} loss 2.{k:02d} tokens/s 91{k}"
            for k in range(n)]


def _read(job):
    """(parsed job, candidate events, their severities, their roles), as the ranking reads them."""
    parsed = parse_jobs([job])[0]
    cands = candidate_events(parsed, NormalPool())
    sev = {i: severity(parsed.templates[i].template, parsed.templates[i].level) for i in cands}
    return parsed, cands, sev, event_roles(parsed, cands, sev)


def test_the_what_line_and_its_wrapped_body_hold_the_abort_s_message(tmp_path):
    lines = _routine(12) + [
        "terminate called after throwing an instance of 'std::runtime_error'",
        "  what():  arena.cc:212: pinned host buffer reservation fail",
        "ed: cannot allocate 4194304 bytes",
    ]
    job = write_failed_job(tmp_path / "j", {"host-a/worker.log": lines})
    d = diagnose(job)
    assert "what():" in d.events[0].template and "pinned host buffer" in d.events[0].template
    parsed, cands, sev, roles = _read(job)
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
    parsed, cands, sev, roles = _read(job)
    assert ["Cuda failure" in parsed.templates[i].template for i in roles.late] == [True]
    assert all(roles.role.get(i) == CONTEXT for i in cands if " -> " in parsed.templates[i].template)


def test_an_excerpt_of_one_template_reports_it(tmp_path):
    lines = [f"    shape of key encoder.layer.{k}.attn.bias differs: stored [768], built [1024]"
             for k in range(3)]
    job = write_failed_job(tmp_path / "j", {"node0/console.log": lines})
    d = diagnose(job)
    assert len(d.events) == 1 and "shape of key" in d.events[0].template


def test_a_job_of_several_routine_templates_gets_no_floor(tmp_path):
    # no template is lifted as an excerpt's only message: they stay weak, below the floor, and only the best
    # is shown, as a failed job's best line (engine.events FALLBACK_SCORE), then the line it ended with (no
    # alarm in sight: engine.lastwords)
    from engine.events import MIN_SCORE
    lines = [line for k in range(3)
             for line in (f"epoch {k} done", f"saving to out/ckpt-{k}", f"lr now 0.{k}1")]
    job = write_failed_job(tmp_path / "j", {"node0/console.log": lines})
    events = diagnose(job).events
    assert len(events) == 2 and all(e.score < MIN_SCORE for e in events)
    assert "lr now" in events[-1].template


def test_an_abort_with_no_message_after_the_rank_s_own_timeout_ranks_below_it(tmp_path):
    files = {}
    for r in range(4):
        files[f"n{r}/rank{r}.log"] = _routine(8) + [
            f"[E1203 04:02:00.0000{r} ProcessGroupNCCL.cpp:1664] [PG 0 Rank {r}] Exception (either an error "
            f"or timeout) detected by watchdog at work: 77, last enqueued NCCL work: 77, last completed: 76."]
    files["n2/rank2.log"].append("terminate called after throwing an instance of 'c10::DistBackendError'")
    d = diagnose(write_failed_job(tmp_path / "j", files))
    assert "detected by watchdog" in d.events[0].template


_ORTE_HELP = [
    "ORTE has lost communication with a remote daemon.",
    "  HNP daemon   : [[19351,0],0] on node hpc-a100-173",
    "  Remote daemon: [[19351,0],15] on node hpc-a100-188",
    "This is usually due to either a failure of the TCP network",
    "connection to the node, or possibly an internal failure of",
    "the daemon itself. We cannot recover from this failure, and",
    "therefore will terminate the job.",
]


def test_a_hard_wrapped_sentence_of_help_text_is_one_event_shown_whole(tmp_path):
    """Open MPI prints its help text wrapped at a fixed width: the lines that go on with a lower-case word
    after a line that stopped mid-sentence are the rest of its sentence, not events of their own; the
    sentence weighs what its worst line says and its lines are shown together."""
    lines = _routine(12) + ["ssh: connect to host hpc-a100-188 port 22: Connection timed out", *_ORTE_HELP]
    job = write_failed_job(tmp_path / "j", {"hpc-a100-173/mpirun.out": lines})
    d = diagnose(job)
    shown = [e.template for e in d.events]
    assert not any(t.startswith(("connection to the node", "the daemon itself", "therefore"))
                   for t in shown), shown
    assert any(t.startswith("ssh: connect to host") for t in shown[:3]), shown
    sentence = next(e for e in d.events if e.template.startswith("This is usually due"))
    assert list(sentence.examples[:3]) == _ORTE_HELP[3:6]


def test_a_lower_case_line_after_a_finished_sentence_or_a_levelled_line_is_its_own(tmp_path):
    """Only a sentence left open (a letter or a comma at its end) goes on: "ssh: connect …" after a full
    stop, and a line with a level of its own, stay events."""
    lines = _routine(12) + [
        "ORTE was unable to reliably start one or more daemons.",
        "ssh: connect to host hpc-a100-188 port 22: Connection timed out",
        "2025-02-03 04:02:00 ERROR rank 3 lost its connection to the store, retrying",
        "2025-02-03 04:02:01 ERROR rendezvous failed after 3 attempts",
    ]
    job = write_failed_job(tmp_path / "j", {"host-a/worker.log": lines})
    parsed, cands, sev, roles = _read(job)
    for i in cands:
        t = parsed.templates[i].template
        if t.startswith(("ssh:", "rendezvous failed")):
            assert roles.role.get(i) != CONTEXT, t


def test_a_line_that_ends_in_a_path_is_no_sentence_the_next_line_goes_on(tmp_path):
    """A record that ends in a path ("images_dir: /runs/…/images") ended; the abort after it
    ("terminate called after throwing …") is its own account, not the rest of that line."""
    lines = _routine(12) + [
        "trainer: writing the run summary, images_dir: /workdir/poi_model/v0-20250724-195620/images",
        "terminate called after throwing an instance of 'c10::Error'",
        "  what():  Trying to free a pointer not allocated here",
    ]
    job = write_failed_job(tmp_path / "j", {"node0/console.log": lines})
    shown = [e.template for e in diagnose(job).events]
    assert "free a pointer" in shown[0], shown
    assert not any("images_dir" in t for t in shown), shown


def test_the_line_after_a_wrapped_sentence_is_no_traceback_s_exception(tmp_path):
    """mpirun's summary is wrapped help text right after a rank's traceback: its wrapped lines are context,
    but not a traceback's code line, so the line after them ("Process name: …") is no exception and the
    rank's ImportError stays first."""
    tb = [
        "[1,mpirank:0,algo-1]<stderr>:Traceback (most recent call last):",
        '[1,mpirank:0,algo-1]<stderr>:  File "/opt/ml/code/train.py", line 9, in <module>',
        "[1,mpirank:0,algo-1]<stderr>:    import horovod.torch as hvd",
        "[1,mpirank:0,algo-1]<stderr>:ImportError: /usr/lib/mpi_lib_v2.so: undefined symbol: _ZN3c10D1Ev",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "mpirun detected that one or more processes exited with non-zero status, thus causing",
        "the job to be terminated. The first process to do so was:",
        "  Process name: [[31509,1],0]",
        "  Exit code:    1",
    ]
    job = write_failed_job(tmp_path / "j", {"algo-1/algo-1.log": _routine(12) + tb})
    assert diagnose(job).events[0].template.startswith("ImportError")
    parsed, cands, sev, roles = _read(job)
    by_text = {parsed.templates[i].template.split()[0]: i for i in cands}
    assert roles.role.get(by_text["the"]) == CONTEXT  # "the job to be terminated. …": the rest of a sentence
    for word in ("mpirun", "Process"):  # the sentence's first line and the line after it weigh their own
        assert roles.inherited.get(by_text[word], 0.0) <= sev[by_text[word]], word


def test_glog_s_failure_signal_header_introduces_the_signal_after_its_program_counter(tmp_path):
    """glog's handler writes "*** Aborted at T (unix time) …", then "PC: @ 0x…", then the signal it caught:
    the signal line is the report's message, shown with the header."""
    lines = _routine(12) + [
        '*** Aborted at 1559007036 (unix time) try "date -d @1559007036" if you are using GNU date ***',
        "PC: @     0x7f55192ee460 (unknown)",
        "*** SIGSEGV (@0x0) received by PID 33419 (TID 0x7f5585428e00) from PID 0; stack trace: ***",
        "    @     0x7f55191b54b0 (unknown)",
        "    @           0x561093 w2l::tknIdx2Ltr()",
        "Segmentation fault (core dumped)",
    ]
    job = write_failed_job(tmp_path / "j", {"host-a/train.log": lines})
    top = diagnose(job).events[0]
    assert top.template.startswith("*** SIGSEGV"), [e.template for e in diagnose(job).events]
    assert any(x.startswith("*** Aborted at") for x in top.examples)


def test_torch_npu_s_report_of_a_failed_hccl_call_ranks_below_hccl_s_own_error(tmp_path):
    lines = _routine(12) + [f"[rank1]: {line}" for line in (
        "RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
        "HcclAllreduce, error code is 6",
        "[ERROR] 2025-04-08-18:07:20 (PID:1292363, Device:1, RankID:1) ERR01100 OPS call acl api failed.",
        "EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote Rank "
        "did not send the data in time. Please check the reason for the rank being stuck",
    )]
    job = write_failed_job(tmp_path / "j", {"node0/rank1.log": lines})
    assert diagnose(job).events[0].template.startswith("EI0006")


def test_a_short_line_ended_where_its_writer_ended_it(tmp_path):
    """A line shorter than a wrap width was not wrapped: "Python runtime state: finalizing" and the
    "terminate called without an active exception" after it are two reports, and CPython's fatal error
    before them stays first."""
    lines = _routine(12) + [
        "Fatal Python error: PyGILState_Release: thread state 0x7f must be current when releasing",
        "Python runtime state: finalizing",
        "terminate called without an active exception",
    ]
    job = write_failed_job(tmp_path / "j", {"host-a/run.log": lines})
    events = diagnose(job).events
    assert events[0].template.startswith("Fatal Python error")
    assert not any(x.startswith("terminate called") for e in events if e.template.startswith("Python runtime")
                   for x in e.examples)


def test_a_program_that_found_no_data_outranks_the_command_that_started_it(tmp_path):
    # public wave 36 sd-scripts-…-78 (dev), the paste's shape: the command line, set-up steps, the last word
    lines = ['accelerate launch --num_cpu_threads_per_process=16 "train_network.py" '
             '--pretrained_model_name_or_path="C:/models/sd-v1-4.ckpt" --train_data_dir="C:/data/pics" '
             '--output_dir="C:/out" --save_every_n_epochs=1 --mixed_precision=fp16',
             "prepare tokenizer", "Use DreamBooth method.", "prepare train images.",
             "0 train images with repeating.", "loading image sizes.", "prepare dataset",
             "No data found. Please verify arguments"]
    d = diagnose(write_failed_job(tmp_path / "j", {"node0/console.log": lines}))
    assert d.events and d.events[0].template.startswith("No data found")


_SHAPES = ("copying a param with shape torch.Size([128259, 4096]) from checkpoint, the shape in current "
           "model is torch.Size([128264, 4096]).")


def _state_dict_error(indent: str) -> list[str]:
    return ["Traceback (most recent call last):",
            '  File "/app/src/train.py", line 12, in <module>',
            "    model.load_state_dict(torch.load(path))",
            "RuntimeError: Error(s) in loading state_dict for PeftModelForCausalLM:",
            f"{indent}size mismatch for base_model.model.model.embed_tokens.weight: {_SHAPES}",
            f"{indent}size mismatch for base_model.model.lm_head.weight: {_SHAPES}"]


@pytest.mark.parametrize("indent", ["        ", "\t", "    "])
def test_an_exception_s_indented_message_body_is_an_event_not_a_code_line(tmp_path, indent):
    # public wave 35 llamafactory-…-8046 (dev): the "size mismatch for …" lines under "Error(s) in loading
    # state_dict for …:" are indented with spaces, and had read as the code line of a traceback frame
    d = diagnose(write_failed_job(tmp_path / "j", {"node0/console.log": _state_dict_error(indent)}))
    shown = [e.template for e in d.events[:2]]
    assert any(t.startswith("size mismatch for") for t in shown), shown
    assert not any("model.load_state_dict" in e.template for e in d.events)  # the frame's code line: context


def test_a_frame_s_code_line_is_no_message_body(tmp_path):
    lines = ["Traceback (most recent call last):", '  File "/app/src/train.py", line 12, in <module>',
             "    raise_if_missing(path, 'no space left on device')", "OSError: disk full"]
    d = diagnose(write_failed_job(tmp_path / "j", {"node0/console.log": lines}))
    assert not any("raise_if_missing" in e.template for e in d.events)

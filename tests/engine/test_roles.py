import json

import pytest

from engine.diagnose import diagnose
from tests.helpers.jobs import write_rank

AGENT = [
    "W1201 08:00:02.100000 77 torch/distributed/elastic/multiprocessing/api.py:897] "
    "Sending process 5679 closing signal SIGTERM",
    "E1201 08:00:02.456000 77 torch/distributed/elastic/multiprocessing/api.py:869] "
    "failed (exitcode: 1) local_rank: 1 (pid: 5678) of binary: /usr/bin/python3",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "Root Cause (first observed failure):",
    "  host      : node-1",
    "  exitcode  : 1 (pid: 5678)",
]


def _job(root, files):
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.json").write_text(json.dumps({"job_id": root.name, "status": "failed"}))
    for path, lines in files.items():
        write_rank(root / path, lines)
    return root


def test_launcher_summaries_and_wrappers_rank_below_the_error_that_started_it(tmp_path):
    failing = [
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/w/train.py", line 40, in main',
        "[rank1]:     raise ValueError('shape mismatch in layer 3 of the model')",
        "[rank1]: ValueError: shape mismatch in layer 3 of the model",
    ]
    peer = ["[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1207, "
            "remote process exited or there was a network error"]
    files = {"node-1/rank-1.log": failing, "node-0/rank-0.log": peer, "node-1/agent.log": AGENT,
             "node-0/agent.log": AGENT[:1]}
    d = diagnose(_job(tmp_path / "j", files))
    assert d.events[0].template == "ValueError: shape mismatch in layer <*> of the model"
    assert not any(e.template.startswith("raise ") for e in d.events[:3])


def test_a_line_that_quotes_another_events_message_is_its_wrapper(tmp_path):
    failing = [
        "RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: "
        "CUDA error: uncorrectable ECC error encountered",
        "terminate called after throwing an instance of 'c10::Error' what(): "
        "CUDA error: uncorrectable ECC error encountered",
    ]
    d = diagnose(_job(tmp_path / "j", {"node-0/rank-0.log": failing}))
    assert d.events[0].template == "RuntimeError: CUDA error: uncorrectable ECC error encountered"


def test_a_label_lines_content_is_the_line_after_it(tmp_path):
    failing = [
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1207, internal error",
        "ncclInternalError: Internal check failed.",
        "Last error:",
        "Bootstrap : no socket interface found",
    ]
    d = diagnose(_job(tmp_path / "j", {"node-0/rank-0.log": failing}))
    assert d.events[0].template == "Bootstrap : no socket interface found"


def test_the_launchers_report_is_the_evidence_when_a_killed_rank_left_none(tmp_path):
    agent = [AGENT[0], AGENT[1].replace("exitcode: 1", "exitcode: -9"), AGENT[2]]
    d = diagnose(_job(tmp_path / "j", {"node-0/agent.log": agent, "node-0/rank-0.log": ["iteration 3: ok"]}))
    assert d.events[0].template.startswith("failed (exitcode:")


def test_errors_a_file_logs_after_its_teardown_began_are_cascades_of_it(tmp_path):
    # the ranks time out waiting for a silent peer; then the agents tear down, and the node that
    # hosts the rendezvous store logs its own errors (alone, after its "Sending process" line)
    timeout = ["[rank{r}]: RuntimeError: [pair.cc:553] Timed out waiting 8000ms for recv operation"]
    store = [
        AGENT[0],
        "[W1201 08:00:03.000000 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=3): Broken pipe",
        "W1201 08:00:03.200000 77 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:1298] The node "
        "'127.0.0.1_77_0' has failed to shutdown the rendezvous 'job' due to an error of type "
        "RendezvousConnectionError.",
    ]
    files = {f"node-{n}/rank-{n}.log": [timeout[0].format(r=n)] for n in range(3)}
    files["node-0/agent.log"] = store
    files["node-1/agent.log"] = AGENT[:1]
    d = diagnose(_job(tmp_path / "j", files))
    assert "Timed out waiting" in d.events[0].template


def test_a_cascade_on_one_node_ranks_below_the_error_in_sight(tmp_path):
    failing = ["[rank2]: terminate called after throwing an instance of 'gloo::EnforceNotMet'"]
    peer = ["[rank0]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:25249. This is "
            "typically caused by a remote worker crashing."]
    # the mismatch shows on two of four nodes, the peer's closed connection on one
    files = {"node-1/rank-2.log": failing, "node-2/rank-4.log": failing, "node-0/rank-0.log": peer,
             "node-3/rank-6.log": ["step 1 ok"]}
    d = diagnose(_job(tmp_path / "j", files))
    assert "EnforceNotMet" in d.events[0].template


def test_a_peers_closed_connection_ranks_below_the_timeouts_it_follows(tmp_path):
    # a straggler: the others time out waiting for it and exit; then it finds its connections closed
    timeout = "[rank{r}]: RuntimeError: [unbound_buffer.cc:129] Timed out waiting 8000ms for send operation"
    closed = ("[rank{r}]: RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:3285. This is "
              "typically caused by a remote worker crashing. Check the logs of the remote worker.")
    files = {f"node-{n}/rank-{n}.log": [(closed if n == 2 else timeout).format(r=n)] for n in range(4)}
    d = diagnose(_job(tmp_path / "j", files))
    assert "Timed out waiting" in d.events[0].template


def test_a_collective_timeout_whose_operation_drain_masked_is_still_a_cascade():
    from engine.roles import CASCADE, lexicon_role

    for template in ("RuntimeError: [<*>:<*>] Timed out waiting <*> for <*> operation to complete",
                     "RuntimeError: [<*>:<*>] Timed out waiting <*> for recv operation to complete"):
        assert lexicon_role(template) == CASCADE


def _paste(tmp_path, lines):
    """The diagnosis of a one-file job of `lines` (a paste from an issue thread)."""
    return diagnose(_job(tmp_path / "j", {"node0/console.log": lines}))


def test_the_line_before_a_chained_exceptions_marker_is_the_first_exception(tmp_path):
    # a paste glued the first exception's line to its code line: no word of it says "error" at its start
    lines = [
        "Generating train split: 0 examples [00:00, ? examples/s]Failed to read file 'a.json' with error"
        " <class 'pyarrow.lib.ArrowInvalid'>: JSON parse error",
        "",
        "raise ValueError(ValueError: Not able to read records in the JSON file at /data/tok.json. You should"
        " probably indicate the field of the JSON file containing your records.",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/w/train.py", line 13, in <module>',
        "    dataset = load_dataset(",
    ]
    d = _paste(tmp_path, lines)
    assert d.events[0].template.startswith("raise ValueError(ValueError: Not able to read records")


_EXCEPTION_AFTER_TRACEBACK = {
    "after-code-line": ([
        "2024-05-01 10:00:00 INFO rendering the chat template",
        "Traceback (most recent call last):",
        '  File "/w/train.py", line 7, in <module>',
        "    tmpl = env.get_template('chat.j2')",
        "jinja2.exceptions.TemplateNotFound: chat.j2",
        "2024-05-01 10:00:01 WARNING tokenizer fell back to the slow implementation",
    ], "jinja2.exceptions.TemplateNotFound"),
    # public wave 29 dev, llamafactory-…-7526: a paste cut above its head, ending in Cython frames (no code
    # line under them); a frame line of a file named `error.pxi` is no error
    "cut-cython-frames": ([
        "[rank0]:     pa_table = pa_table.combine_chunks()",
        '[rank0]:   File "pyarrow/table.pxi", line 4512, in pyarrow.lib.Table.combine_chunks',
        '[rank0]:   File "pyarrow/error.pxi", line 155, in pyarrow.lib.pyarrow_internal_check_status',
        '[rank0]:   File "pyarrow/error.pxi", line 92, in pyarrow.lib.check_status',
        "[rank0]: pyarrow.lib.ArrowInvalid: offset overflow while concatenating arrays",
    ], "pyarrow.lib.ArrowInvalid: offset overflow"),
}


@pytest.mark.parametrize("paste", sorted(_EXCEPTION_AFTER_TRACEBACK))
def test_the_line_after_a_tracebacks_code_is_its_exception_whatever_its_type_is_called(tmp_path, paste):
    """The line right after a traceback's code line, or after its last frame where a frame shows no code line
    (a paste cut above its head starts at its first frame), is the traceback's exception."""
    lines, exception = _EXCEPTION_AFTER_TRACEBACK[paste]
    assert _paste(tmp_path, lines).events[0].template.startswith(exception)


def test_a_longer_label_before_a_traceback_is_context_and_the_traceback_head_inherits_nothing(tmp_path):
    lines = [
        "2023-07-01 16:41:05,669 - ERROR: Exception occurred during H2O LLM Studio run:",
        "Traceback (most recent call last):",
        '  File "/w/torch/serialization.py", line 441, in save',
        "    _save(obj, opened_zipfile, pickle_module, pickle_protocol)",
        "RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file",
    ]
    d = _paste(tmp_path, lines)
    assert d.events[0].template.startswith("RuntimeError: [enforce fail")
    assert not any(e.template.startswith(("Exception occurred", "Traceback")) for e in d.events)


def test_an_error_every_rank_hits_outranks_the_launcher_s_reports_of_it(tmp_path):
    files = {}
    for n in range(4):
        for r in (2 * n, 2 * n + 1):
            files[f"node-{n}/rank-{r}.log"] = [f"2025-01-01 10:00:0{k} INFO [rank{r}] step {k} ok"
                                               for k in range(5)] + [
                f"[rank{r}]: Traceback (most recent call last):",
                f'[rank{r}]:   File "/w/train.py", line 12, in <module>',
                f"[rank{r}]:     cfg = load_config(args.config)",
                f"[rank{r}]: KeyError: 'scheduler.warmup_ratio'",
            ]
        files[f"node-{n}/agent.log"] = [AGENT[1], AGENT[2]]
    d = diagnose(_job(tmp_path / "j", files))
    assert d.events[0].template == "KeyError: 'scheduler.warmup_ratio'"


def test_the_schedulers_report_of_an_oom_kill_ranks_below_the_kernels_line(tmp_path):
    d = _paste(tmp_path, [
        "[Mon Dec  1 08:00:01 2025] Out of memory: Killed process 4242 (python3) total-vm:9000000kB, "
        "anon-rss:8000000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:20000kB oom_score_adj:0",
        "slurmstepd: error: Detected 1 oom_kill event in StepId=3180797.0. Some of the step tasks have been "
        "OOM Killed."])
    assert d.events[0].template.startswith("Out of memory: Killed process")


def test_the_line_introducing_a_traceback_is_shown_with_its_exception(tmp_path):
    intro = "Exception ignored in: <bound method BaseSession.__del__ of <Session object at 0x7f4dd15d3d30>>"
    lines = [
        "Epoch 50/50 - loss: 0.1021",
        intro,
        "Traceback (most recent call last):",
        '  File "/venv/site-packages/tensorflow/python/client/session.py", line 707, in __del__',
        "TypeError: 'NoneType' object is not callable",
    ]
    d = _paste(tmp_path, lines)
    assert d.events[0].template.startswith("TypeError")
    assert d.events[0].examples[:2] == [intro, lines[-1]]
    assert not any(e.template.startswith("Exception ignored") for e in d.events)


def test_an_exception_without_a_message_wraps_the_one_that_follows(tmp_path):
    lines = [
        "Traceback (most recent call last):",
        '  File "train.py", line 9, in <module>',
        "    mp.spawn(run, nprocs=2)",
        "torch.multiprocessing.spawn.ProcessRaisedException: ",
        "",
        "-- Process 0 terminated with the following error:",
        "Traceback (most recent call last):",
        '  File "train.py", line 4, in run',
        "    dist.init_process_group(backend='nccl')",
        "RuntimeError: Distributed package doesn't have NCCL built in",
    ]
    d = _paste(tmp_path, lines)
    assert d.events[0].template == "RuntimeError: Distributed package doesn't have NCCL built in"
    assert d.events[0].examples[0] == "-- Process 0 terminated with the following error:"
    spawn = next(e for e in d.events if "ProcessRaisedException" in e.template)
    assert spawn.score < d.events[0].score


def test_the_line_naming_an_exception_is_shown_with_the_message_it_introduces(tmp_path):
    """An abort's 'terminate called after throwing an instance of X' carries no message of its own; the
    what() line after it does. The two are one report: the event shows both lines."""
    failing = [
        "Epoch 89 done, accuracy 0.93",
        "terminate called after throwing an instance of 'gloo::EnforceNotMet'",
        "  what():  [enforce fail at gloo/cuda_private.h:40] error == cudaSuccess. 29 vs 0. "
        "Error at: gloo/cuda_private.h:40: driver shutting down",
    ]
    d = diagnose(_job(tmp_path / "j", {"node-0/rank-0.log": failing}))
    assert "what():" in d.events[0].template or "enforce fail" in d.events[0].template
    assert any("terminate called after throwing" in x for x in d.events[0].examples), d.events[0].examples


def test_a_wrapper_saying_the_peer_went_away_is_the_root_when_nothing_else_is(tmp_path):
    """A rank's DistBackendError whose words say the remote process exited ranks first when what follows
    it is only the socket's own account of the same closed connection."""
    failing = [
        "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, remote process exited "
        "or there was a network error, NCCL version 2.21.5",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
        "prematurely.",
        "Last error:",
        "socketProgressOpt: Call to recv from 10.0.0.7<33759> failed : Connection reset by peer",
    ]
    d = diagnose(_job(tmp_path / "j", {"node-0/rank-0.log": failing}))
    first = d.events[0].template
    assert first.startswith("torch.distributed.DistBackendError"), [e.template for e in d.events]


def test_the_watchdogs_summary_is_shown_with_the_timeout_it_restates(tmp_path):
    """"Exception (either an error or timeout) detected by watchdog at work: N" restates the timeout the
    watchdog reported on the line right before it: whichever ranks first shows that line, of that rank,
    first (public: a 10-minute broadcast timeout on two ranks)."""
    files = {}
    for r in (1, 2):
        files[f"node0/rank{r}.log"] = [
            f"[rank{r}]:[E228 11:53:22.97493885{r} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=290583, OpType=BROADCAST, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600017 milliseconds before timing out."]
    files["node0/rank2.log"].append(
        "[rank2]:[E228 11:53:22.975958707 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 2] Exception "
        "(either an error or timeout) detected by watchdog at work: 290583, last enqueued NCCL work: 290583, "
        "last completed NCCL work: 290582.")
    d = diagnose(_job(tmp_path / "j", files))
    first = d.events[0].examples
    assert "[Rank 2] Watchdog caught collective operation timeout" in first[0]
    assert any("detected by watchdog" in line for line in first) or "Watchdog caught" in d.events[0].template


_PG = "ProcessGroupNCCL.cpp:{line}] [PG ID 0 PG GUID 0(default_pg) Rank {r}]"


def _watchdog_pair(r: int, seq: int = 600) -> list[str]:
    """A rank's watchdog timeout and the two lines that restate it (PyTorch 2.4)."""
    works = f"last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}."
    return [f"[rank{r}]:[E1219 03:01:55.98944980{r} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught "
            f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=_ALLGATHER_BASE, NumelIn=58309504, "
            "NumelOut=233238016, Timeout(ms)=1800000) ran for 1800080 milliseconds before timing out.",
            f"[rank{r}]:[E1219 03:01:55.99017576{r} {_PG.format(line=1785, r=r)} Exception (either an "
            f"error or timeout) detected by watchdog at work: {seq}, {works}",
            f"[rank{r}]:[E1219 03:01:56.09510930{r} {_PG.format(line=1834, r=r)} Timeout at NCCL work: "
            f"{seq}, {works}"]


_TIMEOUT = "[Rank <*>] Watchdog caught collective operation timeout"


def test_the_watchdogs_restatements_are_one_account_under_the_timeouts_own_template(tmp_path):
    """The watchdog's "Exception (either an error or timeout) detected by watchdog at work: 600" and,
    after the abort, "Timeout at NCCL work: 600" restate its "Watchdog caught collective operation
    timeout" line: the account is one event whose template names the collective (the one an SRE confirms
    as a pattern), ranked where its restatement's "error" put it, shown with the lines it restates
    (public: an FSDP save's ALLGATHER_BASE timing out after 30 minutes)."""
    files = {f"node0/rank{r}.log": _watchdog_pair(r) for r in (0, 1)}
    d = diagnose(_job(tmp_path / "j", files))
    first = d.events[0]
    assert first.template.startswith(_TIMEOUT)
    assert any("detected by watchdog" in line for line in first.examples)
    assert not any("detected by watchdog" in e.template or "Timeout at NCCL work" in e.template
                   for e in d.events)


def test_the_account_ranks_with_its_restatements_severity(tmp_path):
    """The timeout's own words weigh less than the restatement's "error": the account takes the better."""
    alone = diagnose(_job(tmp_path / "a", {"node0/rank0.log": _watchdog_pair(0)[:1]}))
    told = diagnose(_job(tmp_path / "b", {"node0/rank0.log": _watchdog_pair(0)[:2]}))
    assert told.events[0].template.startswith(_TIMEOUT) and alone.events[0].template.startswith(_TIMEOUT)
    assert told.events[0].score > alone.events[0].score


def test_only_the_timeout_is_restated_not_a_line_between(tmp_path):
    """A line between the restatements (NCCL's INFO about the communicator it aborts) is not what they
    restate: it takes neither their severity nor the lines (a review's finding)."""
    abort = ("[rank0]:gpu-a1:4242:4300 [0] NCCL INFO comm 0x55d1c7a0 rank 0 nranks 2 cudaDev 0 busId 1000 - "
             "Abort COMPLETE")
    pair = _watchdog_pair(0)
    d = diagnose(_job(tmp_path / "j", {"node0/rank0.log": [pair[0], pair[1], abort, pair[2]]}))
    assert d.events[0].template.startswith(_TIMEOUT), [e.template for e in d.events]
    info = [e for e in d.events if "Abort COMPLETE" in e.template]
    assert not info or info[0].score < 0.3


def test_pytorch_2_5s_watchdog_failure_line_restates_the_timeout(tmp_path):
    """PyTorch 2.5 words the restatement "failure detected by watchdog at work sequence id: N …"."""
    lines = _watchdog_pair(3, 335785)[:1] + [
        f"[rank3]:[E418 18:32:45.457196525 {_PG.format(line=2168, r=3)}  failure detected by watchdog at "
        "work sequence id: 335785 PG status: last enqueued work: 335785, last completed work: 335784"]
    d = diagnose(_job(tmp_path / "j", {"node0/rank3.log": lines}))
    assert d.events[0].template.startswith(_TIMEOUT)
    assert not any("failure detected by watchdog" in e.template for e in d.events)


def test_the_fault_librarys_cascade_pattern_does_not_demote_the_restated_timeout(tmp_path):
    """The built-in fault library lists the watchdog timeout as a cascade (a symptom: kb/library/nccl.yaml
    `nccl-watchdog-timeout`); its restatement, which no pattern names, ranked as a possible root cause: the
    one account keeps that rank where such a signature is known too (a watchdog thread's `what():`, which
    quotes the timeout, does not come first)."""
    from engine.known import KnownSignature
    cascade = KnownSignature(id="nccl-watchdog-timeout", root=False, weight=0.95,
                             regexes=("Watchdog caught collective operation timeout",))
    hostname = "[W socket.cpp:204] [c10d] The hostname of the client socket cannot be retrieved. err=-3"
    files = {}
    for r in range(6):
        files[f"node{r // 2}/rank{r}.log"] = [f"[rank{r}]:{hostname}", *_watchdog_pair(r)[:2],
                                              f"[rank{r}]:  what():  [PG 1 Rank {r}] Process group watchdog "
                                              f"thread terminated with exception: [Rank {r}] Watchdog caught "
                                              "collective operation timeout: WorkNCCL(SeqNum=600, "
                                              "OpType=_ALLGATHER_BASE) ran for 1800080 milliseconds"]
    files["node0/rank1.log"].insert(3, "[rank1]:terminate called after throwing an instance of "
                                       "'c10::DistBackendError'")
    plain = diagnose(_job(tmp_path / "a", files))
    known = diagnose(_job(tmp_path / "b", files), known=[cascade])
    for d in (plain, known):  # (not a substring test: the `what():` line quotes the timeout)
        assert d.events[0].template.startswith(_TIMEOUT), [e.template for e in d.events]


def test_sruns_task_reports_are_a_report_or_a_consequence():
    """srun's "node12: task 3: Killed" (its "srun: error:" header stripped) reports a death the rank may not
    have logged; "Exited with exit code 1" and "Aborted (core dumped)" echo what the task logged itself."""
    from engine.roles import lexicon_role

    assert lexicon_role("gpu-a1: tasks <*>-<*>: Killed") == "report"
    assert lexicon_role("nid001: task <*>: Segmentation fault (core dumped)") == "report"
    assert lexicon_role("nid001: task <*>: Exited with exit code <*>") == "consequence"
    assert lexicon_role("node12: task <*>: Aborted (core dumped)") == "consequence"


def test_a_file_that_ends_in_a_frame_and_its_code_line_stood_there(tmp_path):
    """A launcher left waiting for a worker that never exits, interrupted: its traceback ends at the frame
    it stood in, with no exception after it (public: torch.distributed.launch's `os.waitpid`)."""
    hung = ["Epoch 20 done, saving model", "^CTraceback (most recent call last):",
            '  File "/usr/lib/python3.7/site-packages/torch/distributed/launch.py", line 253, in main',
            "    process.wait()",
            '  File "/usr/lib/python3.7/subprocess.py", line 1611, in _try_wait',
            "    (pid, sts) = os.waitpid(self.pid, wait_flags)"]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": hung}))
    assert d.events and d.events[0].template.strip() == "(pid, sts) = os.waitpid(self.pid, wait_flags)"
    raised = [*hung, "KeyboardInterrupt"]
    d = diagnose(_job(tmp_path / "k", {"node0/console.log": raised}))
    assert d.events[0].template != "(pid, sts) = os.waitpid(self.pid, wait_flags)"


def test_an_intro_whose_traceback_lost_its_exception_is_the_account_of_it(tmp_path):
    """A paste cut inside the traceback an "Exception ignored in: <function …__del__>" line introduces: the
    intro line is all there is of the exception, and weighs as one (public: DeepSpeedEngine.__del__ at
    exit after the process group was destroyed)."""
    lines = ["Exception ignored in: <function DeepSpeedEngine.__del__ at 0x7f241b4fe830>",
             "Traceback (most recent call last):",
             '  File "/opt/ds/deepspeed/runtime/engine.py", line 520, in __del__',
             "    self.destroy()",
             '  File "/opt/ds/deepspeed/comm/comm.py", line 610, in get_rank',
             "    rank = dist.get_rank()"]
    d = diagnose(_job(tmp_path / "j", {"node0/console.log": lines}))
    assert d.events[0].template.startswith("Exception ignored in: <function DeepSpeedEngine.__del__")

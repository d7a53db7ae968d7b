"""The severity lexicon (engine/severity.py, data/severity.yaml)."""

import pytest

from engine.severity import severity


def test_a_quoted_system_error_or_caught_exception_class_is_an_error_whatever_the_level():
    c10d = ("[c10d] The client socket cannot be initialized to connect to [localhost]:<*> "
            "(errno: <*> - Address family not supported by protocol).")
    assert severity(c10d, "WARN") >= 0.8
    assert severity("OSError: [Errno 98] Address already in use", None) >= 0.8
    logged = "Failed to read file '<*>' with error <class 'AttributeError'>: 'list' object has no attribute"
    assert severity(logged, "ERROR") >= 0.8
    assert severity("the socket connected (errno: 0)", "INFO") <= 0.45  # informational lines stay capped


def test_a_warning_of_what_could_go_wrong_weighs_less_than_one_of_what_did():
    barrier = ("[PG ID <*> PG GUID <*> Rank <*>] using GPU <*> to perform barrier as devices used by this "
               "process are currently unknown. This can potentially cause a hang if this rank to GPU mapping "
               "is incorrect.")
    assert severity(barrier, "WARN") < 0.35
    # "might be caused by" says what did go wrong: not damped
    shm = ("Unexpected bus error encountered in worker. "
           "This might be caused by insufficient shared memory (shm).")
    assert severity(shm, "ERROR") >= 0.75


def test_an_exception_s_repr_a_terminate_with_no_exception_and_a_file_that_would_not_open_are_errors():
    """Wordings of what broke that carry no "Error:" (public wave 10's development half): Hydra prints the
    repr of the exception a target raised, std::terminate may run with no exception in flight, and a
    program may say in its own words that it could not open a file."""
    hydra = "HfHubHTTPError('The token available to HF does not allow writing to the Hub.')"
    assert severity(hydra, None) >= 0.8
    assert severity('ValueError("bad shape")', None) >= 0.8
    assert severity("checkError(1)", None) < 0.5  # a call, not an exception's repr
    assert severity("terminate called without an active exception", None) >= 0.85
    assert severity("Couldn't open file: /data/labels/image_1423.txt", None) >= 0.9
    assert severity("Unable to open file (unable to open file: name = 'x.h5')", None) >= 0.9


def test_an_exception_line_quoted_in_prose_is_an_error():
    """A paste that quotes the error in backticks (public, fairseq: "`FloatingPointError: Minimum loss scale
    reached (0.0001)`") weighs as the exception line does."""
    assert severity("`FloatingPointError: Minimum loss scale reached (<*>.<*>)`", None) >= 0.8
    assert severity("FloatingPointError: Minimum loss scale reached", None) >= 0.8


def test_xlas_resource_exhausted_is_an_oom_and_a_labelled_exception_is_an_exception():
    """JAX on a TPU: "UnfilteredStackTrace: RuntimeError: RESOURCE_EXHAUSTED: Attempting to allocate 31.06M"
    (public: trax) — XLA's out-of-memory status, behind a label that names the exception."""
    assert severity("RESOURCE_EXHAUSTED: Attempting to allocate <*>.<*>.", None) >= 0.95
    assert severity("UnfilteredStackTrace: RuntimeError: the device is gone", None) >= 0.8
    assert severity("Note: RuntimeError is raised when …", None) < 0.8  # no exception line, a mention


@pytest.mark.parametrize("line", [
    "double free or corruption (out)",  # public wave 18 spacy-…-9866 (dev): glibc's reason before "Aborted"
    "*** Error in `python': double free or corruption (!prev): 0x000055d1c0a3b0f0 ***",
    "free(): invalid pointer",
    "munmap_chunk(): invalid pointer",
    "malloc(): corrupted top size",
    "src/tcmalloc.cc:283] Attempt to free invalid pointer 0x1",  # public wave 5 epoch14-…-yolov3-650 (dev)
    "pure virtual method called",  # wave 30 paddle-fleet-…-paddlefleetx-59 (dev): libstdc++, then terminate
    "R6025 - pure virtual function call",  # MSVC's runtime
])
def test_the_c_librarys_heap_check_outranks_the_abort_it_causes(line):
    assert severity(line, None) > severity("Aborted (core dumped)", None)


def test_a_status_code_heading_a_message_and_a_device_held_elsewhere_are_errors():
    tpu = "Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process with pid <*>."
    assert severity(tpu, None) >= 0.8
    assert severity("FAILED_PRECONDITION: open(/dev/vfio/<*>): Device or resource busy", None) >= 0.8
    # a counter's name before its number, and a port a tool moves off, are no failure
    assert severity("Stats: ABORTED: 0 UNAVAILABLE: 0 UNKNOWN: 0", None) < 0.6
    assert severity("Port 6006 is already in use, trying 6007", None) < 0.6


def test_a_thread_s_uncaught_exception_report_is_an_error_below_the_exception_itself():
    head = severity("Exception in thread Thread-3:", None)
    assert 0.6 <= head < severity("EOFError: Ran out of input", None)


@pytest.mark.parametrize("line", [
    # public wave 29 run-mlm-…-datasets-2056 (dev): tokenizers' panic, the Python traceback under it cut
    "thread '<unnamed>' panicked at 'index out of bounds: the len is <*> but the index is <*>', x.rs:<*>:<*>",
    "thread 'main' panicked at src/lib.rs:<*>:<*>:",  # newer Rust: the place first, the message below
    "pyo3_runtime.PanicException: index out of bounds: the len is <*> but the index is <*>",
])
def test_a_rust_librarys_panic_is_an_error_as_its_python_exception_is(line):
    assert severity(line, None) >= 0.9
    note = "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace"
    assert severity(note, None) < 0.6


def test_a_host_name_that_does_not_resolve_is_an_error():
    # public wave 31 cpm-2-finetune-…-42 (dev): DeepSpeed's launcher ssh-es to a hostfile's node by name
    assert severity("ssh: Could not resolve hostname <*>: Name or service not known", None) >= 0.8
    assert severity("socket.gaierror: [Errno -3] Temporary failure in name resolution", None) >= 0.8


def test_a_hang_is_a_word_not_a_part_of_one():
    # public wave 32 insightface-…-wandb-7468 (dev): "zhangyi" in wandb's run link had read as a hang
    assert severity("wandb: View run x at: http:<*>/zhangyi/Face%<*>/runs/<*>/workspace", None) < 0.5
    for line in ("the job hangs at step <*>", "Hang detected on rank <*>", "stuck at barrier"):
        assert severity(line, None) >= 0.7, line


def test_a_program_saying_it_found_nothing_is_a_failure_statement():
    # public wave 36 sd-scripts-…-78 (dev): kohya's "No data found." after "0 train images" ranked below the
    # `accelerate launch …` command line the paste opened with
    for line in ("No data found. Please verify arguments", "No checkpoint found in <*>",
                 "Model file not found: <*>", "No CUDA GPUs are available"):
        assert severity(line, None) >= 0.6, line
    assert severity("found <*> files", None) < 0.5
    assert severity("INFO no issues found", "INFO") <= 0.45  # the informational cap holds

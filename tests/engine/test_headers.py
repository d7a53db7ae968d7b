import pytest

from engine.headers import naive_stamp, parse_header, timestamp

CASES = [
    (
        "[rank3]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective",
        "2026-12-06T18:44:12.715298Z",
        "ERROR",
        3,
        "[Rank 3] Watchdog caught collective",
    ),
    ("[default0]:2026-05-01 10:22:31,123 - INFO - hello", "2026-05-01T10:22:31.123000Z", "INFO", 0, "hello"),
    (
        "node17-2:36748:36748 [0] NCCL WARN NET/IB : Got completion with error 12",
        None,
        "ERROR",  # NCCL warns of its failures
        None,
        "NCCL WARN NET/IB : Got completion with error 12",
    ),
    (
        "[ERROR] HCCL(123,python):2024-05-21-11:57:54.167.645 [hccl.cc:12] error cqe status",
        "2024-05-21T11:57:54.000000Z",
        "ERROR",
        None,
        "error cqe status",
    ),
    (
        "EI0002: [PID: 2969] 2025-10-11-15:09:34.713.335 "
        "The wait execution of the Notify register times out.",
        "2025-10-11T15:09:34.000000Z",
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
        "2026-11-29T12:00:01.000000Z",
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
        "2024-09-11T17:52:18.030000Z",
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


MORE = [
    "[rank3]:[W0517 09:01:50.528840960 socket.cpp:697] [c10d] The IPv6 network addresses",
    "Jan  3 01:02:03 gpu7 kernel: [1234.5] NVRM: Xid 79",
    "19:14:43  NVRM: Xid (PCI:0000:06:00): 79",
    "[ERROR] HCCL(1234,python):2024-05-21-11:57:54.167.645 [hccl.cc:12] error",
    "[default7]:2026-05-01T10:22:31Z msg",
    "[80746] [rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] x",
    "2026-05-01 10:22:31,123 - INFO - [Rank 2] iteration 17: tokens/sec/gpu 3305.2",
]


@pytest.mark.parametrize("line", [c[0] for c in CASES] + MORE + ["", "\x00\ufffd\u00e9 12:00:00 é"])
def test_timestamp_by_pre_key_layout_equals_the_header_parse(line):
    for year in (1970, 2026):
        assert timestamp(line, year) == parse_header(line, year).ts
    shifted = line.translate(str.maketrans("0123456789", "9876543210"))  # same pre-key, other digits
    assert timestamp(shifted, 2026) == parse_header(shifted, 2026).ts


LAUNCHER = [
    ("[1,0]<stderr>:Traceback (most recent call last):",
     None, "ERROR", 0, "Traceback (most recent call last):"),
    ("[1,3]<stdout>:2026-05-01 10:22:31,123 - INFO - hello",
     "2026-05-01T10:22:31.123000Z", "INFO", 3, "hello"),
    ("0: RuntimeError: boom", None, "ERROR", 0, "RuntimeError: boom"),
    (" 12: [E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] x",
     "2026-12-06T18:44:12.715298Z", "ERROR", 12, "x"),
    ("2026-05-01T10:22:31Z [rank3]: ValueError: bad",
     "2026-05-01T10:22:31.000000Z", "ERROR", 3, "ValueError: bad"),
    ("2026-05-01T10:22:31.5Z 7: step 3", "2026-05-01T10:22:31.500000Z", None, 7, "step 3"),
    ("worker-1: [2024-09-11 17:52:18,030] [INFO] [Rank 0] step=40",
     "2024-09-11T17:52:18.030000Z", "INFO", None,
     "[Rank 0] step=40"),
    ("10.0.0.3: RuntimeError: NCCL error", None, "ERROR", None, "RuntimeError: NCCL error"),
    ("(RayTrainWorker pid=1234, ip=10.0.0.1) ValueError: x", None, "ERROR", None, "ValueError: x"),
    # SageMaker's MPI launcher tags each line with the host too
    ("[1,mpirank:3,algo-2]<stderr>:OSError: Can't load tokenizer", None, "ERROR", 3,
     "OSError: Can't load tokenizer"),
    # Ray's own logger: "%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"
    ("2026-10-18 07:47:30,573\tWARNING worker.py:1462 -- The node with node id: 05e3 has been marked dead",
     "2026-10-18T07:47:30.573000Z", "WARN", None, "The node with node id: 05e3 has been marked dead"),
    # Kubernetes/containerd (CRI) container log files: the stream and the F(ull)/P(art) tag after the stamp
    ("2026-11-19T02:29:21.192687456Z stderr F [default1]:OSError: [Errno 116] Stale file handle",
     "2026-11-19T02:29:21.192687Z", "ERROR", 1, "OSError: [Errno 116] Stale file handle"),
    ("2026-11-19T02:29:21.1Z stdout F W1119 02:29:21.192687 1234 torch/distributed/elastic/api.py:704] x",
     "2026-11-19T02:29:21.100000Z", "WARN", None, "x"),
    ("2026-11-19T02:29:21Z stdout P step 40 loss 1.25", "2026-11-19T02:29:21.000000Z", None, None,
     "step 40 loss 1.25"),
    ("[Tue Nov 29 12:00:01 2024] NVRM: Xid (PCI:0000:06:00): 79",
     "2024-11-29T12:00:01.000000Z", "ERROR", None,
     "NVRM: Xid (PCI:0000:06:00): 79"),
]


@pytest.mark.parametrize("line,ts,level,rank,message", LAUNCHER)
def test_launcher_prefixes_before_or_after_a_timestamp(line, ts, level, rank, message):
    h = parse_header(line, year=2026)
    assert (h.ts, h.level, h.rank, h.message) == (ts, level, rank, message)
    assert timestamp(line, 2026) == ts


def test_a_stream_tag_inside_a_message_is_not_a_header():
    assert parse_header("2026-05-01T10:22:31Z got stderr F from the pipe", year=2026).message == \
        "got stderr F from the pipe"
    assert parse_header("stderr F x", year=2026).message == "x"  # a CRI line cut before its stamp


def test_a_bare_number_inside_a_message_is_not_a_rank():
    h = parse_header("[INFO] 3: not a rank")
    assert (h.rank, h.message) == (None, "3: not a rank")


@pytest.mark.parametrize("line,utc", [
    ("2026-05-01T18:22:31+08:00 msg", "2026-05-01T10:22:31.000000Z"),
    ("2026-05-01 05:22:31.250-0500 msg", "2026-05-01T10:22:31.250000Z"),
    ("[2026-05-01 10:22:31 Z] msg", "2026-05-01T10:22:31.000000Z"),
    ("2026-01-01T07:00:00+08:00 msg", "2025-12-31T23:00:00.000000Z"),
])
def test_offsets_are_honoured(line, utc):
    assert parse_header(line).ts == utc
    assert timestamp(line) == utc


def test_naive_stamps_are_read_in_the_configured_zone(monkeypatch):
    monkeypatch.setenv("L4_LOG_TZ", "Asia/Shanghai")
    assert timestamp("2026-05-01 18:22:31 msg") == "2026-05-01T10:22:31.000000Z"
    assert timestamp("2026-05-01T18:22:31Z msg") == "2026-05-01T18:22:31.000000Z"  # an offset wins
    monkeypatch.setenv("L4_LOG_TZ", "+05:30")
    assert timestamp("2026-05-01 15:52:31 msg") == "2026-05-01T10:22:31.000000Z"
    monkeypatch.setenv("L4_LOG_TZ", "Not/AZone")
    assert timestamp("2026-05-01 10:22:31 msg") == "2026-05-01T10:22:31.000000Z"


def test_fixed_width_stamps_sort_in_time_order():
    lines = ["2026-05-01T10:22:31Z a", "2026-05-01T10:22:31.5Z a", "2026-05-01T10:22:30.999+00:00 a",
             "2026-05-01T18:22:32+08:00 a"]
    stamps = [timestamp(x) for x in lines]
    assert sorted(stamps) == [stamps[2], stamps[0], stamps[1], stamps[3]]


def test_has_year():
    from engine.headers import has_year
    assert has_year("Nov 29 12:00:01 gpu7 kernel: x") is False
    assert has_year("I0506 10:00:00.1 123 f.cc:1] x") is False
    assert has_year("2026-05-01 10:00:00 x") is True
    assert has_year("no stamp") is None


def test_impossible_dates_give_no_timestamp():
    assert parse_header("2026-13-45 10:00:00 msg").ts is None
    assert timestamp("2026-13-45 10:00:00 msg") is None


def test_naive_stamp():
    assert naive_stamp("W1201 15:57:43.054000 12286 torch/distributed/run.py:865] node_rank") is True
    assert naive_stamp("[rank4]:2026-12-01T15:57:59.479+01:00 - INFO - __main__ - [RANK 4] ready") is False
    assert naive_stamp("2026-12-01 15:57:59,479 - INFO - ready") is True
    assert naive_stamp("[2024-09-11T17:52:18Z] ready") is False
    assert naive_stamp("no stamp here") is None


def test_headers_of_hugging_face_examples_c10_and_nccl_source_lines():
    from engine.headers import parse_header as ph

    h = ph("05/16/2023 13:54:44 - ERROR - datasets.builder - Failed to read file")
    assert (h.ts, h.level) == ("2023-05-16T13:54:44.000000Z", "ERROR")
    glued = ph("Generating train split: 0 examples [00:00, ? examples/s]"
               "05/16/2023 13:54:44 - ERROR - x - boom")
    assert glued.level == "ERROR" and glued.message == "x - boom"  # a tqdm bar the record was glued to
    assert ph("Generating train split: 1 examples [00:00, 10.13 examples/s]").message.startswith("Generating")
    # a slow step's bar (seconds per iteration) and one with a postfix, a rank's record glued to each
    slow = ph("  2%|▏         | 13/620 [01:07<50:20,  4.98s/it][rank0]:[E1123 00:52:57.664949121 "
              "ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: x")
    assert (slow.rank, slow.level) == (0, "ERROR") and slow.message.startswith("[Rank 0] Watchdog caught")
    post = ph("Epoch 0:  16%|█▌        | 7395/45743 [13:13:43<68:36:00,  6.44s/it, train_loss: 0.084, "
              "avg_loss: 0.080][rank3]: Traceback (most recent call last):")
    assert post.rank == 3 and post.message == "Traceback (most recent call last):"
    assert ph("Train: 100%|██████████| 742/742 [1:50:01<00:00, 10.37s/it]").message.startswith("Train: 100%")
    swift = ph("[INFO:swift] images_dir: /workdir/poi/v0-20250724-195620/images")  # a level with its logger
    assert swift.level == "INFO" and swift.message == "images_dir: /workdir/poi/v0-20250724-195620/images"
    c10 = ph("[W729 12:37:15.952489580 socket.cpp:752] [c10d] The client socket cannot be initialized")
    assert c10.level == "WARN" and c10.ts is not None and c10.message.startswith("[c10d]")
    assert ph("ERROR: Unexpected bus error encountered in worker.").level == "ERROR"
    nccl = ph("gpu4:35902:35977 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12")
    assert nccl.level == "ERROR" and nccl.message.startswith("NCCL WARN NET/IB")  # NCCL warns of failures
    assert ph("gpu4:35902:35902 [0] NCCL INFO Destroyed comm 0x7f1d rank 0").level == "INFO"


# Structured lines (engine/jsonlog.py): one JSON object per line, as collectors write them
JOURNAL = ('{"MESSAGE": "Out of memory: Killed process 4242 (python3) total-vm:123kB", "PRIORITY": "3", '
           '"SYSLOG_IDENTIFIER": "kernel", "_HOSTNAME": "gpu-7", "__REALTIME_TIMESTAMP": "1795842821250000"}')
STRUCTURED = [
    # journald -o json: __REALTIME_TIMESTAMP in microseconds, syslog PRIORITY
    (JOURNAL, "2026-11-28T05:13:41.250000Z", "ERROR", None,
     "Out of memory: Killed process 4242 (python3) total-vm:123kB"),
    # Docker json-file: the program's whole line (its own header read in turn) with "\n"; RFC 3339 nanoseconds
    ('{"log":"[rank3]: RuntimeError: CUDA error: an illegal memory access\\n","stream":"stderr",'
     '"time":"2026-12-02T05:38:14.123456789Z"}',
     "2026-12-02T05:38:14.123456Z", "ERROR", 3, "RuntimeError: CUDA error: an illegal memory access"),
    ('{"log":"2026-12-02 05:38:10,500 - WARNING - slow step\\n","stream":"stdout",'
     '"time":"2026-12-02T05:38:14Z"}',
     "2026-12-02T05:38:14.000000Z", "WARN", None, "slow step"),  # the collector's stamp is the line's
    # structlog (ISO with an offset, level names) / python-json-logger (levelname, asctime)
    ('{"event": "loader stalled", "level": "warning", "timestamp": "2026-12-02T13:38:14.5+08:00", '
     '"rank": 5}',
     "2026-12-02T05:38:14.500000Z", "WARN", 5, "loader stalled"),
    ('{"asctime": "2026-12-02 05:38:14,250", "levelname": "CRITICAL", "name": "train", '
     '"message": "NaN loss"}',
     "2026-12-02T05:38:14.250000Z", "FATAL", None, "NaN loss"),
    # GCP / Stackdriver: severity names, a protobuf Timestamp or an ISO string
    ('{"severity": "ERROR", "message": "preempted", "timestamp": {"seconds": 1795842821, "nanos": 5000000}}',
     "2026-11-28T05:13:41.005000Z", "ERROR", None, "preempted"),
    ('{"severity": "NOTICE", "textPayload": "job started", "timestamp": "2026-11-28T05:13:41Z"}',
     "2026-11-28T05:13:41.000000Z", "INFO", None, "job started"),
    # pino / bunyan: numeric levels, epoch milliseconds
    ('{"level": 50, "time": 1795842821123, "pid": 7, "hostname": "h", "msg": "worker lost"}',
     "2026-11-28T05:13:41.123000Z", "ERROR", None, "worker lost"),
    ('{"level": 30, "time": 1795842821123, "msg": "RuntimeError: boom"}',  # INFO says less than the message
     "2026-11-28T05:13:41.123000Z", "ERROR", None, "RuntimeError: boom"),
    # loguru serialize=True: the record's message, not its formatted text
    ('{"text": "2026-11-28 05:13:41.500 | ERROR    | train:step:12 - step failed\\n", "record": '
     '{"level": {"icon": "x", "name": "ERROR", "no": 40}, "message": "step failed", '
     '"time": {"repr": "2026-11-28 05:13:41.500000+00:00", "timestamp": 1795842821.5}, '
     '"extra": {"rank": 2}}}',
     "2026-11-28T05:13:41.500000Z", "ERROR", 2, "step failed"),
    # epoch seconds as a digit string; a JSON record after a CRI prefix (whose stamp comes first)
    ('{"msg": "tick", "ts": "1795842821"}', "2026-11-28T05:13:41.000000Z", None, None, "tick"),
    ('2026-11-19T02:29:21.192687456Z stderr F {"levelname": "ERROR", "message": "x", "rank": "4", '
     '"asctime": "2026-11-19 02:29:20,000"}', "2026-11-19T02:29:21.192687Z", "ERROR", 4, "x"),
    # behind a launcher's prefix: its rank stays the line's; the record's stamp is the only one
    ('[default3]:{"event": "NCCL timeout", "level": "error", "timestamp": "2026-11-19T02:29:20Z", "rank": 9}',
     "2026-11-19T02:29:20.000000Z", "ERROR", 3, "NCCL timeout"),
    ('worker-1: {"msg": "ready", "level": 30, "time": 1795842821000}', "2026-11-28T05:13:41.000000Z", "INFO",
     None, "ready"),
]


@pytest.mark.parametrize("line,ts,level,rank,message", STRUCTURED)
def test_structured_lines_give_their_records_message_stamp_level_and_rank(line, ts, level, rank, message):
    h = parse_header(line, 2026)
    assert (h.ts, h.level, h.rank, h.message) == (ts, level, rank, message)
    assert timestamp(line, 2026) == ts
    shifted = line.translate(str.maketrans("0123456789", "9876543210"))  # other digits, same pre-key
    assert timestamp(shifted, 2026) == parse_header(shifted, 2026).ts


@pytest.mark.parametrize("line,ts,level,rank,message", STRUCTURED)
def test_structured_lines_give_the_same_message_and_level_by_pre_key(line, ts, level, rank, message):
    from engine.scan import message_level
    assert message_level(line) == (message, level)


NOT_RECORDS = [
    '{"a": 1, "b": [1, 2]}',  # JSON, no message field
    '{"message": 3, "level": "error"}',  # a message that is no string
    '[{"message": "x"}]',  # not an object
    '"just a string"',
    '{"message": "cut short by the reader',  # a line cut at MAX_LINE
    "{'loss': 0.52, 'learning_rate': 1e-05, 'epoch': 0.1}",  # a Python dict's repr (Hugging Face)
    "{",
    '{"message": "x"} trailing',
    "Job config: {\"job\": {\"name\": \"run\"}}",  # JSON inside a text line
]


@pytest.mark.parametrize("line", NOT_RECORDS)
def test_lines_that_are_no_record_are_read_as_text(line):
    from engine.scan import message_level
    h = parse_header(line)
    assert h.message == line.strip() and h.ts is None
    assert timestamp(line) is None and message_level(line)[0] == line.strip()


def test_record_values_of_odd_kinds():
    deep = '{"message": "deep", "x": ' + "[" * 500 + "]" * 500 + "}"  # nested values are no matter
    assert parse_header(deep).message == "deep"
    too_deep = '{"message": "x", "y": ' + '{"a":' * 200_000 + "1" + "}" * 200_000 + "}"
    assert parse_header(too_deep).message == too_deep  # Python's JSON reader gives up: read as text
    huge = '{"message": "' + "w " * 200_000 + '", "time": 1795842821}'
    h = parse_header(huge)
    assert h.ts == "2026-11-28T05:13:41.000000Z" and len(h.message) == 399_999
    # journald writes a message that is not UTF-8 as an array of its bytes
    raw = ('{"MESSAGE": [78, 86, 82, 77, 58, 32, 88, 105, 100, 32, 255], '
           '"__REALTIME_TIMESTAMP": "1795842821000000"}')
    assert parse_header(raw).message == "NVRM: Xid \ufffd" and parse_header(raw).level == "ERROR"
    # a line read with replacement characters stays a record; so do escapes
    assert parse_header('{"msg": "caf\ufffd \\u00e9 \\"q\\"", "level": "info"}').message == 'caf\ufffd é "q"'
    # a stamp outside the plausible years, a boolean, a bad ISO string, an unknown level: left out
    odd = parse_header('{"msg": "m", "time": 12.5, "ts": true, "timestamp": "2026-13-45T10:00:00Z", '
                       '"level": "verbose", "rank": -1}')
    assert (odd.ts, odd.level, odd.rank) == (None, None, None)


def test_records_of_several_lines_read_their_first_line_and_the_exception():
    import json
    tb = 'Traceback (most recent call last):\n  File "train.py", line 9, in step\nValueError: bad shape\n'
    assert parse_header(json.dumps({"message": tb, "level": "error"})).message == "ValueError: bad shape"
    assert parse_header(json.dumps({"message": "step failed\n" + tb})).message == \
        "step failed: ValueError: bad shape"
    with_field = json.dumps({"event": "step failed", "exception": tb, "level": "error"})  # structlog
    assert parse_header(with_field).message == "step failed: ValueError: bad shape"
    assert parse_header(json.dumps({"message": "two\nplain lines"})).message == "two"


def test_structured_stamps_have_a_year_and_are_naive_only_without_an_offset():
    from engine.headers import has_year
    assert has_year(JOURNAL) is True and naive_stamp(JOURNAL) is False
    naive = '{"message": "x", "asctime": "2026-11-19 02:29:20,000"}'
    assert naive_stamp(naive) is True and has_year(naive) is True
    assert naive_stamp('{"message": "no stamp"}') is None


def test_naive_structured_stamps_are_read_in_the_configured_zone(monkeypatch):
    monkeypatch.setenv("L4_LOG_TZ", "Asia/Shanghai")
    naive = '{"message": "x", "asctime": "2026-11-19 10:29:20,000"}'
    assert timestamp(naive) == "2026-11-19T02:29:20.000000Z"
    assert timestamp(JOURNAL) == "2026-11-28T05:13:41.250000Z"  # epoch stamps are UTC


@pytest.mark.parametrize("line,ts,level,message", [
    # RFC 3339 lets the `T` and `Z` be lower case (some Go and Rust loggers write them so)
    ("2026-11-03t10:00:25.5z WARN low disk", "2026-11-03T10:00:25.500000Z", "WARN", "WARN low disk"),
    ('{"time": "2026-11-03t10:00:30.5z", "level": 50, "msg": "boom"}', "2026-11-03T10:00:30.500000Z",
     "ERROR", "boom"),
    # a bare level word after the stamp: zap's console encoder (tabs), Go's layouts, loguru's `| LEVEL |`
    # (read, and left in the message: the same line without a stamp gives the same template)
    ("2026-11-03T10:00:25.000+08:00 ERROR RuntimeError: CUDA error", "2026-11-03T02:00:25.000000Z", "ERROR",
     "ERROR RuntimeError: CUDA error"),
    ("2026-11-03T10:00:25.000+0800\tERROR\tpkg/train.go:12\tboom", "2026-11-03T02:00:25.000000Z", "ERROR",
     "ERROR\tpkg/train.go:12\tboom"),
    ("2024-01-01 12:00:00.000 | ERROR    | trainer:step:12 - loss nan", "2024-01-01T12:00:00.000000Z",
     "ERROR", "ERROR    | trainer:step:12 - loss nan"),
])
def test_lower_case_rfc3339_stamps_and_bare_level_words(line, ts, level, message):
    h = parse_header(line)
    assert (h.ts, h.level, h.message) == (ts, level, message)


@pytest.mark.parametrize("line", ["[rank1]: ERROR boom", "ERRORS were found", "Error happened"])
def test_a_level_word_inside_a_message_is_no_header(line):
    """Only right after a stamp or at the line's start, whole and upper case, is a bare word a level."""
    h = parse_header(line)
    assert h.message == line.split(": ", 1)[-1] and h.level in (None, "ERROR")


def test_open_mpi_timestamp_output_and_date_stamps():
    """`mpirun --timestamp-output` glues a ctime stamp to its rank tag; `date` writes a zone name before
    the year (dropped: the stamp is read as naive)."""
    h = parse_header("Tue May 12 22:52:16 2026[1,15]<stderr>:2026-05-12 22:52:16,096 - WARNING - x - rank 15")
    assert (h.ts, h.level, h.rank, h.message) == ("2026-05-12T22:52:16.000000Z", "WARN", 15, "x - rank 15")
    h = parse_header("Tue May 12 22:52:16 UTC 2026 starting job")
    assert (h.ts, h.message) == ("2026-05-12T22:52:16.000000Z", "starting job")
    assert parse_header("Tue May 12 is the day").ts is None


def test_a_line_with_and_without_its_stamp_keeps_one_message():
    """Ranks of one job that write a line with a stamp and without one must give one template."""
    with_stamp = parse_header("[default1]:2026-12-01T00:51:41.609-08:00 INFO [rank1] trainer: ready")
    without = parse_header("[default1]:INFO [rank1] trainer: ready")
    assert with_stamp.message == without.message == "INFO [rank1] trainer: ready"
    assert with_stamp.level == "INFO"


_TPU = ("2022-02-23 07:56:56.271731: F "
        "external/org_tensorflow/tensorflow/core/tpu/tpu_library_init_fns.inc:104] ")
_XLA = "2023-08-25 11:06:39.330561: E external/xla/xla/service/gpu/nccl_utils.cc:191] "


@pytest.mark.parametrize("line, level, message", [
    # public wave 17 mesh-transformer-jax-…-tpuembeddingengine… (dev): the TPU runtime's FATAL read as prose
    (_TPU + "TpuEmbeddingEngine_WriteParameters not available.", "FATAL",
     "TpuEmbeddingEngine_WriteParameters not available."),
    (_XLA + "Aborting communicator", "ERROR", "Aborting communicator"),
    ("W tensorflow/core/framework/op_kernel.cc:968] Resource exhausted: OOM", "WARN",
     "Resource exhausted: OOM"),
])
def test_absl_cpp_log_lines_after_a_stamp_have_a_level(line, level, message):
    h = parse_header(line)
    assert (h.level, h.message) == (level, message)


def test_a_letter_and_a_path_inside_prose_are_no_absl_header():
    assert parse_header("see E external/x.cc:12] for the cause").level is None


def test_a_bracketed_number_before_a_stamp_is_a_prefix():
    # public wave 6 jaxlib-0120-…-jax-788 (dev): a job number before the stamp
    h = parse_header("[1] 2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/compiler/xla/"
                     "python/local_client.cc:672] Execution of replica 0 failed")
    assert (h.level, h.message) == ("ERROR", "Execution of replica 0 failed")
    assert parse_header("[3] 12 items left").message == "[3] 12 items left"


@pytest.mark.parametrize("line, level, message, dated", [
    ("2020-12-22 08:09:37,999-INFO: iter: 1860, lr: 0.019983", "INFO", "iter: 1860, lr: 0.019983", True),
    ("[rank1]: [ERROR] 2025-04-08-18:07:20 (PID:1292363, Device:1, RankID:1) ERR01100 OPS call failed.",
     "ERROR", "ERR01100 OPS call failed.", True),
    ("00:28:21.238 [I] [process=0][thread=MainThread] Starting CheckpointManager Save", "INFO",
     "[process=0][thread=MainThread] Starting CheckpointManager Save", False),
    ("[16:24:41] include/dmlc/logging.h:303: [16:24:41] src/io/local_filesys.cc:39: Check failed: fwrite",
     None, "Check failed: fwrite", False),
])
def test_paddle_npu_absl_and_dmlc_headers(line, level, message, dated):
    # public dev pastes (PaddleDetection, torch_npu, Orbax, MXNet) whose headers had stayed in the message; a
    # time of day alone is no timestamp (as `time-only`)
    h = parse_header(line)
    assert (h.level, h.message, h.ts is not None) == (level, message, dated)


def test_pythons_level_glued_to_its_asctime_then_the_logger_is_a_header():
    h = parse_header("INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889: Unable to initialize backend")
    assert (h.level, h.ts) == ("INFO", "2024-06-25T00:34:55.142000Z")
    assert h.message == "Unable to initialize backend"
    # no logger's name there: an exception's class or a URL stays in the message
    assert "ValueError: bad" in parse_header("ERROR:2024-06-25 00:34:55,039:ValueError: bad").message
    assert "https://x/y" in parse_header("ERROR:2024-06-25 00:34:55,039:https://x/y").message

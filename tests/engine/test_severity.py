"""The severity lexicon (engine/severity.py, data/severity.yaml)."""

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

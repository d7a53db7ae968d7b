"""Reading the lines before given lines of a rank file again: one anchor per pass, or many in one."""
import gzip

from engine.window import read_window, read_windows_before


def _lines(n: int) -> list[str]:
    return [f"line {k} " + "x" * (k % 97) for k in range(n)]


def test_many_anchors_in_one_pass_read_what_one_anchor_at_a_time_reads(tmp_path):
    path = tmp_path / "rank0.log"
    path.write_text("\n".join(_lines(200_000)) + "\n")  # some 11 MB: more than one read block
    anchors = [0, 3, 40, 41, 150_000, 199_999]
    windows = read_windows_before(str(path), anchors, 40)
    assert sorted(windows) == anchors
    for anchor in anchors:
        one = read_window(str(path), anchor, before=40, after=0)
        assert (windows[anchor].start, windows[anchor].lines) == (one.start, one.lines), anchor
        assert windows[anchor].lines[windows[anchor].at] == f"line {anchor} " + "x" * (anchor % 97)


def test_a_gzip_file_reads_the_same_and_an_anchor_past_the_end_has_no_window(tmp_path):
    path = tmp_path / "rank0.log.gz"
    with gzip.open(path, "wt") as f:
        f.write("\n".join(_lines(500)) + "\n")
    windows = read_windows_before(str(path), [10, 499, 10_000], 5)
    assert sorted(windows) == [10, 499]
    assert windows[10].lines == [f"line {k} " + "x" * k for k in range(5, 11)]
    assert read_windows_before(str(path), [], 5) == {}


def test_a_missing_file_has_no_windows(tmp_path):
    assert read_windows_before(str(tmp_path / "gone.log"), [1, 2], 5) == {}

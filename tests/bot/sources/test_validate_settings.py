"""bot.sources.validate_settings: bad fetch settings are one ConfigError line at start, not on the
first link a user pastes."""
from pathlib import Path

import pytest

from bot.config import ConfigError
from bot.sources import validate_settings
from tests.helpers.tls_certs import make_ca


def test_good_settings_pass_and_create_the_cache(tmp_path: Path, make_settings) -> None:
    s = make_settings(report_networks=["10.0.0.0/8", "fd00::/8"], log_root="memory://logs")
    validate_settings(s)
    assert (tmp_path / "cache" / "remote-jobs").is_dir()


def test_each_bad_setting_is_one_line(tmp_path: Path, make_settings) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("url_rules:\n  - pattern: '(unclosed'\n")
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("not a certificate\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        (dict(report_networks=["ten.zero/8"]), "L4_REPORT_NETWORKS: not a network"),
        (dict(report_rules=str(rules)), r"L4_REPORT_RULES \(.*\): url_rules\[0\].pattern"),
        (dict(report_rules=str(tmp_path / "missing.yaml")), "L4_REPORT_RULES .*cannot read"),
        (dict(fetch_ca_bundle=str(not_pem)), "L4_FETCH_CA_BUNDLE: no PEM certificates"),
        (dict(fetch_ca_bundle=str(tmp_path / "none.pem")), "L4_FETCH_CA_BUNDLE: cannot read"),
        (dict(log_root="nosuchproto://bucket/logs"), r"L4_LOG_ROOT: unknown storage protocol nosuchproto://"),
        (dict(cache_dir=str(a_file / "sub")), "L4_CACHE_DIR: cannot create"),
    ]
    for overrides, message in cases:
        with pytest.raises(ConfigError, match=message) as info:
            validate_settings(make_settings(**overrides))
        assert "\n" not in str(info.value), overrides


def test_a_real_ca_bundle_passes(tmp_path: Path, make_settings) -> None:
    ca = make_ca(tmp_path)
    validate_settings(make_settings(fetch_ca_bundle=str(ca.cert)))


def test_missing_storage_backend_names_the_extra(make_settings) -> None:
    try:
        import s3fs  # noqa: F401
        pytest.skip("s3fs is installed")
    except ImportError:
        pass
    with pytest.raises(ConfigError, match=r"L4_LOG_ROOT: reading s3:// needs more packages: .*'l4\[s3\]'"):
        validate_settings(make_settings(log_root="s3://bucket/logs"))

"""Host allowlist semantics and the address policy (what the bot relies on)."""
import pytest

from bot.config import ConfigError, Settings
from bot.sources.netguard import AddressPolicy, Refused, host_allowed, safe_url


def test_host_allowed_semantics() -> None:
    s = Settings(report_hosts=["reports.example.com", "*.logs.example.com", "10.1.2.3", "[::1]"])
    assert host_allowed("reports.example.com", s)
    assert host_allowed("Reports.Example.COM.", s)  # case and a trailing dot do not matter
    assert not host_allowed("example.com", s) and not host_allowed("evilreports.example.com", s)
    assert not host_allowed("reports.example.com.evil.org", s)
    assert host_allowed("a.logs.example.com", s) and host_allowed("a.b.logs.example.com", s)
    assert not host_allowed("logs.example.com", s)  # the wildcard is for names below it
    assert not host_allowed("xlogs.example.com", s)
    assert host_allowed("10.1.2.3", s) and not host_allowed("10.1.2.4", s)
    assert host_allowed("::1", s) and host_allowed("[0:0::1]", s)
    assert not host_allowed("", s) and not host_allowed("anything", Settings())


def test_public_addresses_pass_and_internal_ones_are_refused(fake_dns) -> None:
    fake_dns.update({"reports.example.com": ["93.184.216.34"], "intra.example.com": ["10.0.0.7"],
                     "meta.example.com": ["169.254.169.254"],
                     "mixed.example.com": ["93.184.216.34", "127.0.0.1"],
                     "v6.example.com": ["::ffff:127.0.0.1"], "cgnat.example.com": ["100.64.1.1"]})
    s = Settings(report_hosts=["*.example.com"])
    policy = AddressPolicy(s)
    assert policy.check("reports.example.com", 443) == "93.184.216.34"
    for host, kind in [("intra.example.com", "private"), ("meta.example.com", "cloud-metadata"),
                       ("mixed.example.com", "loopback"), ("v6.example.com", "loopback"),
                       ("cgnat.example.com", "non-public")]:
        with pytest.raises(Refused, match=kind) as info:
            policy.check(host, 80)
        # what DNS answered stays private
        assert "10.0.0.7" not in str(info.value) and "169.254" not in str(info.value)
    with pytest.raises(Refused, match="not in L4_REPORT_HOSTS"):
        policy.check("evil.org", 80)


def test_explicit_exceptions() -> None:
    # a network lets internal hosts through, but never the metadata address inside it
    s = Settings(report_hosts=["169.254.169.254", "127.0.0.1"],
                 report_networks=["10.0.0.0/8", "169.254.0.0/16"])
    policy = AddressPolicy(s)
    import ipaddress

    assert policy.address_ok(ipaddress.ip_address("10.9.9.9"))
    assert policy.address_ok(ipaddress.ip_address("169.254.1.1"))
    assert policy.address_ok(ipaddress.ip_address("127.0.0.1"))  # IP literal in L4_REPORT_HOSTS
    assert policy.address_ok(ipaddress.ip_address("169.254.169.254"))  # listed exactly
    strict = AddressPolicy(Settings(report_hosts=["x.example.com"], report_networks=["169.254.0.0/16"]))
    assert not strict.address_ok(ipaddress.ip_address("169.254.169.254"))
    with pytest.raises(ConfigError, match="L4_REPORT_NETWORKS"):
        AddressPolicy(Settings(report_networks=["ten.zero/8"]))


def test_safe_url_drops_credentials_and_queries() -> None:
    shown = safe_url("https://user:s3cret@reports.example.com:8443/r/1?token=abc#x")
    assert shown == "https://reports.example.com:8443/r/1?…"
    assert "s3cret" not in shown and "abc" not in shown

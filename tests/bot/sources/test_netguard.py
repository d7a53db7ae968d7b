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


@pytest.mark.parametrize("address, kind", [
    ("64:ff9b::a9fe:a9fe", "cloud-metadata"),  # NAT64 to 169.254.169.254
    ("64:ff9b::a00:1", "private"),  # NAT64 to 10.0.0.1
    ("64:ff9b::7f00:1", "loopback"),
    ("2002:a00:1::1", "private"),  # 6to4 with 10.0.0.1 embedded
    ("2002:a9fe:a9fe::", "cloud-metadata"),
    ("2002:7f00:1:1::5", "loopback"),
    ("::7f00:1", "loopback"),  # IPv4-compatible
    ("::a9fe:a9fe", "cloud-metadata"),
    ("::ffff:0:a00:1", "private"),  # IPv4-translated (SIIT)
    ("::ffff:7f00:1", "loopback"),  # IPv4-mapped, as before
    ("64:ff9b:1::808:808", "non-public"),  # local-use NAT64: never public
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "private"),  # Teredo (IETF protocol space)
])
def test_ipv6_addresses_embedding_ipv4_are_judged_by_it(fake_dns, address: str, kind: str) -> None:
    import ipaddress

    policy = AddressPolicy(Settings(report_hosts=["logs.example.com"]))
    assert not policy.address_ok(ipaddress.ip_address(address))
    fake_dns["logs.example.com"] = [address]
    with pytest.raises(Refused, match=f"resolves to a {kind} address") as info:
        policy.check("logs.example.com", 443)
    assert address not in str(info.value)


def test_ipv6_addresses_embedding_public_or_allowlisted_ipv4_pass() -> None:
    import ipaddress

    ok = AddressPolicy(Settings(report_hosts=["logs.example.com"])).address_ok
    for public in ("64:ff9b::808:808", "2002:808:808::1", "::ffff:0:808:808", "2606:4700::1111"):
        assert ok(ipaddress.ip_address(public)), public
    s = Settings(report_hosts=["logs.example.com", "64:ff9b::a00:5"],
                 report_networks=["10.1.0.0/16", "64:ff9b:1::/48"])
    ok = AddressPolicy(s).address_ok
    assert ok(ipaddress.ip_address("64:ff9b::a01:203"))  # 10.1.2.3 is allowlisted
    assert ok(ipaddress.ip_address("2002:a01:203::"))
    assert ok(ipaddress.ip_address("64:ff9b::a00:5"))  # the IPv6 literal itself is listed
    assert ok(ipaddress.ip_address("64:ff9b:1::a00:1"))  # the local NAT64 prefix, allowlisted
    assert not ok(ipaddress.ip_address("64:ff9b::a02:203"))
    assert not ok(ipaddress.ip_address("::1")) and not ok(ipaddress.ip_address("::"))

"""deploy/k8s: every manifest valid against the Kubernetes schemas that kubernetes-validate ships
(offline, strict: an unknown field fails), and the properties the bot relies on."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S = Path(__file__).resolve().parents[2] / "deploy" / "k8s"
VERSION = "1.30.0"


def _docs() -> dict[str, dict]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out[doc["kind"]] = doc
    return out


def test_every_manifest_is_valid_and_strict() -> None:
    docs = _docs()
    assert set(docs) >= {"Deployment", "Service", "ConfigMap", "Secret", "PersistentVolumeClaim", "Job",
                         "NetworkPolicy"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, VERSION, strict=True)
    broken = {**docs["Deployment"], "spec": {**docs["Deployment"]["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):  # the validator does reject a typo
        kubernetes_validate.validate(broken, VERSION, strict=True)


def test_two_replicas_probed_on_healthz_and_given_the_drain_to_stop() -> None:
    docs = _docs()
    deploy, config = docs["Deployment"], docs["ConfigMap"]["data"]
    assert deploy["spec"]["replicas"] == 2
    pod = deploy["spec"]["template"]["spec"]
    (bot,) = pod["containers"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert bot[probe]["httpGet"]["path"] == "/healthz"
    assert "--http" in bot["args"] and "0.0.0.0" in bot["args"]
    drain = float(config["L4_DRAIN_SECONDS"])
    assert drain + 5 <= pod["terminationGracePeriodSeconds"] <= drain + 30
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] != 0
    mounts = {m["name"]: m for m in bot["volumeMounts"]}
    logs = next(v for v in pod["volumes"] if v["name"] == "logs")
    assert logs["persistentVolumeClaim"]["claimName"] == docs["PersistentVolumeClaim"]["metadata"]["name"]
    assert mounts["logs"]["readOnly"] and mounts["logs"]["mountPath"] == config["L4_LOG_ROOT"]
    refs = {next(iter(e.values()))["name"] for e in bot["envFrom"]}
    assert refs == {docs["Secret"]["metadata"]["name"], docs["ConfigMap"]["metadata"]["name"]}
    assert "L4_DATABASE_URL" in docs["Secret"]["stringData"]  # the password is in the URL


def test_the_migration_job_upgrades_the_schema() -> None:
    job = _docs()["Job"]["spec"]["template"]["spec"]
    (c,) = job["containers"]
    assert c["command"] == ["l4", "db", "upgrade"] and job["restartPolicy"] in ("OnFailure", "Never")


def test_egress_only_to_dns_https_and_the_database() -> None:
    policy = _docs()["NetworkPolicy"]["spec"]
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    ports = {(p.get("protocol", "TCP"), p["port"]) for rule in policy["egress"] for p in rule["ports"]}
    assert ports == {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 5432)}
    assert all(rule.get("to") for rule in policy["egress"])  # each rule names where, none is open

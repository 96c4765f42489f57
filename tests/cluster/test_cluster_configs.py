"""cluster/: the Ray cluster launcher YAMLs and the KubeRay manifests.

Fast and offline: no network, no Ray start. The launcher YAMLs go through what
`ray up` runs before its cloud calls (``prepare_config``, then Ray's own schema with
``validate_config``); the security settings (token authentication, dashboard on
localhost, shared storage) are checked on every shipped file; the study commands of the
RayJob and of cluster/README.md are parsed with the real ``python -m raydp_synth.tune``
parser.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "cluster"
KUBERAY = CLUSTER / "kuberay"
LAUNCHERS = ("aws.yaml", "gcp.yaml")
SHARED = "/storage"
STUDIES = "/storage/studies"
TOKEN_SECRET = "raydp-synth-ray-token"
PVC = "studies"
STORAGE_PLACEHOLDER = {"aws.yaml": "fs-REPLACE_ME", "gcp.yaml": "REPLACE_WITH_FILESTORE_IP"}
MANIFESTS = {
    "raycluster.yaml": [("ray.io/v1", "RayCluster")],
    "rayjob.yaml": [("ray.io/v1", "RayJob")],
    "pvc.yaml": [("v1", "PersistentVolumeClaim")],
    "secret.example.yaml": [("v1", "Secret")],
    "studies-pod.yaml": [("v1", "Pod")],
    "networkpolicy.yaml": [("networking.k8s.io/v1", "NetworkPolicy")] * 2,
}
#: The metrics export port of every Ray node (no token: docs/privacy.md, "The trust
#: boundary"), pinned in every `ray start` and Ray pod so the firewall rules name it.
METRICS_PORT = 8080

RAY_VERSION = version("ray")
TORCH_VERSION = version("torch").split("+")[0]
TORCHVISION_VERSION = version("torchvision").split("+")[0]


# ---------------------------------------------------------------- helpers


def _launcher(name: str) -> dict[str, Any]:
    return yaml.safe_load((CLUSTER / name).read_text())


def _prepared(name: str) -> dict[str, Any]:
    """The config as `ray up` has it before talking to the cloud (defaults merged)."""
    from ray.autoscaler._private.util import prepare_config

    return prepare_config(copy.deepcopy(_launcher(name)))


def _ray_start_commands(config: dict[str, Any], key: str) -> list[str]:
    return [c for c in config[key] if re.search(r"\bray start\b", c)]


def _all_commands(config: dict[str, Any]) -> list[str]:
    keys = ("initialization_commands", "setup_commands", "head_setup_commands",
            "worker_setup_commands", "head_start_ray_commands", "worker_start_ray_commands")
    return [c for k in keys for c in config.get(k, [])]


def _shipped_files() -> list[Path]:
    files = [p for p in CLUSTER.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert files
    return files


def _manifest(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((KUBERAY / name).read_text()) if d is not None]


def _cluster_specs() -> list[tuple[str, dict[str, Any]]]:
    (cluster,) = _manifest("raycluster.yaml")
    (job,) = _manifest("rayjob.yaml")
    return [("RayCluster", cluster["spec"]), ("RayJob.rayClusterSpec", job["spec"]["rayClusterSpec"])]


def _pod_specs(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "head", spec["headGroupSpec"]["template"]["spec"]
    for group in spec["workerGroupSpecs"]:
        yield f"worker group {group['groupName']}", group["template"]["spec"]


def _walk(node: Any) -> Iterator[tuple[Any, Any]]:
    """Every (key, value) pair of a parsed YAML document, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item)


def _tune_parser():
    from raydp_synth.tune.__main__ import build_parser

    return build_parser()


def _parse_tune_command(command: str):
    """Parse ``python -m raydp_synth.tune ...`` (and what follows it) with the real CLI."""
    start = command.index("python -m raydp_synth.tune")
    argv = shlex.split(command[start:], comments=True)
    assert argv[:3] == ["python", "-m", "raydp_synth.tune"], argv
    return _tune_parser().parse_args(argv[3:])


def _readme_code_lines() -> list[str]:
    """Logical lines (backslash continuations joined) of cluster/README.md's code blocks."""
    lines: list[str] = []
    in_code = False
    pending = ""
    for raw in (CLUSTER / "README.md").read_text().splitlines():
        if raw.strip().startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            continue
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        lines.append(line)
    assert not in_code, "cluster/README.md has an unclosed code block"
    return lines


# ---------------------------------------------------------------- launcher YAMLs


@pytest.mark.parametrize("name", LAUNCHERS)
def test_launcher_config_passes_rays_schema(name: str) -> None:
    from ray.autoscaler._private.util import validate_config

    config = _prepared(name)
    validate_config(config)
    assert config["provider"]["type"] == name.removesuffix(".yaml")


@pytest.mark.parametrize("name", LAUNCHERS)
def test_launcher_defines_every_command_list(name: str) -> None:
    # Ray's provider defaults start the head with the dashboard on all interfaces and
    # install a development wheel: none of their command lists may be used.
    raw = _launcher(name)
    for key in ("initialization_commands", "setup_commands", "head_setup_commands",
                "worker_setup_commands", "head_start_ray_commands", "worker_start_ray_commands"):
        assert key in raw, f"{name}: {key} falls back to Ray's provider default"
    prepared = _prepared(name)
    assert prepared["head_start_ray_commands"] == raw["head_start_ray_commands"]
    assert prepared["worker_start_ray_commands"] == raw["worker_start_ray_commands"]


@pytest.mark.parametrize("name", LAUNCHERS)
def test_head_dashboard_binds_to_localhost(name: str) -> None:
    config = _prepared(name)
    (head_start,) = _ray_start_commands(config, "head_start_ray_commands")
    assert "--head" in head_start
    assert "--dashboard-host=127.0.0.1" in head_start
    for command in _all_commands(config):
        assert "0.0.0.0" not in command, command


@pytest.mark.parametrize("name", LAUNCHERS)
def test_every_ray_start_keeps_token_authentication(name: str) -> None:
    config = _prepared(name)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = _ray_start_commands(config, key)
        assert starts, f"{name}: no `ray start` in {key}"
        for command in starts:
            assert "RAY_AUTH_MODE=token" in command, command
            assert command.index("RAY_AUTH_MODE=token") < command.index("ray start"), command
            assert "test -s ~/.ray/auth_token" in command, "must refuse to start without a token"
    for command in _all_commands(config):
        assert not re.search(r"RAY_AUTH_MODE\W{0,3}disabled", command, re.I), command


@pytest.mark.parametrize("name", LAUNCHERS)
def test_token_is_copied_to_every_node_from_outside_the_repository(name: str) -> None:
    config = _launcher(name)
    local = config["file_mounts"].get("~/.ray/auth_token")
    assert local is not None, "the token must reach ~/.ray/auth_token on every node"
    assert local.startswith("~/") and "raydp_synth" not in local, local
    setup = " ; ".join(config["setup_commands"])
    assert "chmod 600 ~/.ray/auth_token" in setup
    assert "export RAY_AUTH_MODE=token" in setup  # for `ray exec` and drivers on the nodes


@pytest.mark.parametrize("name", LAUNCHERS)
def test_nodes_mount_the_shared_storage_before_ray_starts(name: str) -> None:
    config = _launcher(name)
    init = " ; ".join(config["initialization_commands"])
    assert STORAGE_PLACEHOLDER[name] in init, "keep the storage placeholder obvious"
    assert re.search(rf"mount -t nfs4? .* {SHARED}(\s|$)", init), init
    assert f"chmod 0700 {STUDIES}" in init
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        for command in _ray_start_commands(config, key):
            assert f"mountpoint -q {SHARED}" in command, command
            assert f"test -w {STUDIES}" in command, command


@pytest.mark.parametrize("name", LAUNCHERS)
def test_the_repository_is_installed_on_every_node(name: str) -> None:
    config = _launcher(name)
    mounts = {remote: local for remote, local in config["file_mounts"].items()
              if remote.startswith("~/raydp_synth/")}
    assert set(mounts) == {f"~/raydp_synth/{p}" for p in
                           ("pyproject.toml", "README.md", "raydp_synth", "search_spaces")}
    for local in mounts.values():  # relative to the repository root, where `ray up` runs
        assert (REPO / local).exists(), local
    setup = " ; ".join(config["setup_commands"])
    assert (f'"torch=={TORCH_VERSION}" "torchvision=={TORCHVISION_VERSION}" '
            '--index-url https://download.pytorch.org/whl/cu') in setup
    # Installed like the wheel (.ci/wheel_check), rebuilt on every re-sync; not editable.
    assert (f'--reinstall-package raydp_synth ~/raydp_synth '
            f'"ray[default,tune,train]=={RAY_VERSION}"') in setup
    assert " -e " not in setup and "--editable" not in setup


@pytest.mark.parametrize("name", LAUNCHERS)
def test_cpu_head_and_autoscaling_gpu_workers(name: str) -> None:
    config = _prepared(name)
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    workers = [t for n, t in types.items() if n != config["head_node_type"]]
    assert workers and all(t["resources"].get("GPU", 0) >= 1 for t in workers)
    assert all(t["min_workers"] == 0 and t["max_workers"] >= 1 for t in workers)


def test_aws_security_group_opens_no_port() -> None:
    group = _launcher("aws.yaml")["provider"].get("security_group", {})
    assert not group.get("IpPermissions"), "the launcher's default rules (intra-cluster, SSH) only"


# ---------------------------------------------------------------- every shipped file


def test_no_shipped_file_binds_the_dashboard_publicly() -> None:
    bindings = 0
    for path in _shipped_files():
        text = path.read_text()
        assert "0.0.0.0" not in text, path
        for match in re.finditer(r"dashboard[-_]host\W{1,3}([\w.:]+)", text):
            assert match.group(1) in ("127.0.0.1", "localhost"), (path, match.group(0))
            bindings += 1
    assert bindings >= len(LAUNCHERS)


def test_no_shipped_file_disables_token_authentication() -> None:
    for path in _shipped_files():
        text = path.read_text()
        assert not re.search(r"RAY_AUTH_MODE\W{0,20}disabled", text, re.I), path
        assert not re.search(r"\bmode:\s*['\"]?disabled", text, re.I), path


# ---------------------------------------------------------------- KubeRay


def test_kuberay_manifests_parse_with_the_right_kinds() -> None:
    assert {p.name for p in KUBERAY.glob("*.yaml")} == set(MANIFESTS)
    for name, expected in MANIFESTS.items():
        docs = _manifest(name)
        assert [(d["apiVersion"], d["kind"]) for d in docs] == expected, name


def test_pvc_is_read_write_many() -> None:
    (pvc,) = _manifest("pvc.yaml")
    assert pvc["metadata"]["name"] == PVC
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert "REPLACE" in pvc["spec"]["storageClassName"]


def test_secret_example_holds_a_placeholder_only() -> None:
    (secret,) = _manifest("secret.example.yaml")
    assert secret["metadata"]["name"] == TOKEN_SECRET
    assert set(secret["stringData"]) == {"auth_token"}
    assert "REPLACE" in secret["stringData"]["auth_token"]


@pytest.mark.parametrize(("where", "spec"), _cluster_specs())
def test_every_ray_pod_mounts_the_studies_pvc_at_storage(where: str, spec: dict[str, Any]) -> None:
    for pod, pod_spec in _pod_specs(spec):
        volumes = {v["name"] for v in pod_spec["volumes"]
                   if v.get("persistentVolumeClaim", {}).get("claimName") == PVC}
        assert volumes, f"{where} {pod}: no volume of the {PVC} PVC"
        ray = pod_spec["containers"][0]
        mounts = [m for m in ray.get("volumeMounts", []) if m["name"] in volumes]
        assert [m["mountPath"] for m in mounts] == [SHARED], f"{where} {pod}"
        assert not mounts[0].get("readOnly", False)
        assert pod_spec["securityContext"]["runAsUser"] == 1000, "study dirs are owner-only"


@pytest.mark.parametrize(("where", "spec"), _cluster_specs())
def test_gpu_workers_request_nvidia_gpus(where: str, spec: dict[str, Any]) -> None:
    groups = spec["workerGroupSpecs"]
    assert groups, where
    for group in groups:
        assert group["minReplicas"] == 0 and group["maxReplicas"] >= 1
        resources = group["template"]["spec"]["containers"][0]["resources"]
        assert int(resources["limits"]["nvidia.com/gpu"]) >= 1, f"{where} {group['groupName']}"
        assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"]
    head = spec["headGroupSpec"]
    assert "nvidia.com/gpu" not in head["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert head["rayStartParams"]["num-gpus"] == "0"
    assert spec["enableInTreeAutoscaling"] is True


@pytest.mark.parametrize(("where", "spec"), _cluster_specs())
def test_head_service_is_cluster_internal(where: str, spec: dict[str, Any]) -> None:
    assert spec["headGroupSpec"]["serviceType"] == "ClusterIP", where
    assert "dashboard-host" not in spec["headGroupSpec"]["rayStartParams"] or \
        spec["headGroupSpec"]["rayStartParams"]["dashboard-host"] == "127.0.0.1"


def test_no_manifest_exposes_a_service_outside_the_cluster() -> None:
    for name in MANIFESTS:
        for doc in _manifest(name):
            for key, value in _walk(doc):
                if key in ("type", "serviceType"):
                    assert value not in ("LoadBalancer", "NodePort"), (name, key, value)
                assert not (key == "enableIngress" and value), name
            assert doc["kind"] not in ("Ingress", "Service"), name


@pytest.mark.parametrize(("where", "spec"), _cluster_specs())
def test_token_authentication_with_the_token_from_the_secret(where: str, spec: dict[str, Any]) -> None:
    assert spec["authOptions"] == {"mode": "token", "secretName": TOKEN_SECRET}, where
    assert spec["rayVersion"] == RAY_VERSION
    for pod, pod_spec in _pod_specs(spec):
        env = {e["name"]: e for e in pod_spec["containers"][0]["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token", f"{where} {pod}"
        token = env["RAY_AUTH_TOKEN"]
        assert "value" not in token, f"{where} {pod}: the token must come from the Secret"
        assert token["valueFrom"]["secretKeyRef"] == {"name": TOKEN_SECRET, "key": "auth_token"}


def test_all_pods_run_the_image_of_the_dockerfile() -> None:
    images = set()
    for name in MANIFESTS:
        for doc in _manifest(name):
            images |= {v for k, v in _walk(doc) if k == "image"}
    assert len(images) == 1, images
    (image,) = images
    assert image.startswith("REPLACE_WITH_REGISTRY/raydp-synth:")
    dockerfile = (CLUSTER / "Dockerfile").read_text()
    assert f"ARG RAY_IMAGE=rayproject/ray:{RAY_VERSION}-py311-gpu" in dockerfile
    assert f"ARG TORCH_VERSION={TORCH_VERSION}" in dockerfile
    assert f'"ray[default,tune,train]=={RAY_VERSION}"' in dockerfile
    installs = [line for line in dockerfile.splitlines() if "pip install" in line]
    assert installs and not any(" -e " in line or "--editable" in line for line in installs)


def test_rayjob_entrypoint_runs_a_study_on_the_shared_storage() -> None:
    (job,) = _manifest("rayjob.yaml")
    entrypoint = job["spec"]["entrypoint"]
    assert entrypoint.startswith("python -m raydp_synth.tune ")
    args = _parse_tune_command(entrypoint)
    assert args.method == "dpaf"
    assert args.storage == Path(STUDIES)
    assert args.use_gpu and args.workers_per_trial == 1
    assert args.name and not args.resume
    assert job["spec"]["backoffLimit"] == 0, "a study is never restarted by itself"


# ---------------------------------------------------------------- cluster/README.md


def test_readme_study_commands_parse_and_use_the_shared_storage() -> None:
    commands = [line for line in _readme_code_lines() if "python -m raydp_synth.tune" in line]
    assert len(commands) >= 3
    for command in commands:
        args = _parse_tune_command(command)
        assert args.storage == Path(STUDIES), command
        assert args.name, f"name the study (to fetch and resume it): {command}"
        assert "ray job submit --address http://127.0.0.1:8265 " in command, command
    assert any(_parse_tune_command(c).resume for c in commands), "the resume command"


def test_readme_talks_to_the_cluster_through_localhost_with_the_token() -> None:
    lines = _readme_code_lines()
    for line in lines:
        if re.search(r"\bray job \w+", line):
            assert "--address http://127.0.0.1:8265" in line, line
    assert "export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=~/.ray/raydp-synth-cluster-token" in lines
    for line in lines:
        if "raydp_synth.budget" in line or "rsync-down" in line or "kubectl cp" in line:
            assert STUDIES in line, line
    assert "ray up cluster/aws.yaml" in lines and "ray down cluster/aws.yaml" in lines
    assert "ray dashboard cluster/aws.yaml" in lines


# ---------------------------------------------------------------- the metrics export port

#: networking.k8s.io/v1 NetworkPolicy as a strict JSON schema: the fields, types and
#: enums of the Kubernetes API reference (NetworkPolicySpec, NetworkPolicyIngressRule,
#: NetworkPolicyEgressRule, NetworkPolicyPeer, NetworkPolicyPort, IPBlock, LabelSelector),
#: with unknown fields refused (as `kubectl apply --validate=strict` does).
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_SELECTOR = {"type": "object", "additionalProperties": False, "properties": {
    "matchLabels": _LABELS,
    "matchExpressions": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["key", "operator"],
        "properties": {"key": {"type": "string"},
                       "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                       "values": {"type": "array", "items": {"type": "string"}}}}}}}
_PEER = {"type": "object", "additionalProperties": False, "minProperties": 1, "properties": {
    "podSelector": _SELECTOR, "namespaceSelector": _SELECTOR,
    "ipBlock": {"type": "object", "additionalProperties": False, "required": ["cidr"],
                "properties": {"cidr": {"type": "string"},
                               "except": {"type": "array", "items": {"type": "string"}}}}}}
_PORT = {"type": "object", "additionalProperties": False, "properties": {
    "protocol": {"enum": ["TCP", "UDP", "SCTP"]},
    "port": {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 65535},
                       {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}]},
    "endPort": {"type": "integer", "minimum": 1, "maximum": 65535}}}
NETWORK_POLICY_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "networking.k8s.io/v1"},
        "kind": {"const": "NetworkPolicy"},
        "metadata": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"},
            "namespace": {"type": "string"}, "labels": _LABELS, "annotations": _LABELS}},
        "spec": {"type": "object", "additionalProperties": False, "required": ["podSelector"],
                 "properties": {
                     "podSelector": _SELECTOR,
                     "policyTypes": {"type": "array", "items": {"enum": ["Ingress", "Egress"]}},
                     "ingress": {"type": "array", "items": {
                         "type": "object", "additionalProperties": False, "properties": {
                             "from": {"type": "array", "items": _PEER},
                             "ports": {"type": "array", "items": _PORT}}}},
                     "egress": {"type": "array", "items": {
                         "type": "object", "additionalProperties": False, "properties": {
                             "to": {"type": "array", "items": _PEER},
                             "ports": {"type": "array", "items": _PORT}}}}}},
    },
}


def _ray_pod_labels() -> list[dict[str, str]]:
    """The labels of every Ray pod of raycluster.yaml and rayjob.yaml, with those
    KubeRay adds (``ray.io/node-type``)."""
    labels = []
    for _, spec in _cluster_specs():
        groups = [("head", spec["headGroupSpec"])]
        groups += [("worker", group) for group in spec["workerGroupSpecs"]]
        for node_type, group in groups:
            labels.append({**group["template"]["metadata"]["labels"], "ray.io/node-type": node_type})
    return labels


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert not selector.get("matchExpressions"), "matchLabels only, so that the test can read it"
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _admits(policies: list[dict[str, Any]], source: dict[str, str] | None, port: int) -> bool:
    """Whether some ingress rule lets a pod of this namespace with ``source`` labels
    (None: a client outside the namespace, no namespace label matching) reach ``port``
    of a Ray pod."""
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            ports = rule.get("ports") or [{"port": port}]
            if not any(p["port"] <= port <= p.get("endPort", p["port"]) for p in ports):
                continue
            for peer in rule.get("from") or [{}]:
                if "namespaceSelector" in peer or "ipBlock" in peer:
                    continue  # only the operator's namespace, a placeholder here
                if source is not None and _selects(peer.get("podSelector", {}), source):
                    return True
    return False


def test_network_policy_validates_against_the_kubernetes_schema() -> None:
    import jsonschema

    policies = _manifest("networkpolicy.yaml")
    for policy in policies:
        jsonschema.validate(policy, NETWORK_POLICY_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):  # the schema is strict
        jsonschema.validate({**policies[0], "spec": {**policies[0]["spec"], "ingres": []}},
                            NETWORK_POLICY_SCHEMA)


def test_network_policy_selects_every_ray_pod_and_isolates_its_ingress() -> None:
    policies = _manifest("networkpolicy.yaml")
    for labels in _ray_pod_labels():
        selecting = [p for p in policies if _selects(p["spec"]["podSelector"], labels)]
        assert len(selecting) == len(policies), labels
        assert all(p["spec"]["policyTypes"] == ["Ingress"] for p in selecting)


def test_only_the_head_reaches_the_metrics_port_and_only_ray_pods_reach_the_others() -> None:
    policies = _manifest("networkpolicy.yaml")
    pods = _ray_pod_labels()
    head = next(p for p in pods if p["ray.io/node-type"] == "head")
    worker = next(p for p in pods if p["ray.io/node-type"] == "worker")
    stranger = {"app": "something-else"}
    assert _admits(policies, head, METRICS_PORT)
    for source in (worker, stranger, None):
        assert not _admits(policies, source, METRICS_PORT), source
    for port in (6379, 8265, 10001, 52365, 8076, 10002, 19999):
        assert _admits(policies, head, port) and _admits(policies, worker, port), port
        assert not _admits(policies, None, port), port
    for port in (6379, 10001, 52365, 8076):
        assert not _admits(policies, stranger, port), port


@pytest.mark.parametrize(("where", "spec"), _cluster_specs())
def test_every_ray_pod_pins_the_metrics_port_of_the_policy(where: str, spec: dict[str, Any]) -> None:
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    for group in groups:
        assert group["rayStartParams"]["metrics-export-port"] == str(METRICS_PORT), where


@pytest.mark.parametrize("name", LAUNCHERS)
def test_every_ray_start_pins_the_metrics_port(name: str) -> None:
    config = _prepared(name)
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        for command in _ray_start_commands(config, key):
            assert f"--metrics-export-port={METRICS_PORT}" in command, command


def test_gcp_nodes_carry_the_tag_of_the_readme_firewall_rules() -> None:
    config = _launcher("gcp.yaml")
    for node_type in config["available_node_types"].values():
        assert node_type["node_config"]["tags"]["items"] == ["raydp-synth"]
    lines = _readme_code_lines()
    allow = next(line for line in lines if "firewall-rules create raydp-synth-ray-internal" in line)
    assert "--action=ALLOW" in allow and "--source-tags=raydp-synth" in allow
    assert "--target-tags=raydp-synth" in allow
    deny = next(line for line in lines if "firewall-rules create raydp-synth-deny-others" in line)
    assert "--action=DENY" in deny and "--target-tags=raydp-synth" in deny
    assert "--source-" not in deny  # from everywhere else
    priority = {rule: int(re.search(r"--priority=(\d+)", rule).group(1)) for rule in (allow, deny)}
    assert priority[allow] < priority[deny] < 65534  # before the default network's rules
    denied = re.search(r"--rules=(\S+)", deny).group(1).split(",")
    assert any(r.startswith("tcp:") and int(r[4:].split("-")[0]) <= METRICS_PORT
               <= int(r[4:].split("-")[-1]) for r in denied)


def test_readme_applies_the_network_policy() -> None:
    assert "kubectl apply -f cluster/kuberay/networkpolicy.yaml" in _readme_code_lines()



def test_the_package_pins_the_ray_of_the_cluster_files() -> None:
    """A client installed from pyproject.toml runs the Ray every cluster file starts
    (a fresh client after a newer Ray release would otherwise mismatch the cluster)."""
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = [d for d in pyproject["project"]["dependencies"] if re.match(r"ray\b|ray\[", d)]
    assert pins == [f"ray[tune,train,default]=={RAY_VERSION}"], pins
    for name in ("Dockerfile", "aws.yaml", "gcp.yaml"):
        assert f'"ray[default,tune,train]=={RAY_VERSION}"' in (CLUSTER / name).read_text(), name


def test_every_image_and_node_installs_torchvision_from_torchs_index_and_self_checks() -> None:
    """torch and torchvision come from one index in one command (PyPI's torchvision is
    built for another CUDA than the cu128 torch and fails to load its operators); the
    package's install keeps both pins; then `raydp-synth self-check` runs, so a broken
    install fails the build or the node's setup. The versions are the ones CI installs."""
    ci = (REPO / ".ci" / "run").read_text()
    assert f"torch=={TORCH_VERSION} torchvision=={TORCHVISION_VERSION}" in ci
    for name in ("Dockerfile", "aws.yaml", "gcp.yaml"):
        text = (CLUSTER / name).read_text()
        index = r'(https://download\.pytorch\.org/whl/cu\d+|"\$\{TORCH_INDEX_URL\}")'
        together = re.search(r'"torch==\S+" "torchvision==\S+"\s*\\?\s*--index-url ' + index,
                             text)
        assert together, f"{name}: torch and torchvision from one index"
        assert text.count("torchvision==") >= 2, f"{name}: the package's install keeps the pin"
        assert "raydp-synth self-check" in text, name
        install = text.index("--reinstall-package raydp_synth") if name != "Dockerfile" \
            else text.index("/tmp/raydp_synth_src \"ray")
        assert text.index("raydp-synth self-check") > install, name
    docker = (CLUSTER / "Dockerfile").read_text()
    assert f"ARG TORCH_VERSION={TORCH_VERSION}" in docker
    assert f"ARG TORCHVISION_VERSION={TORCHVISION_VERSION}" in docker
    assert re.search(r"ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cu\d+", docker)


def test_self_check_runs_here_and_says_what_it_checked() -> None:
    """The command the images run: exit 0 on this CPU machine (its PyPI torchvision
    does not load beside the CPU torch: a warning, raydp_synth never imports it)."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "raydp_synth.self_check"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    names = [line.split()[1].rstrip(":") for line in run.stdout.splitlines()]
    assert names == ["versions", "torchvision", "imports", "gpu"], run.stdout
    assert "FAIL" not in run.stdout

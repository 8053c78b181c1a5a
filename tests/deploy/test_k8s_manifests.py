"""deploy/k8s: every overlay renders, every object is valid Kubernetes 1.31, and each stage keeps
the lifecycle contract docs/deployment.md describes (probes on real endpoints, drain hook, grace
period covering the drain deadline, bounded /dev/shm, a PDB, its own autoscaler); with
components/mtls, each stage's certificates come from its own Secret and TLS is mandatory.

Run: .venv/bin/python -m pytest -q tests/deploy   (tests/run.sh does). Skips without kubectl.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.31.0"

# What is rendered and validated: the base, each overlay, and the overlays with the optional
# components (the components must compose with every overlay).
VARIANTS = {
    "base": (["base"], []),
    "dev-cpu": (["overlays/dev-cpu"], []),
    "gpu-rdma": (["overlays/gpu-rdma"], []),
    # without-encoder again after keda: it also removes the encoder's ScaledObject.
    "dev-cpu+keda+monitoring": (["overlays/dev-cpu"], ["components/keda", "components/monitoring",
                                                       "components/without-encoder"]),
    "gpu-rdma+keda+monitoring": (["overlays/gpu-rdma"], ["components/keda", "components/monitoring"]),
    # Mutual TLS on the control plane: certificates from Secrets, TLS mandatory.
    "dev-cpu+mtls": (["overlays/dev-cpu"], ["components/mtls"]),
    "gpu-rdma+keda+monitoring+mtls": (["overlays/gpu-rdma"], ["components/keda", "components/monitoring",
                                                              "components/mtls"]),
}
MTLS = "components/mtls"
WORKER_STAGES = ("prefill", "decode", "encoder")
# Stages an overlay may leave out, and why.
OPTIONAL_STAGES = {"encoder"}  # components/without-encoder: text-only models, no binary yet

kubectl = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    kubectl is None, reason="kubectl is not installed: deploy/k8s is not rendered or validated")


def kustomize_dir(path: pathlib.Path) -> list[dict]:
    out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, f"kubectl kustomize {path} failed:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def render(variant: str, k8s: pathlib.Path = K8S) -> list[dict]:
    resources, components = VARIANTS[variant]
    if not components:
        return kustomize_dir(k8s / resources[0])
    # A throwaway kustomization stacking the components on the overlay, as a user would.
    with tempfile.TemporaryDirectory() as tmp:
        doc = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            # kustomize takes only relative paths.
            "resources": [os.path.relpath(k8s / r, tmp) for r in resources],
            "components": [os.path.relpath(k8s / c, tmp) for c in components],
        }
        pathlib.Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump(doc))
        return kustomize_dir(pathlib.Path(tmp))


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(request.param)


# --- schema validation ----------------------------------------------------------------------

def test_every_object_is_valid_kubernetes_1_31(rendered):
    import kubernetes_validate

    variant, objects = rendered
    errors, custom = [], []
    for obj in objects:
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            # CRDs (KEDA, Prometheus Operator) have no schema in the package; their shape is
            # checked by the policy tests below.
            custom.append(f"{obj['apiVersion']}/{obj['kind']}")
        except kubernetes_validate.ValidationError as e:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {e.message} at "
                          f"{'/'.join(str(p) for p in e.path)}")
    assert not errors, f"{variant}: invalid objects:\n" + "\n".join(errors)
    allowed = {"keda.sh/v1alpha1/ScaledObject", "monitoring.coreos.com/v1/PodMonitor"}
    assert set(custom) <= allowed, f"{variant}: objects without a schema: {set(custom) - allowed}"


def test_strict_validation_rejects_a_misspelt_field():
    import copy

    import kubernetes_validate

    dep = copy.deepcopy(deployment(render("base"), "decode"))
    dep["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/ready"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(dep, KUBERNETES_VERSION, strict=True)


# --- policy -----------------------------------------------------------------------------------

def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def deployment(objects, stage):
    found = [d for d in by_kind(objects, "Deployment") if d["metadata"]["name"] == f"tandem-{stage}"]
    return found[0] if found else None


def env_of(container) -> dict:
    return {e["name"]: e for e in container.get("env", [])}


def selects(selector: dict, labels: dict) -> bool:
    want = selector.get("matchLabels", {})
    return bool(want) and all(labels.get(k) == v for k, v in want.items())


def served_paths(*sources: pathlib.Path) -> set[str]:
    """GET paths the binaries really serve, read from their sources."""
    paths = set()
    for src in sources:
        files = [src] if src.is_file() else sorted(src.rglob("*.cc"))
        for f in files:
            text = f.read_text()
            paths |= set(re.findall(r'Handle\(\s*"GET",\s*"(/[a-z0-9/]*)"', text))
            # Handlers registered in a loop over path literals.
            for group in re.findall(r'for \(const char\* path : \{([^}]*)\}\)', text):
                paths |= set(re.findall(r'"(/[a-z0-9/]*)"', group))
    return paths


LIFECYCLE_ROUTES = ROOT / "common" / "http" / "src" / "lifecycle_routes.cc"


def worker_paths(main: pathlib.Path) -> set[str]:
    """A worker binary's paths: its own, and the lifecycle routes when it adds them."""
    paths = served_paths(main)
    if "AddLifecycleRoutes(" in main.read_text():
        paths |= served_paths(LIFECYCLE_ROUTES)
    return paths


# Every worker stage (prefill, decode, encoder) must serve what the probes use.
WORKER_PATHS = (worker_paths(ROOT / "services" / "worker" / "worker_app.cc") &
                worker_paths(ROOT / "services" / "encoder" / "main.cc"))
ROUTER_PATHS = served_paths(ROOT / "services" / "router")


def test_the_endpoints_the_probes_use_exist():
    # The probes below must name endpoints that exist; this guards the source parsing itself.
    assert {"/live", "/ready", "/drain", "/metrics", "/health"} <= WORKER_PATHS, WORKER_PATHS
    assert {"/health", "/ready", "/metrics"} <= ROUTER_PATHS, ROUTER_PATHS


def stage_violations(objects, stage) -> list[str]:
    """Everything wrong with one worker stage's objects, as readable lines."""
    bad = []
    dep = deployment(objects, stage)
    if dep is None:
        return [f"{stage}: no Deployment tandem-{stage}"]
    spec = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"].get("labels", {})
    c = spec["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}

    def probe(name, path):
        p = c.get(name)
        if p is None:
            bad.append(f"{stage}: no {name}")
            return None
        get = p.get("httpGet")
        if get is None or get.get("path") != path:
            bad.append(f"{stage}: {name} must GET {path}, has {p}")
        elif get["path"] not in WORKER_PATHS:
            bad.append(f"{stage}: {name} path {get['path']} is not served by the worker")
        elif get.get("port") not in ports and get.get("port") not in ports.values():
            bad.append(f"{stage}: {name} port {get.get('port')} is not a container port")
        return p

    startup = probe("startupProbe", "/live")
    probe("readinessProbe", "/ready")
    probe("livenessProbe", "/live")
    if startup is not None:
        budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
        # Model load: the dev model loads in a second, a real one in minutes.
        if budget < 60:
            bad.append(f"{stage}: startupProbe allows only {budget} s for the model load")
    live = c.get("livenessProbe", {})
    if live.get("httpGet", {}).get("path") == "/ready":
        bad.append(f"{stage}: liveness on /ready would restart a draining worker")

    pre = c.get("lifecycle", {}).get("preStop", {})
    pre_get = pre.get("httpGet", {})
    if pre_get.get("path") != "/drain" and "/drain" not in " ".join(pre.get("exec", {}).get("command", [])):
        bad.append(f"{stage}: preStop does not call /drain: {pre}")

    env = env_of(c)
    drain = env.get("TANDEM_DRAIN_TIMEOUT_MS", {}).get("value")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    if drain is None:
        bad.append(f"{stage}: TANDEM_DRAIN_TIMEOUT_MS is not set (the drain deadline)")
    elif grace < int(drain) / 1000 + 5:
        # +5 s: deregistering and shutting the servers down after the deadline.
        bad.append(f"{stage}: terminationGracePeriodSeconds {grace} < drain deadline "
                   f"{int(drain) / 1000} s + 5 s")

    shm_mounts = [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    if not shm_mounts:
        bad.append(f"{stage}: nothing mounted at /dev/shm")
    else:
        vol = volumes.get(shm_mounts[0]["name"], {})
        ed = vol.get("emptyDir")
        if not ed or ed.get("medium") != "Memory" or not ed.get("sizeLimit"):
            bad.append(f"{stage}: /dev/shm must be a Memory emptyDir with a sizeLimit: {vol}")

    req = c.get("resources", {}).get("requests", {})
    if "cpu" not in req or "memory" not in req:
        bad.append(f"{stage}: resource requests need cpu and memory: {req}")

    # The router and every worker read the same block size and model; the encoder reads the
    # vision tower's directory (it holds no KV).
    shared = ((("TANDEM_MODEL", "VISION_MODEL_DIR"),) if stage == "encoder" else
              (("TANDEM_BLOCK_SIZE", "KV_BLOCK_SIZE"), ("TANDEM_MODEL", "MODEL_DIR")))
    for var, key in shared:
        ref = env.get(var, {}).get("valueFrom", {}).get("configMapKeyRef", {})
        if not ref.get("name", "").startswith("tandem-config") or ref.get("key") != key:
            bad.append(f"{stage}: {var} must come from the tandem-config ConfigMap key {key}")

    pdbs = [p for p in by_kind(objects, "PodDisruptionBudget") if selects(p["spec"]["selector"], labels)]
    if len(pdbs) != 1:
        bad.append(f"{stage}: {len(pdbs)} PodDisruptionBudgets select its pods (want 1)")

    scalers = [h for h in by_kind(objects, "HorizontalPodAutoscaler") + by_kind(objects, "ScaledObject")
               if h["spec"]["scaleTargetRef"].get("name") == dep["metadata"]["name"]]
    if len(scalers) != 1:
        bad.append(f"{stage}: {len(scalers)} autoscalers target tandem-{stage} (want exactly 1)")
    for s in scalers:
        if s["kind"] == "HorizontalPodAutoscaler":
            kinds = {m["type"] for m in s["spec"].get("metrics", [])}
            if not kinds & {"Pods", "Object", "External"}:
                bad.append(f"{stage}: HPA scales on {kinds} only, not on a tandem metric")
            names = {m.get(m["type"].lower(), {}).get("metric", {}).get("name") for m in s["spec"]["metrics"]}
            if not any(n and n.startswith("tandem_worker_") for n in names):
                bad.append(f"{stage}: HPA uses no tandem_worker_* metric: {names}")
        elif not s["spec"].get("triggers"):
            bad.append(f"{stage}: ScaledObject without triggers")
    return bad


def router_violations(objects) -> list[str]:
    bad = []
    dep = deployment(objects, "router")
    if dep is None:
        return ["router: no Deployment tandem-router"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    if dep["spec"].get("replicas", 1) < 2:
        bad.append("router: fewer than 2 replicas")
    for h in by_kind(objects, "HorizontalPodAutoscaler"):
        if h["spec"]["scaleTargetRef"]["name"] == "tandem-router" and h["spec"].get("minReplicas", 1) < 2:
            bad.append("router: its HPA may scale below 2 replicas")
    c = dep["spec"]["template"]["spec"]["containers"][0]
    for name in ("readinessProbe", "livenessProbe"):
        path = c.get(name, {}).get("httpGet", {}).get("path")
        if path not in ROUTER_PATHS:
            bad.append(f"router: {name} path {path} is not served by the router")
    services = [s for s in by_kind(objects, "Service") if s["spec"].get("selector") and
                all(labels.get(k) == v for k, v in s["spec"]["selector"].items())]
    if not any(s["spec"].get("clusterIP") != "None" for s in services):
        bad.append("router: no client Service")
    headless = [s for s in services if s["spec"].get("clusterIP") == "None"]
    if not headless or not headless[0]["spec"].get("publishNotReadyAddresses"):
        bad.append("router: workers need a headless Service listing every replica, ready or not")
    elif not any(p["port"] == 50051 for p in headless[0]["spec"]["ports"]):
        bad.append("router: the headless Service does not expose the control port")
    pdbs = [p for p in by_kind(objects, "PodDisruptionBudget") if selects(p["spec"]["selector"], labels)]
    if len(pdbs) != 1:
        bad.append(f"router: {len(pdbs)} PodDisruptionBudgets (want 1)")
    # Workers dial the headless Service.
    for stage in WORKER_STAGES:
        w = deployment(objects, stage)
        if w is None:
            continue
        ref = env_of(w["spec"]["template"]["spec"]["containers"][0]).get("TANDEM_ROUTER", {})
        key = ref.get("valueFrom", {}).get("configMapKeyRef", {}).get("key")
        if key != "ROUTER_CONTROL":
            bad.append(f"{stage}: TANDEM_ROUTER must come from tandem-config ROUTER_CONTROL")
    config = [m for m in by_kind(objects, "ConfigMap") if m["metadata"]["name"].startswith("tandem-config")]
    if len(config) != 1:
        bad.append(f"{len(config)} tandem-config ConfigMaps (want 1, shared by all stages)")
    elif headless and not config[0]["data"].get("ROUTER_CONTROL", "").startswith(headless[0]["metadata"]["name"] + ":"):
        bad.append("ROUTER_CONTROL does not name the headless router Service")
    return bad


def orphan_scalers(objects) -> list[str]:
    names = {d["metadata"]["name"] for d in by_kind(objects, "Deployment")}
    return [f"{s['kind']}/{s['metadata']['name']} targets missing Deployment "
            f"{s['spec']['scaleTargetRef'].get('name')}"
            for s in by_kind(objects, "HorizontalPodAutoscaler") + by_kind(objects, "ScaledObject")
            if s["spec"]["scaleTargetRef"].get("name") not in names]


def test_each_stage_keeps_the_lifecycle_contract(rendered):
    variant, objects = rendered
    bad = router_violations(objects) + orphan_scalers(objects)
    for stage in WORKER_STAGES:
        if deployment(objects, stage) is None and stage in OPTIONAL_STAGES and variant != "base":
            continue
        bad += stage_violations(objects, stage)
    assert not bad, f"{variant}:\n" + "\n".join(bad)


def test_overlays_set_what_they_promise():
    dev = render("dev-cpu")
    for stage in ("prefill", "decode"):
        c = deployment(dev, stage)["spec"]["template"]["spec"]["containers"][0]
        cpu = c["resources"]["requests"]["cpu"]
        assert cpu.endswith("m") and int(cpu[:-1]) <= 1000, f"dev-cpu {stage} requests {cpu}"
    config = next(m for m in dev if m["kind"] == "ConfigMap" and m["metadata"]["name"].startswith("tandem-config"))
    assert config["data"]["MODEL_DIR"].endswith("stories260K")

    gpu = render("gpu-rdma")
    for stage in WORKER_STAGES:
        c = deployment(gpu, stage)["spec"]["template"]["spec"]["containers"][0]
        limits = c["resources"]["limits"]
        assert limits.get("nvidia.com/gpu") == "1", f"gpu-rdma {stage}: {limits}"
        assert any(k.startswith("rdma/") for k in limits), f"gpu-rdma {stage}: no RDMA device"
        assert "IPC_LOCK" in c["securityContext"]["capabilities"].get("add", [])
        assert "TANDEM_UCX_TRANSPORTS" in env_of(c) and "UCX_NET_DEVICES" in env_of(c)


def test_the_policy_catches_broken_manifests(tmp_path):
    """The policy must be able to fail: break a scratch copy of the manifests in each way it
    guards against and check that it notices."""
    breakages = {
        # (file, old, new, expected complaint)
        "grace": ("base/decode.yaml", "terminationGracePeriodSeconds: 135",
                  "terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds 60"),
        "prestop": ("base/prefill.yaml", "path: /drain", "path: /nodrain", "preStop"),
        "readiness": ("base/decode.yaml", "httpGet: {path: /ready, port: metrics}",
                      "httpGet: {path: /readyz, port: metrics}", "readinessProbe"),
        "shm": ("base/prefill.yaml", "medium: Memory", "medium: \"\"", "/dev/shm"),
        "hpa-target": ("base/encoder.yaml", "    name: tandem-encoder\n  minReplicas",
                       "    name: tandem-decode\n  minReplicas", "autoscalers target"),
    }
    for name, (path, old, new, complaint) in breakages.items():
        scratch = tmp_path / name
        shutil.copytree(K8S, scratch)
        f = scratch / path
        text = f.read_text()
        assert old in text, f"{name}: the manifest changed; update this breakage ({old!r})"
        f.write_text(text.replace(old, new, 1))
        objects = render("base", k8s=scratch)
        bad = router_violations(objects)
        for stage in WORKER_STAGES:
            bad += stage_violations(objects, stage)
        assert any(complaint in line for line in bad), f"{name}: not caught; got {bad}"


# --- mutual TLS (components/mtls) ------------------------------------------------------------

def tls_env_prefix(config_source: pathlib.Path) -> str:
    """The environment prefix a binary's TLS flags read, from its source (BindTlsFlags)."""
    found = re.findall(r'BindTlsFlags\(\s*\w+,\s*&[\w>.-]+,\s*"(\w+)"\)', config_source.read_text())
    assert len(found) == 1, f"{config_source}: BindTlsFlags call not found ({found})"
    return found[0] + "TLS_"


TLS_ENV = {
    "router": tls_env_prefix(ROOT / "services" / "router" / "router_config.cc"),
    **{stage: tls_env_prefix(ROOT / "services" / "worker" / "worker_config.cc") for stage in WORKER_STAGES},
}
# env suffix -> the Secret key it must name (kubernetes.io/tls layout + ca.crt, as cert-manager).
TLS_FILES = {"CERT": "tls.crt", "KEY": "tls.key", "CA": "ca.crt"}


def truthy(value) -> bool:
    # absl::SimpleAtob, which parses the flag.
    return str(value).lower() in {"true", "t", "yes", "y", "1"}


def tls_violations(objects) -> list[str]:
    """Every stage present must read its certificate, key and CA from its own Secret, mounted
    read-only and not world-readable, and must refuse to run without them."""
    bad = []
    for stage in ("router",) + WORKER_STAGES:
        dep = deployment(objects, stage)
        if dep is None:
            continue
        spec = dep["spec"]["template"]["spec"]
        c = spec["containers"][0]
        env = env_of(c)
        prefix = TLS_ENV[stage]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        mounts = {m["mountPath"].rstrip("/"): m for m in c.get("volumeMounts", [])}
        for suffix, key in TLS_FILES.items():
            name = prefix + suffix
            path = env.get(name, {}).get("value")
            if not path:
                bad.append(f"{stage}: {name} is not set")
                continue
            directory, _, file = path.rpartition("/")
            mount = mounts.get(directory)
            if mount is None:
                bad.append(f"{stage}: {name}={path}: nothing is mounted at {directory}")
                continue
            if not mount.get("readOnly"):
                bad.append(f"{stage}: {directory} is not mounted readOnly")
            if mount.get("subPath"):
                bad.append(f"{stage}: {directory} is a subPath mount (rotated files never arrive)")
            secret = volumes.get(mount["name"], {}).get("secret")
            if secret is None:
                bad.append(f"{stage}: {directory} is not a Secret volume")
                continue
            if secret.get("secretName") != f"tandem-{stage}-tls":
                bad.append(f"{stage}: mounts Secret {secret.get('secretName')}, "
                           f"want tandem-{stage}-tls (one per stage)")
            items = {i["path"]: i["key"] for i in secret.get("items", [])}
            if (items.get(file, file) if items else file) != key:
                bad.append(f"{stage}: {name} names {file}, which is not the Secret key {key}")
            mode = secret.get("defaultMode", 0o644)
            if mode & ~0o440:
                bad.append(f"{stage}: Secret files mode {mode:o}: writable or world-readable")
            if mode & 0o040 and spec.get("securityContext", {}).get("fsGroup") is None:
                bad.append(f"{stage}: group-readable Secret files without an fsGroup")
            if not mode & 0o040 and spec.get("securityContext", {}).get("runAsUser", 0) != 0:
                bad.append(f"{stage}: Secret files mode {mode:o} are root-only; "
                           f"the process runs as a non-root user")
        if not truthy(env.get(prefix + "REQUIRED", {}).get("value", "false")):
            bad.append(f"{stage}: {prefix}REQUIRED is not true (plaintext would be accepted)")
        # Every dial is to a pod IP (workers' advertised status.podIP, the router-control
        # Service's A records), which no certificate names.
        if not env.get(prefix + "SERVER_NAME", {}).get("value"):
            bad.append(f"{stage}: {prefix}SERVER_NAME is not set, and peers are dialled by pod IP")
    return bad


def test_tls_env_prefixes_are_read_from_the_sources():
    assert TLS_ENV["router"] == "TANDEM_ROUTER_TLS_" and TLS_ENV["decode"] == "TANDEM_TLS_", TLS_ENV


def test_the_mtls_component_mounts_certificates_and_makes_tls_mandatory(rendered):
    variant, objects = rendered
    if MTLS not in VARIANTS[variant][1]:
        # Without the component the control plane stays plaintext (TLS is opt-in).
        for stage in ("router",) + WORKER_STAGES:
            dep = deployment(objects, stage)
            if dep is not None:
                env = env_of(dep["spec"]["template"]["spec"]["containers"][0])
                assert not any(n.startswith(TLS_ENV[stage]) for n in env), f"{variant}: {stage}"
        return
    bad = tls_violations(objects)
    assert not bad, f"{variant}:\n" + "\n".join(bad)
    stages = [s for s in ("router",) + WORKER_STAGES if deployment(objects, s) is not None]
    assert {"router", "prefill", "decode"} <= set(stages), f"{variant}: {stages}"
    # The names each side expects: workers check the router's, the router the workers'.
    router_env = env_of(deployment(objects, "router")["spec"]["template"]["spec"]["containers"][0])
    worker_names = {env_of(deployment(objects, s)["spec"]["template"]["spec"]["containers"][0])
                    [TLS_ENV[s] + "SERVER_NAME"]["value"] for s in stages if s != "router"}
    assert len(worker_names) == 1, f"{variant}: workers expect different router names {worker_names}"
    assert router_env[TLS_ENV["router"] + "SERVER_NAME"]["value"] not in worker_names, (
        f"{variant}: the router and the workers expect the same certificate name: a worker's "
        "certificate could pose as the router")


def test_the_mtls_policy_catches_broken_manifests(tmp_path):
    breakages = {
        # (file under components/mtls, old, new, expected complaint)
        "optional": ("worker-tls.yaml", "TANDEM_TLS_REQUIRED, value: \"true\"",
                     "TANDEM_TLS_REQUIRED, value: \"false\"", "REQUIRED is not true"),
        "writable": ("kustomization.yaml", "tandem-decode-tls, defaultMode: 0440",
                     "tandem-decode-tls, defaultMode: 0666", "writable or world-readable"),
        "shared-secret": ("kustomization.yaml", "secretName: tandem-prefill-tls",
                          "secretName: tandem-decode-tls", "one per stage"),
        "rw-mount": ("router-tls.yaml", "mountPath: /etc/tandem/tls, readOnly: true",
                     "mountPath: /etc/tandem/tls, readOnly: false", "readOnly"),
        "no-ca": ("worker-tls.yaml", "value: /etc/tandem/tls/ca.crt",
                  "value: /etc/tandem/tls/ca.pem", "not the Secret key ca.crt"),
        "no-name": ("router-tls.yaml", "TANDEM_ROUTER_TLS_SERVER_NAME, value: tandem-worker",
                    "TANDEM_ROUTER_TLS_SERVER_NAME, value: \"\"", "SERVER_NAME is not set"),
    }
    for name, (path, old, new, complaint) in breakages.items():
        scratch = tmp_path / name
        shutil.copytree(K8S, scratch)
        f = scratch / "components" / "mtls" / path
        text = f.read_text()
        assert old in text, f"{name}: the component changed; update this breakage ({old!r})"
        f.write_text(text.replace(old, new, 1))
        bad = tls_violations(render("dev-cpu+mtls", k8s=scratch))
        assert any(complaint in line for line in bad), f"{name}: not caught; got {bad}"


# --- network policy: who may connect to which port ----------------------------------------------

UCX_ENV = "TANDEM_UCX_PORT_RANGE"
KV_STAGES = ("prefill", "decode")
# A pod outside tandem (another tenant's workload, a compromised pod) and tandem's own stages.
OUTSIDER = {"app.kubernetes.io/name": "other"}


def stage_labels(stage: str) -> dict:
    return {"app.kubernetes.io/name": "tandem", "app.kubernetes.io/component": stage}


def label_selector_matches(selector: dict, labels: dict) -> bool:
    """Kubernetes label-selector semantics (an empty selector matches everything)."""
    for k, v in selector.get("matchLabels", {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def port_matches(rule_ports, port: int) -> bool:
    if not rule_ports:
        return True  # no ports: every port
    for p in rule_ports:
        lo = p.get("port")
        if lo is None:
            return True
        if isinstance(lo, int) and lo <= port <= p.get("endPort", lo):
            return True
    return False


def ingress_allowed(objects, dst_labels: dict, src_labels: dict, same_namespace: bool,
                    port: int) -> bool:
    """Whether the namespace's NetworkPolicies let a pod with src_labels (in the namespace, or
    in an unlabelled one outside it) open `port` on a pod with dst_labels."""
    policies = [p for p in by_kind(objects, "NetworkPolicy")
                if label_selector_matches(p["spec"]["podSelector"], dst_labels)
                and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])]
    if not policies:
        return True  # not isolated
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            if not port_matches(rule.get("ports"), port):
                continue
            peers = rule.get("from")
            if not peers:
                return True  # from anywhere
            for peer in peers:
                if "ipBlock" in peer:
                    return True  # treat any CIDR as reaching everything: too broad to reason about
                ns_ok = (label_selector_matches(peer["namespaceSelector"], {})
                         if "namespaceSelector" in peer else same_namespace)
                pod_ok = label_selector_matches(peer.get("podSelector", {}), src_labels)
                if ns_ok and pod_ok:
                    return True
    return False


def ucx_range(objects, stage) -> tuple[int, int] | None:
    dep = deployment(objects, stage)
    env = env_of(dep["spec"]["template"]["spec"]["containers"][0])
    if UCX_ENV not in env:
        return None
    lo, hi = env[UCX_ENV]["value"].split("-")
    return int(lo), int(hi)


def network_violations(objects) -> list[str]:
    """The reachability matrix docs/security.md promises: UCX only between KV workers, worker
    gRPC only from the router, the router's control port only from workers, the public HTTP port
    from anywhere, and nothing from outside tandem except that."""
    bad = []
    # A pod added later (a debug pod, a new stage) starts closed, not open.
    if not any(p["spec"]["podSelector"] == {} and not p["spec"].get("ingress")
               for p in by_kind(objects, "NetworkPolicy")):
        bad.append("no default-deny policy: pods no rule selects accept anything")
    present = [s for s in ("router",) + WORKER_STAGES if deployment(objects, s) is not None]
    sources = {s: (stage_labels(s), True) for s in present}
    sources["outsider"] = (OUTSIDER, True)
    sources["other-namespace"] = (OUTSIDER, False)
    expectations = []  # (dst, port, set of sources allowed)
    for stage in present:
        if stage == "router":
            expectations.append(("router", 8000, set(sources)))
            expectations.append(("router", 50051, set(WORKER_STAGES) & set(present)))
            continue
        # Encoders also serve image rows to the workers that compute prompts.
        grpc_from = {"router"} | (set(KV_STAGES) & set(present) if stage == "encoder" else set())
        expectations.append((stage, 50061, grpc_from))
        expectations.append((stage, 9090, set()))  # monitoring namespaces only (labelled)
        if stage in KV_STAGES:
            rng = ucx_range(objects, stage)
            if rng is None:
                bad.append(f"{stage}: {UCX_ENV} is not set: UCX listens on any port")
                continue
            for port in (rng[0], rng[1], (rng[0] + rng[1]) // 2):
                expectations.append((stage, port, set(KV_STAGES) & set(present)))
    for dst, port, allowed in expectations:
        for src, (labels, same_ns) in sources.items():
            got = ingress_allowed(objects, stage_labels(dst), labels, same_ns, port)
            if got != (src in allowed):
                verdict = "reaches" if got else "cannot reach"
                bad.append(f"{src} {verdict} {dst}:{port}")
    return bad


def test_network_policy_confines_kv_transfer_and_the_control_plane(rendered):
    variant, objects = rendered
    bad = network_violations(objects)
    assert not bad, f"{variant}:\n" + "\n".join(bad)


def test_the_network_policy_catches_broken_manifests(tmp_path):
    breakages = {
        # (file under base, old, new, expected complaint)
        "ucx-all-ports": ("network-policy.yaml", "{port: 50100, endPort: 50115, protocol: TCP}",
                          "{port: 1, endPort: 65535, protocol: TCP}", "prefill reaches decode:50061"),
        "ucx-from-anyone": ("network-policy.yaml",
                            "values: [prefill, decode]}\n      ports:\n        - {port: 50100",
                            "values: [prefill, decode, router]}\n      ports:\n        - {port: 50100",
                            "router reaches decode:50100"),
        "no-port-range": ("decode.yaml", "name: TANDEM_UCX_PORT_RANGE", "name: TANDEM_UCX_PORT_RANG",
                          "UCX_PORT_RANGE is not set"),
        "range-outside-policy": ("prefill.yaml", "value: \"50100-50115\"", "value: \"50200-50215\"",
                                 "cannot reach prefill:50200"),
        "no-default-deny": ("network-policy.yaml", "name: tandem-default-deny\nspec:\n  podSelector: {}",
                            "name: tandem-default-deny\nspec:\n  podSelector: {matchLabels: {x: y}}",
                            "no default-deny"),
    }
    for name, (path, old, new, complaint) in breakages.items():
        scratch = tmp_path / name
        shutil.copytree(K8S, scratch)
        f = scratch / "base" / path
        text = f.read_text()
        assert old in text, f"{name}: the manifest changed; update this breakage ({old!r})"
        f.write_text(text.replace(old, new, 1))
        bad = network_violations(render("dev-cpu", k8s=scratch))
        assert any(complaint in line for line in bad), f"{name}: not caught; got {bad}"

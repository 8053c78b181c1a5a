"""Starts a real tandem cluster (router + prefill + decode processes on loopback) for the tests.

The binaries come from the build directory (TANDEM_BUILD_DIR, default <repo>/build); the model
from TANDEM_MODEL or ../shared/models/stories260K. Tests skip when neither is there.
"""
import os
import pathlib
import subprocess
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


@pytest.fixture(scope="session")
def cluster():
    router_bin = BUILD / "services" / "router" / "tandem-router"
    if not router_bin.exists():
        pytest.skip(f"{router_bin} is not built")
    if not (MODEL / "model.bin").exists() and not (MODEL / "config.json").exists():
        pytest.skip(f"model not found at {MODEL}")
    with tempfile.TemporaryDirectory(prefix="tandem_conformance_") as tmp:
        c = Cluster(tmp)
        try:
            router = c.start("router", [str(router_bin), "--model", str(MODEL),
                                        "--http-listen", "127.0.0.1:0",
                                        "--control-listen", "127.0.0.1:0",
                                        "--port-file", f"{tmp}/router.port"])
            http_port, control_port = _wait_ports(pathlib.Path(tmp) / "router.port", router)
            for role in ("prefill", "decode"):
                c.start(role, [str(BUILD / "services" / role / f"tandem-{role}"),
                               "--model", str(MODEL), "--threads", "1",
                               "--router", f"127.0.0.1:{control_port}"])
            url = f"http://127.0.0.1:{http_port}"
            _wait_ready(url)
            c.url = url
            c.model = MODEL.name
            yield c
        finally:
            c.stop()

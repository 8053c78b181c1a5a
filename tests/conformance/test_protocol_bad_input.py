"""Malformed requests to the router's protocol endpoints: each gets its protocol's own error
envelope and status, leaves nothing running, and the router keeps serving."""
import json
import time
import urllib.error
import urllib.request

import pytest

from conftest import DEEPSEEK_SERVED_NAME

M = DEEPSEEK_SERVED_NAME
USER = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"x": {"type": "string"}}}

CHAT = [
    ("messages not a list", {"model": M, "messages": "hi"}),
    ("unknown role", {"model": M, "messages": [{"role": "wizard", "content": "hi"}]}),
    ("content wrong type", {"model": M, "messages": [{"role": "user", "content": 5}]}),
    ("tool result without a call", {"model": M, "messages": USER + [
        {"role": "tool", "tool_call_id": "nope", "content": "x"}]}),
    ("invalid tool schema", {"model": M, "messages": USER, "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": 7}}}]}),
    ("tool name with spaces", {"model": M, "messages": USER, "tools": [
        {"type": "function", "function": {"name": "bad name", "parameters": SCHEMA}}]}),
    ("max_tokens negative", {"model": M, "messages": USER, "max_tokens": -1}),
    ("temperature wrong type", {"model": M, "messages": USER, "temperature": "hot"}),
    ("stop wrong type", {"model": M, "messages": USER, "stop": 5}),
]
RESPONSES = [
    ("input wrong type", {"model": M, "input": 5}),
    ("unknown role", {"model": M, "input": [{"role": "wizard", "content": "x"}]}),
    ("unknown content part", {"model": M, "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_video"}]}]}),
    ("function output without a call", {"model": M, "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call_output", "call_id": "nope", "output": "x"}]}),
    ("invalid tool schema", {"model": M, "input": "hi", "tools": [
        {"type": "function", "name": "f", "parameters": {"type": 7}}]}),
    ("max_output_tokens wrong type", {"model": M, "input": "hi", "max_output_tokens": "ten"}),
]
MESSAGES = [
    ("unknown role", {"model": M, "max_tokens": 4, "messages": [{"role": "wizard", "content": "x"}]}),
    ("unknown block", {"model": M, "max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "hologram"}]}]}),
    ("tool_result without a tool_use", {"model": M, "max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}]}),
    ("invalid tool schema", {"model": M, "max_tokens": 4, "messages": USER, "tools": [
        {"name": "f", "input_schema": {"type": 7}}]}),
    ("thinking wrong type", {"model": M, "max_tokens": 4, "messages": USER, "thinking": "yes"}),
]


def post(url, path, body, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


# Gauges of work in the router: after a rejection every one of them is back at 0.
RUNNING = ("tandem_router_active_requests", "tandem_router_active_streams",
           "tandem_router_queue_depth", "tandem_router_prefills_held")


def metrics(url):
    """{series (name plus labels): value} from the router's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def rejected_total(m, status):
    return sum(v for k, v in m.items()
               if k.startswith("tandem_router_requests_total{") and f'status="{status}"' in k)


def reject(url, path, body, status=400, raw=None, counted=True):
    """Posts a request the router must refuse with `status`; checks that nothing was admitted
    (the gauges return to 0, waiting out streams of earlier tests) and, when `counted`, that the
    refusal is in tandem_router_requests_total."""
    before = rejected_total(metrics(url), status)
    got, payload = post(url, path, body, raw)
    assert got == status, (got, payload)
    deadline = time.monotonic() + 5
    while True:
        m = metrics(url)
        missing = [g for g in RUNNING[:3] if g not in m]
        assert not missing, f"router exports no {missing}"
        running = {g: m[g] for g in RUNNING if m.get(g, 0) != 0}
        if not running:
            break
        assert time.monotonic() < deadline, f"still running after a rejected request: {running}"
        time.sleep(0.02)
    if counted:
        assert rejected_total(m, status) == before + 1
    return got, payload


def check_openai(status, body):
    assert status == 400, body
    err = json.loads(body)["error"]
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str) and "param" in err and "code" in err


def check_anthropic(status, body):
    assert status == 400, body
    doc = json.loads(body)
    assert doc["type"] == "error"
    assert isinstance(doc["error"]["type"], str) and doc["error"]["message"]


@pytest.mark.parametrize("name,body", CHAT, ids=[c[0] for c in CHAT])
def test_chat_rejections(deepseek_cluster, name, body):
    check_openai(*reject(deepseek_cluster.url, "/v1/chat/completions", body))


@pytest.mark.parametrize("name,body", RESPONSES, ids=[c[0] for c in RESPONSES])
def test_responses_rejections(deepseek_cluster, name, body):
    check_openai(*reject(deepseek_cluster.url, "/v1/responses", body))


@pytest.mark.parametrize("name,body", MESSAGES, ids=[c[0] for c in MESSAGES])
def test_messages_rejections(deepseek_cluster, name, body):
    check_anthropic(*reject(deepseek_cluster.url, "/v1/messages", body))


@pytest.mark.parametrize("path,check", [("/v1/chat/completions", check_openai),
                                        ("/v1/responses", check_openai),
                                        ("/v1/messages", check_anthropic),
                                        ("/v1/messages/count_tokens", check_anthropic)])
def test_malformed_json_and_non_objects(deepseek_cluster, path, check):
    check(*reject(deepseek_cluster.url, path, None, raw=b'{"model": '))
    check(*reject(deepseek_cluster.url, path, None, raw=b"[1, 2]"))


def test_oversize_body_is_refused(deepseek_cluster):
    big = {"model": M, "messages": [{"role": "user", "content": "x" * (9 << 20)}]}
    # The HTTP layer refuses it before any endpoint runs: nothing to count it under.
    reject(deepseek_cluster.url, "/v1/chat/completions", big, status=413, counted=False)


def test_router_still_serves_after_bad_input(deepseek_cluster):
    status, body = post(deepseek_cluster.url, "/v1/chat/completions",
                        {"model": M, "messages": USER, "max_tokens": 2})
    assert status == 200, body

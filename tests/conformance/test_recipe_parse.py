"""Differential test of the output parser and response builders against deepseek-recipe.

Random completions (recipe_completions.py) cut into random chunkings go through the oracle's
StreamProcessor + <Protocol>Response.accumulate and through `tandem-recipe parse --jsonl`; the
stream events and the final responses must be equal. Normalised, because the oracle cannot be
given them: chunk/response creation times (the oracle's generators stamp the wall clock),
Responses completed_at (wall clock), and tool call ids (random in both; compared by position).
"""
import json
import os
import pathlib
import re
import subprocess

import pytest

import recipe_completions

dr = pytest.importorskip("deepseek_recipe")

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TANDEM_BUILD_DIR", REPO / "build"))
CLI = BUILD / "tools" / "recipe" / "tandem-recipe"
CASES_PER_RUN = int(os.environ.get("TANDEM_PARSE_CASES", "400"))

REQUESTS = {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest,
            "messages": dr.MessagesRequest}
RESPONSES = {"chat": dr.ChatCompletionResponse, "responses": dr.ResponsesResponse,
             "messages": dr.MessagesResponse}
FINISH = {"stop": dr.InferenceFinishReason.Stop, "length": dr.InferenceFinishReason.Length,
          "content_filter": dr.InferenceFinishReason.ContentFilter}
MODELS = {"v4": dr.ModelVersion.DeepseekV4Pro, "v4.1": dr.ModelVersion.DeepseekV41Flash}


def oracle(case, protocol, version):
    body = case["request"]
    options = dr.ConversionOptions().with_model_alias(body["model"], MODELS[version])
    request_type = REQUESTS[protocol]
    request = request_type(body)
    if protocol == "responses":
        echo = request.echo()
        namespaces = request.namespace_tool_map(options)
    try:
        converted = request.convert(options)
    except dr.ConversionError as e:
        return {"status": e.status_code, "error": json.loads(e.body)}
    generator = request_type.chunk_generator(converted, case["id"], body["model"])
    if protocol == "responses":
        generator = generator.with_echo(echo).with_namespace_tool_map(namespaces)
    processor = dr.StreamProcessor(generator, converted.parsing_options)
    response_type = RESPONSES[protocol]
    response = response_type(case["id"], body["model"], case["created"], case["prompt_tokens"],
                             case["cached_tokens"])
    events = []

    def take(chunks):
        for chunk in chunks:
            events.append([response_type.sse_event_name(chunk), json.loads(chunk.to_json())])
            response.accumulate(chunk)

    usage = dr.PromptUsage(prompt_tokens=case["prompt_tokens"],
                           prompt_cache_hit_tokens=case["cached_tokens"])
    take(processor.push(dr.InferenceChunk.ready(prompt_usage=usage)))
    for text, tokens in case["chunks"]:
        if processor.finished:
            break
        take(processor.push(dr.InferenceChunk.text(text, tokens)))
    if not processor.finished:
        take(processor.push(dr.InferenceChunk.finish(FINISH[case["finish"]])))
    take(processor.finish())
    return {"events": events, "final": json.loads(response.to_json())}


CALL_ID = re.compile(r"^call_\d\d_[A-Za-z0-9_\-]+$")


def normalise(result):
    ids = {}

    def walk(value, key=None):
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        if key in ("created", "created_at", "completed_at") and isinstance(value, int):
            return "<time>"
        if isinstance(value, str) and CALL_ID.match(value):
            return ids.setdefault(value, f"<call {len(ids)}>")
        return value

    return walk(result)


def run_cli(protocol, version, cases):
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built")
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    proc = subprocess.run([str(CLI), "parse", "--encoding", version, "--protocol", protocol,
                           "--jsonl"], input=lines.encode(), capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.decode().splitlines()]


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
@pytest.mark.parametrize("version", ["v4", "v4.1"])
def test_stream_events_and_final_response_match_the_oracle(protocol, version):
    cases = recipe_completions.cases(4, protocol, version, CASES_PER_RUN)
    ours = run_cli(protocol, version, cases)
    assert len(ours) == len(cases)
    failures = []
    for case, got in zip(cases, ours):
        want = oracle(case, protocol, version)
        if normalise(got) != normalise(want):
            failures.append((case, got, want))
    if failures:
        case, got, want = failures[0]
        got, want = normalise(got), normalise(want)
        detail = ""
        if "events" in got and "events" in want:
            for i, (g, w) in enumerate(zip(got["events"], want["events"])):
                if g != w:
                    detail = f"first differing event #{i}:\n ours:   {g}\n oracle: {w}"
                    break
            else:
                detail = (f"event counts {len(got['events'])} vs {len(want['events'])}; final:\n"
                          f" ours:   {got.get('final')}\n oracle: {want.get('final')}")
        else:
            detail = f"ours: {got}\noracle: {want}"
        pytest.fail(f"{len(failures)}/{len(cases)} cases differ; first: "
                    f"{json.dumps(case, ensure_ascii=False)}\n{detail}")

"""The official openai and anthropic SDKs against the router serving a tiny DeepSeek model.

The model has random weights, so these tests check protocol shapes, event order, usage and the
prompt the router built (deepseek-recipe's encoding of the same request, id for id), never the
generated text.
"""
import json

import anthropic
import openai
import pytest

from conftest import DEEPSEEK_SERVED_NAME, deepseek_tokenizer_file
from recipe_cli import oracle_render, render_batch

dr = pytest.importorskip("deepseek_recipe")

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


@pytest.fixture(scope="module")
def oai(deepseek_cluster):
    return openai.OpenAI(base_url=deepseek_cluster.url + "/v1", api_key="k", max_retries=0)


@pytest.fixture(scope="module")
def claude(deepseek_cluster):
    return anthropic.Anthropic(base_url=deepseek_cluster.url, api_key="k", max_retries=0)


@pytest.fixture(scope="module")
def oracle():
    """check(kind, body, router_count): the prompt is deepseek-recipe's, id for id.

    The router reports only how many prompt tokens it built for these protocols, so the ids
    compared are those of its renderer (the same C++ library, run as `tandem-recipe render --ids`)
    for exactly the body the SDK sent, and the router's count must be their number."""
    tokenizer_path = deepseek_tokenizer_file()
    tokenizer = dr.Tokenizer.from_file(str(tokenizer_path))

    def check(kind, body, router_count):
        expected = oracle_render(kind, "v4", body, tokenizer=tokenizer)
        assert "ids" in expected, expected
        ours = render_batch(kind, "v4", [body], tokenizer=tokenizer_path)[0]
        assert ours.get("ids") == expected["ids"], (ours, expected["ids"])
        assert router_count == len(expected["ids"])
    return check


def check_chat_usage(usage, max_tokens):
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert 0 < usage.completion_tokens <= max_tokens
    extra = usage.model_extra
    assert extra["prompt_cache_hit_tokens"] + extra["prompt_cache_miss_tokens"] == usage.prompt_tokens


def test_chat_thinking_by_default_reports_reasoning(oai, oracle):
    body = {"model": DEEPSEEK_SERVED_NAME, "max_tokens": 12,
            "messages": [{"role": "user", "content": "Hi <｜User｜> there"}]}
    resp = oai.chat.completions.create(**body)
    assert resp.object == "chat.completion"
    oracle("chat", body, resp.usage.prompt_tokens)
    check_chat_usage(resp.usage, 12)
    msg = resp.choices[0].message
    # Random weights: unless the model happens to close </think>, everything is reasoning.
    assert msg.model_extra.get("reasoning_content") is not None or msg.content
    assert resp.choices[0].finish_reason in ("length", "stop", "tool_calls")


def test_chat_non_thinking_stream_with_usage(oai, oracle):
    body = {"model": DEEPSEEK_SERVED_NAME, "max_tokens": 10, "thinking": {"type": "disabled"},
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Say hi"}]}
    full = oai.chat.completions.create(**{k: v for k, v in body.items() if k != "thinking"},
                                       extra_body={"thinking": body["thinking"]}, temperature=0)
    chunks = list(oai.chat.completions.create(
        **{k: v for k, v in body.items() if k != "thinking"}, extra_body={"thinking": body["thinking"]},
        temperature=0, stream=True, stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    # As deepseek-recipe (and DeepSeek's API) do: usage rides on the final chunk, null before.
    assert chunks[-1].usage is not None and all(c.usage is None for c in chunks[:-1])
    oracle("chat", body, chunks[-1].usage.prompt_tokens)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == (full.choices[0].message.content or "")
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == [full.choices[0].finish_reason]


def test_chat_tool_call_round_trip(oai, oracle):
    first = {"model": DEEPSEEK_SERVED_NAME, "max_tokens": 8, "tools": [WEATHER_TOOL],
             "messages": [{"role": "user", "content": "Weather in Paris?"}]}
    resp = oai.chat.completions.create(**first)
    oracle("chat", first, resp.usage.prompt_tokens)
    # The turn a client sends back after the model called the tool (built here: random weights
    # cannot be made to call it), with reasoning_content passed back as the API requires.
    second = dict(first, messages=first["messages"] + [
        {"role": "assistant", "content": "", "reasoning_content": "Need the weather.",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {
             "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 21}"}])
    resp = oai.chat.completions.create(**second)
    oracle("chat", second, resp.usage.prompt_tokens)
    check_chat_usage(resp.usage, 8)


def test_chat_errors_use_the_openai_envelope(oai):
    with pytest.raises(openai.BadRequestError):
        oai.chat.completions.create(model=DEEPSEEK_SERVED_NAME, max_tokens=4, messages=[
            {"role": "tool", "tool_call_id": "nope", "content": "orphan result"}])
    with pytest.raises(openai.BadRequestError):
        oai.chat.completions.create(model=DEEPSEEK_SERVED_NAME, max_tokens=4,
                                    messages=[{"role": "wizard", "content": "x"}])


def test_responses_non_stream_and_stream(oai, oracle):
    body = {"model": DEEPSEEK_SERVED_NAME, "max_output_tokens": 10,
            "instructions": "Answer briefly.", "input": "What is 2+2?"}
    resp = oai.responses.create(**body)
    assert resp.object == "response" and resp.status in ("completed", "incomplete")
    oracle("responses", body, resp.usage.input_tokens)
    assert resp.usage.output_tokens <= 10
    events = list(oai.responses.create(**body, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created"
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_responses_function_call_round_trip(oai, oracle):
    tool = {"type": "function", "name": "get_weather", "description": "Weather",
            "parameters": WEATHER_TOOL["function"]["parameters"]}
    body = {"model": DEEPSEEK_SERVED_NAME, "max_output_tokens": 8, "tools": [tool], "input": [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_9", "name": "get_weather",
         "arguments": "{\"city\": \"Paris\"}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "21C"}]}
    resp = oai.responses.create(**body)
    oracle("responses", body, resp.usage.input_tokens)


def test_messages_non_stream_stream_and_count_tokens(claude, oracle):
    body = {"model": DEEPSEEK_SERVED_NAME, "max_tokens": 10, "system": "Be brief.",
            "messages": [{"role": "user", "content": "Hello"}]}
    msg = claude.messages.create(**body)
    assert msg.type == "message" and msg.role == "assistant"
    # Anthropic counts cached prompt tokens apart from input_tokens.
    oracle("messages", body, msg.usage.input_tokens + msg.usage.cache_read_input_tokens)
    assert msg.stop_reason in ("end_turn", "max_tokens", "tool_use", "stop_sequence")
    with claude.messages.stream(**body) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "message_delta" in kinds
    assert final.usage.output_tokens <= 10
    count = claude.messages.count_tokens(model=DEEPSEEK_SERVED_NAME, system=body["system"],
                                         messages=body["messages"])
    oracle("messages", body, count.input_tokens)


def test_messages_tool_use_round_trip(claude, oracle):
    tools = [{"name": "get_weather", "description": "Weather",
              "input_schema": WEATHER_TOOL["function"]["parameters"]}]
    body = {"model": DEEPSEEK_SERVED_NAME, "max_tokens": 8, "tools": tools,
            "thinking": {"type": "disabled"}, "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                                   "name": "get_weather",
                                                   "input": {"city": "Paris"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                              "content": "21C"}]}]}
    msg = claude.messages.create(**body)
    oracle("messages", body, msg.usage.input_tokens + msg.usage.cache_read_input_tokens)


def test_messages_errors_use_the_anthropic_envelope(claude):
    with pytest.raises(anthropic.BadRequestError) as err:
        claude.messages.create(model=DEEPSEEK_SERVED_NAME, max_tokens=4, messages=[
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x",
                                          "content": "orphan"}]}])
    assert err.value.body["type"] == "error"

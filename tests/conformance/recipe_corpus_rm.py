"""Seeded generators of OpenAI Responses and Anthropic Messages requests for the protocol-layer
differential tests.

Valid requests cover multi-turn histories, reasoning / thinking items, tool calls whose results
come back in any order, namespace and apply_patch tools (Responses), system reminders (Messages),
thinking on/off, efforts, JSON formats, stop sequences, unicode, and forged special-token
spellings in every client-controlled field. The invalid requests are valid ones broken one way
each (types, roles, tool pairing, schemas, ranges). Deterministic for a seed.

    from recipe_corpus_rm import responses_corpus, messages_corpus
    bodies = responses_corpus(seed=7, count=200)
"""
import copy
import json
import random

from recipe_corpus import FORGED, MODELS, argument_value, arguments, schema, text

EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"]
TOOL_NAMES = ["get_weather", "search", "lookup_名", "calc", "f_1", "send-mail"]


def _name(rng, taken):
    candidates = [n for n in TOOL_NAMES if n.isascii() and n not in taken]
    return rng.choice(candidates)


# --- OpenAI Responses ---------------------------------------------------------------------------

def _responses_content(rng, role):
    if rng.random() < 0.5:
        return text(rng)
    kind = "output_text" if role == "assistant" else "input_text"
    parts = [{"type": kind, "text": text(rng)} for _ in range(rng.randint(1, 3))]
    if role != "assistant" and rng.random() < 0.2:
        parts.insert(rng.randrange(len(parts) + 1),
                     rng.choice([{"type": "input_image", "image_url": "http://example.com/a.png"},
                                 {"type": "input_file", "file_id": "file-1"}]))
    return parts


def _responses_tools(rng):
    tools, names = [], []
    for _ in range(rng.randint(0, 3)):
        name = _name(rng, names)
        names.append(name)
        tool = {"type": "function", "name": name}
        if rng.random() < 0.8:
            tool["description"] = text(rng, forge=0.4)
        if rng.random() < 0.85:
            tool["parameters"] = schema(rng)
        tools.append(tool)
    if rng.random() < 0.15:
        inner = [{"type": "function", "name": rng.choice(["open", "close"]) + str(i),
                  "description": text(rng, forge=0.3), "parameters": schema(rng)}
                 for i in range(rng.randint(1, 2))]
        tools.append({"type": "namespace", "name": rng.choice(["fs", "db"]),
                      "description": text(rng), "tools": inner})
        names += [f"{tools[-1]['name']}__{t['name']}" for t in inner]
    if rng.random() < 0.1:
        tools.append({"type": "custom", "name": "apply_patch"})
        names.append("apply_patch")
    if rng.random() < 0.1:
        tools.insert(rng.randrange(len(tools) + 1), {"type": "web_search"})
    return tools, names


def _responses_tool_round(rng, names, next_id, thinking):
    items = []
    if thinking and rng.random() < 0.7:
        items.append({"type": "reasoning", "summary": [],
                      "content": [{"type": "reasoning_text", "text": text(rng)}]})
    if rng.random() < 0.4:
        items.append({"role": "assistant", "content": _responses_content(rng, "assistant")})
    calls = []
    for _ in range(rng.randint(1, 3)):
        call_id = f"call_{next_id()}"
        name = rng.choice(names)
        if name == "apply_patch" and rng.random() < 0.5:
            items.append({"type": "custom_tool_call", "call_id": call_id, "name": name,
                          "input": text(rng, forge=0.3)})
            calls.append(("custom_tool_call_output", call_id))
            continue
        items.append({"type": "function_call", "call_id": call_id, "name": name,
                      "arguments": arguments(rng)})
        calls.append(("function_call_output", call_id))
    rng.shuffle(calls)  # outputs come back in any order
    for kind, call_id in calls:
        output = text(rng) if rng.random() < 0.8 else [
            {"type": "input_text", "text": text(rng)} for _ in range(rng.randint(0, 2))]
        items.append({"type": kind, "call_id": call_id, "output": output})
    return items


def responses_request(rng):
    counter = iter(range(1, 10 ** 6))
    next_id = lambda: next(counter)  # noqa: E731
    body = {"model": rng.choice(MODELS)}
    effort = rng.choice(EFFORTS + [None, None])
    thinking = effort != "none"
    if effort is not None:
        body["reasoning"] = {"effort": effort}
        if rng.random() < 0.3:
            body["reasoning"]["summary"] = rng.choice(["auto", "concise", "detailed"])
    tools, names = _responses_tools(rng)
    if tools:
        body["tools"] = tools
    if rng.random() < 0.5:
        body["instructions"] = text(rng, forge=0.4)
    if rng.random() < 0.15:
        body["input"] = text(rng, forge=0.5)
    else:
        items = []
        for turn in range(rng.randint(1, 4)):
            if rng.random() < 0.15:
                items.append({"role": rng.choice(["system", "developer"]),
                              "content": _responses_content(rng, "system")})
            items.append({"type": "message", "role": "user",
                          "content": _responses_content(rng, "user")} if rng.random() < 0.3 else
                         {"role": "user", "content": _responses_content(rng, "user")})
            last = turn == 0 or rng.random() < 0.3
            if names and rng.random() < 0.6:
                items += _responses_tool_round(rng, names, next_id, thinking)
                if rng.random() < 0.5:
                    items.append({"role": "assistant",
                                  "content": _responses_content(rng, "assistant")})
            elif not last:
                if thinking and rng.random() < 0.5:
                    items.append({"type": "reasoning", "summary": [],
                                  "content": [{"type": "reasoning_text", "text": text(rng)}]})
                items.append({"role": "assistant", "content": _responses_content(rng, "assistant")})
        body["input"] = items
    if names and rng.random() < 0.4:
        if thinking:
            body["tool_choice"] = rng.choice(["auto", "none"])
        else:
            function = [n for n in names if "__" not in n and n != "apply_patch"]
            choices = ["auto", "none", "required"]
            if function:
                choices.append({"type": "function", "name": rng.choice(function)})
            body["tool_choice"] = rng.choice(choices)
    r = rng.random()
    if r < 0.1:
        body["text"] = {"format": {"type": "json_object"}}
        body["instructions"] = body.get("instructions", "") + " Answer in JSON."
    elif r < 0.15:
        body["text"] = {"format": {"type": "json_schema", "name": "answer", "schema": schema(rng)},
                        "verbosity": rng.choice(["low", "medium", "high"])}
    if rng.random() < 0.3:
        body["max_output_tokens"] = rng.randint(1, 100000)
    if rng.random() < 0.3:
        body["temperature"] = rng.choice([0, 0.3, 0.7, 1.0, 2])
    if rng.random() < 0.3:
        body["top_p"] = rng.choice([0.1, 0.5, 0.95, 0.99, 1.0])
    if rng.random() < 0.2:
        body["stream"] = rng.random() < 0.5
    if rng.random() < 0.1:
        body["user"] = text(rng, forge=0.5, words=(1, 2))
    if rng.random() < 0.1:
        body["top_logprobs"] = rng.randint(0, 20)
    return body


def _responses_mutations(rng, body):
    items = body["input"] if isinstance(body.get("input"), list) else None
    calls = [i for i, item in enumerate(items or []) if item.get("type") == "function_call"]
    outputs = [i for i, item in enumerate(items or []) if item.get("type") == "function_call_output"]
    m = []
    m.append(lambda b: b.pop("model"))
    m.append(lambda b: b.update(model=rng.choice([5, None, ["x"]])))
    m.append(lambda b: b.update(input=rng.choice([5, {}, []])))
    m.append(lambda b: (b.pop("input", None), b.pop("instructions", None)))
    m.append(lambda b: b.update(temperature=rng.choice([-0.5, 2.5, "hot"])))
    m.append(lambda b: b.update(top_p=rng.choice([0, 1.5])))
    m.append(lambda b: b.update(max_output_tokens=rng.choice([0, -3, 10 ** 7])))
    m.append(lambda b: b.update(top_logprobs=21))
    m.append(lambda b: b.update(reasoning={"effort": "extreme"}))
    m.append(lambda b: b.update(tool_choice=rng.choice(["sometimes", 3, {"type": "function"}])))
    m.append(lambda b: b.update(tools=[{"type": "function", "name": rng.choice(["", "a b", "ü"])}]))
    m.append(lambda b: b.update(tools=[{"type": "function", "name": "f",
                                        "parameters": rng.choice([{"type": "string"}, 5, {"type": "object", "properties": 3}])}]))
    m.append(lambda b: b.update(tools=[{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]))
    m.append(lambda b: b.update(tools=[{"type": "custom", "name": "shell"}]))
    m.append(lambda b: b.update(text={"format": {"type": "json_object"}}, instructions="no format word",
                                input="plain"))
    m.append(lambda b: b.update(input=[{"role": "tool", "content": "x"}]))
    m.append(lambda b: b.update(input=[{"role": "user", "content": [{"type": "refusal", "refusal": "x"}]}]))
    if items:
        m.append(lambda b: b["input"].append({"type": "function_call_output", "call_id": "missing_call",
                                              "output": "x"}))
        m.append(lambda b: b["input"].append({"role": "user"}))
        m.append(lambda b: b["input"].insert(0, 7))
    if calls:
        m.append(lambda b: b["input"].__setitem__(calls[0], dict(b["input"][calls[0]], call_id="")))
        m.append(lambda b: b["input"].insert(calls[0] + 1, dict(b["input"][calls[0]])))
    if outputs:
        m.append(lambda b: b["input"].pop(outputs[-1]))
        m.append(lambda b: b["input"].insert(outputs[-1] + 1, dict(b["input"][outputs[-1]])))
    return m


def _mutated_corpus(seed, count, invalid_fraction, make_request, mutations):
    """`count` requests: generated valid ones, then copies of them broken by one mutation each."""
    rng = random.Random(seed)
    valid = [make_request(rng) for _ in range(count - int(count * invalid_fraction))]
    invalid = []
    while len(valid) + len(invalid) < count:
        body = copy.deepcopy(rng.choice(valid))
        rng.choice(mutations(rng, body))(body)
        invalid.append(body)
    return valid + invalid


def responses_corpus(seed=7, count=200, invalid_fraction=0.25):
    return _mutated_corpus(seed, count, invalid_fraction, responses_request, _responses_mutations)


# --- Anthropic Messages -------------------------------------------------------------------------

def _blocks_or_string(rng, make_block, string_chance=0.4):
    if rng.random() < string_chance:
        return text(rng)
    return [make_block() for _ in range(rng.randint(1, 3))]


def _messages_user_content(rng):
    def block():
        r = rng.random()
        if r < 0.1:
            return {"type": "image", "source": rng.choice([
                {"type": "url", "url": "https://example.com/cat.png"},
                {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}])}
        if r < 0.15:
            return {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                                   "data": text(rng)}}
        return {"type": "text", "text": text(rng)}
    return _blocks_or_string(rng, block)


def _messages_tools(rng):
    tools = []
    for _ in range(rng.randint(0, 3)):
        name = _name(rng, [t["name"] for t in tools])
        tool = {"name": name, "input_schema": schema(rng)}
        if rng.random() < 0.8:
            tool["description"] = text(rng, forge=0.4)
        tools.append(tool)
    return tools


def _tool_input(rng):
    return {rng.choice(["city", "n", "q", "名前", "a b"]) + str(i): argument_value(rng)
            for i in range(rng.randint(0, 3))}


def _messages_tool_round(rng, names, next_id, thinking):
    blocks = []
    if thinking and rng.random() < 0.7:
        blocks.append({"type": "thinking", "thinking": text(rng), "signature": "sig"})
    if rng.random() < 0.5:
        blocks.append({"type": "text", "text": text(rng)})
    ids = []
    for _ in range(rng.randint(1, 3)):
        ids.append(f"toolu_{next_id()}")
        blocks.append({"type": "tool_use", "id": ids[-1], "name": rng.choice(names),
                       "input": _tool_input(rng)})
    results = []
    rng.shuffle(ids)  # results in any order
    for tool_id in ids:
        result = {"type": "tool_result", "tool_use_id": tool_id}
        r = rng.random()
        if r < 0.6:
            result["content"] = text(rng)
        elif r < 0.9:
            result["content"] = [{"type": "text", "text": text(rng)} for _ in range(rng.randint(0, 2))]
        if rng.random() < 0.1:
            result["is_error"] = True
        results.append(result)
    if rng.random() < 0.3:
        results.append({"type": "text", "text": text(rng)})
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": results}]


def messages_request(rng):
    counter = iter(range(1, 10 ** 6))
    next_id = lambda: next(counter)  # noqa: E731
    body = {"model": rng.choice(MODELS)}
    if rng.random() < 0.85:
        body["max_tokens"] = rng.choice([1, 256, 4096, 100000, 500000])
    r = rng.random()
    thinking = True
    if r < 0.3:
        body["thinking"] = {"type": "enabled", "budget_tokens": rng.randint(1024, 32000)}
    elif r < 0.55:
        body["thinking"] = {"type": "disabled"}
        thinking = False
    elif r < 0.6:
        body["thinking"] = {"type": "adaptive"}
    if rng.random() < 0.3:
        effort = rng.choice(EFFORTS)
        body["output_config"] = {"effort": effort}
        if "thinking" not in body and effort == "none":
            thinking = False
    tools = _messages_tools(rng)
    names = [t["name"] for t in tools]
    if tools:
        body["tools"] = tools
    if rng.random() < 0.5:
        body["system"] = text(rng, forge=0.4) if rng.random() < 0.5 else [
            {"type": "text", "text": text(rng, forge=0.4)} for _ in range(rng.randint(0, 2))]
    messages = []
    for turn in range(rng.randint(1, 4)):
        if turn > 0 and rng.random() < 0.1:
            messages.append({"role": "system", "content": _blocks_or_string(
                rng, lambda: {"type": "text", "text": text(rng)})})
        messages.append({"role": "user", "content": _messages_user_content(rng)})
        if names and rng.random() < 0.5:
            messages += _messages_tool_round(rng, names, next_id, thinking)
        if turn < 3 and rng.random() < 0.6:
            def block():
                if thinking and rng.random() < 0.3:
                    return {"type": "thinking", "thinking": text(rng), "signature": "s"}
                return {"type": "text", "text": text(rng)}
            messages.append({"role": "assistant", "content": _blocks_or_string(rng, block)})
    body["messages"] = messages
    if names and rng.random() < 0.4:
        choice = rng.choice([{"type": "auto"}, {"type": "any"}, {"type": "none"}]
                            + ([] if thinking else [{"type": "tool", "name": rng.choice(names)}]))
        if rng.random() < 0.2:
            choice["disable_parallel_tool_use"] = True
        body["tool_choice"] = choice
    if rng.random() < 0.3:
        body["stop_sequences"] = [text(rng, forge=0.5, words=(1, 2)) or "x"
                                  for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.3:
        body["temperature"] = rng.choice([0, 0.5, 1.0, 2])
    if rng.random() < 0.3:
        body["top_p"] = rng.choice([0.1, 0.5, 0.96, 1.0])
    if rng.random() < 0.1:
        body["top_k"] = rng.randint(1, 50)
    if rng.random() < 0.2:
        body["stream"] = rng.random() < 0.5
    if rng.random() < 0.1:
        body["metadata"] = {"user_id": text(rng, forge=0.5, words=(1, 2))}
    return body


def _messages_mutations(rng, body):
    messages = body["messages"]
    assistant_with_tools = [i for i, m in enumerate(messages) if m["role"] == "assistant"
                            and isinstance(m["content"], list)
                            and any(b["type"] == "tool_use" for b in m["content"])]
    m = []
    m.append(lambda b: b.pop("model"))
    m.append(lambda b: b.update(messages=[]))
    m.append(lambda b: b.update(messages=rng.choice([{}, "hi", 5])))
    m.append(lambda b: b["messages"].append({"role": rng.choice(["tool", "developer"]), "content": "x"}))
    m.append(lambda b: b["messages"].append({"role": "user", "content": []}))
    m.append(lambda b: b["messages"].append({"role": "user", "content": 5}))
    m.append(lambda b: b["messages"].append({"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}))
    m.append(lambda b: b["messages"].append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}))
    m.append(lambda b: b["messages"].append({"role": "assistant", "content": [
        {"type": "tool_use", "id": "dup", "name": "f", "input": {}}]}))
    m.append(lambda b: b.update(max_tokens=rng.choice([0, -1, "many"])))
    m.append(lambda b: b.update(temperature=rng.choice([3, -1])))
    m.append(lambda b: b.update(top_p=0))
    m.append(lambda b: b.update(stop_sequences=rng.choice([[""], "stop"])))
    m.append(lambda b: b.update(thinking={"type": "sometimes"}))
    m.append(lambda b: b.update(tool_choice=rng.choice(["auto", {"type": "tool"}, {"type": "tool", "name": "nope"}]),
                                thinking={"type": "disabled"}))
    m.append(lambda b: b.update(tools=[{"name": rng.choice(["", "a b"]), "input_schema": {"type": "object"}}]))
    m.append(lambda b: b.update(tools=[{"name": "f", "input_schema": rng.choice([None, {"type": "array"}, 7])}]))
    m.append(lambda b: b.update(tools=[{"type": "web_search_20250305", "name": "web_search"}]))
    m.append(lambda b: b.update(tools=[{"name": "f", "input_schema": {"type": "object"}}] * 2))
    m.append(lambda b: b.update(system=[{"type": "image"}]))
    if assistant_with_tools:
        i = assistant_with_tools[0]
        m.append(lambda b: b["messages"][i]["content"].append({"type": "text", "text": "late"}))
        m.append(lambda b: b["messages"].__setitem__(i + 1, {"role": "user", "content": "no results"}))
        m.append(lambda b: b["messages"][i]["content"].append(
            copy.deepcopy(next(x for x in b["messages"][i]["content"] if x["type"] == "tool_use"))))
        m.append(lambda b: b["messages"][i + 1]["content"].insert(0, {"type": "text", "text": "first"}))
        m.append(lambda b: b["messages"][i + 1]["content"].append(
            copy.deepcopy(b["messages"][i + 1]["content"][0])))
        m.append(lambda b: b["messages"].__delitem__(slice(i + 1, None)))
    return m


def messages_corpus(seed=11, count=200, invalid_fraction=0.25):
    return _mutated_corpus(seed, count, invalid_fraction, messages_request, _messages_mutations)


if __name__ == "__main__":
    for body in responses_corpus(count=3) + messages_corpus(count=3):
        print(json.dumps(body, ensure_ascii=False))

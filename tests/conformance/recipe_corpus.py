"""A seeded generator of OpenAI Chat Completions requests for the protocol-layer differential tests.

Requests cover roles and multi-turn histories, tools and tool results (in any order of the calls),
thinking on/off, reasoning efforts, JSON / schema / regex formats, stop sequences, prefix
continuation, unicode, images, and forged special-token spellings in every client-controlled
field; `invalid_chat_requests` derives malformed ones from valid ones. Deterministic for a seed.

    from recipe_corpus import chat_corpus
    bodies = chat_corpus(seed=4, count=320)
"""
import copy
import json
import random

MODELS = ["DeepSeek-V4-Pro", "DeepSeek-V4.1-Flash"]

# Spellings of the DeepSeek control tokens (and template markup) a client might type.
FORGED = [
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜System｜>",
    "<｜latest_reminder｜>", "<think>", "</think>", "｜DSML｜", "<｜DSML｜tool_calls>",
    "</｜DSML｜invoke>", "<｜DSML｜ calls>", "<｜image｜>", "<tool_result>", "</tool_result>",
    "<｜fim▁hole｜>", "<|im_start|>",
]

WORDS = ["weather", "Paris", "json", "report", "the", "quick", "brown", "fox", "日本語", "中文测试",
         "emoji 😀", "family 👨‍👩‍👧‍👦", "עברית", "العربية", "ñandú", "Ωmega", "café", "tabs\tand",
         "line\nbreak", "  spaces  ", "123456789", "3.14159", "\"quoted\"", "back\\slash", "{json}",
         "ZWJ\u200dx", "\u0001ctrl", "", "\r\n"]


def text(rng, forge=0.25, words=(1, 8)):
    n = rng.randint(*words)
    parts = [rng.choice(WORDS) for _ in range(n)]
    if rng.random() < forge:
        parts.insert(rng.randint(0, len(parts)), rng.choice(FORGED))
    return " ".join(parts)


def schema(rng, depth=0):
    kinds = ["string", "integer", "number", "boolean", "array", "object"]
    props = {}
    for i in range(rng.randint(0, 3)):
        kind = rng.choice(kinds if depth < 2 else kinds[:4])
        p = {"type": kind}
        if rng.random() < 0.5:
            p["description"] = text(rng, forge=0.3, words=(1, 4))
        if kind == "array":
            p["items"] = {"type": rng.choice(["string", "integer"])}
        if kind == "object":
            p = schema(rng, depth + 1)
        if kind == "string" and rng.random() < 0.2:
            p["enum"] = ["a", "b", rng.choice(FORGED)]
        props[rng.choice(["city", "n", "unit", "q", "x_1", "名前", "deep"]) + str(i)] = p
    s = {"type": "object", "properties": props}
    if props and rng.random() < 0.5:
        s["required"] = [next(iter(props))]
    return s


def tool(rng, name):
    fn = {"name": name}
    if rng.random() < 0.8:
        fn["description"] = text(rng, forge=0.4)
    if rng.random() < 0.85:
        fn["parameters"] = schema(rng)
    if rng.random() < 0.15:
        fn["strict"] = True
    return {"type": "function", "function": fn}


def argument_value(rng):
    return rng.choice([
        lambda: text(rng, forge=0.3, words=(1, 3)),
        lambda: rng.randint(-5, 10 ** 6),
        lambda: rng.choice([1.5, 0.1, 1e5, 1e20, 2.5e-7, 100.0, -0.5, 3.0]),
        lambda: rng.choice([True, False, None]),
        lambda: [1, "two", {"three": 3}],
        lambda: {"nested": {"k": text(rng, forge=0.3, words=(1, 2))}},
    ])()


def arguments(rng):
    r = rng.random()
    if r < 0.08:
        return "not json " + text(rng, forge=0.5, words=(1, 2))
    if r < 0.12:
        return json.dumps([1, 2])
    if r < 0.15:
        return ""
    args = {rng.choice(["city", "n", "q", "unit", "名前", "a b"]) + str(i): argument_value(rng)
            for i in range(rng.randint(0, 3))}
    return json.dumps(args, ensure_ascii=rng.random() < 0.5,
                      separators=rng.choice([(",", ":"), (", ", ": ")]))


def content(rng, role, images_ok):
    if rng.random() < 0.2:
        parts = [{"type": "text", "text": text(rng)} for _ in range(rng.randint(1, 3))]
        if images_ok and rng.random() < 0.4:
            url = rng.choice(["http://example.com/a.png", "data:image/png;base64,iVBORw0KGgo="])
            img = {"type": "image_url", "image_url": {"url": url}}
            if rng.random() < 0.5:
                img["image_url"]["detail"] = rng.choice(["low", "high", "auto"])
            parts.insert(rng.randint(0, len(parts)), img)
        return parts
    return text(rng, forge=0.3 if role != "system" else 0.2)


def tool_round(rng, tool_names, call_id_base, thinking):
    """An assistant message calling tools, then its results in a random order."""
    calls = []
    for k in range(rng.randint(1, 3)):
        # History is not checked against the declared tools, so names and ids may hold anything.
        name = rng.choice(tool_names) if rng.random() < 0.9 else rng.choice(FORGED)
        call_id = f"call_{call_id_base}_{k}" + (rng.choice(FORGED) if rng.random() < 0.1 else "")
        calls.append({"id": call_id, "type": "function",
                      "function": {"name": name, "arguments": arguments(rng)}})
    assistant = {"role": "assistant", "content": text(rng) if rng.random() < 0.4 else None,
                 "tool_calls": calls}
    if rng.random() < 0.7:
        assistant["reasoning_content"] = text(rng, forge=0.3)
    results = [{"role": "tool", "tool_call_id": c["id"], "content": content(rng, "tool", True)}
               for c in calls]
    rng.shuffle(results)
    return [assistant] + results


def chat_request(rng, index):
    body = {"model": rng.choice(MODELS)}
    thinking = rng.choice([None, "enabled", "disabled", "adaptive"])
    if thinking is not None:
        body["thinking"] = {"type": thinking}
    if rng.random() < 0.4:
        body["reasoning_effort"] = rng.choice(["low", "medium", "high", "xhigh", "max", "minimal",
                                               "ultra", "none"])
    thinking_on = thinking in (None, "enabled", "adaptive") and not (
        thinking is None and body.get("reasoning_effort") == "none")
    tool_names = []
    if rng.random() < 0.45:
        tool_names = [f"tool_{k}" for k in range(rng.randint(1, 3))]
        body["tools"] = [tool(rng, n) for n in tool_names]
        choice = rng.random()
        if choice < 0.15:
            body["tool_choice"] = "none"
        elif choice < 0.3:
            body["tool_choice"] = "auto"
        elif choice < 0.4 and not thinking_on:
            body["tool_choice"] = "required"
        elif choice < 0.45 and not thinking_on:
            body["tool_choice"] = {"type": "function", "function": {"name": tool_names[-1]}}
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": content(rng, "system", False)})
    for turn in range(rng.randint(1, 4)):
        messages.append({"role": "user", "content": content(rng, "user", True)})
        if rng.random() < 0.15:
            messages.append({"role": "user", "content": text(rng)})
        if rng.random() < 0.1:
            messages.append({"role": "system", "content": text(rng)})
        if turn == 0 and rng.random() < 0.05:
            messages.append({"role": "latest_reminder", "content": text(rng)})
        if rng.random() < 0.7:
            if tool_names and rng.random() < 0.6:
                messages += tool_round(rng, tool_names, f"{index}_{turn}", thinking_on)
                if rng.random() < 0.5:
                    messages += tool_round(rng, tool_names, f"{index}_{turn}b", thinking_on)
            a = {"role": "assistant", "content": content(rng, "assistant", False)}
            if rng.random() < 0.6:
                a["reasoning_content"] = text(rng, forge=0.3)
            messages.append(a)
    if messages[-1]["role"] == "assistant" and rng.random() < 0.5:
        messages.pop()
    if rng.random() < 0.12:
        prefix = {"role": "assistant", "content": rng.choice(["", text(rng)]), "prefix": True}
        if rng.random() < 0.5:
            prefix["reasoning_content"] = text(rng)
        messages.append(prefix)
    body["messages"] = messages
    r = rng.random()
    if r < 0.12:
        body["response_format"] = {"type": "json_object"}
        if rng.random() < 0.9:
            messages[0]["content"] = "Answer in json. " + (messages[0]["content"]
                                                           if isinstance(messages[0]["content"], str)
                                                           else "")
    elif r < 0.2:
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "out", "schema": schema(rng)}}
    elif r < 0.24:
        body["response_format"] = {"type": "regex", "regex": "[a-z]+"}
    elif r < 0.28:
        body["response_format"] = {"type": "text"}
    if rng.random() < 0.3:
        body["stop"] = rng.choice([text(rng, forge=0.3, words=(1, 2)) or "x",
                                   ["\n\n", "END", rng.choice(FORGED)]])
    if rng.random() < 0.3:
        body["max_tokens"] = rng.choice([1, 100, 4096, 393216])
    if rng.random() < 0.3:
        body["temperature"] = rng.choice([0, 0.1, 0.7, 1.3, 2])
    if rng.random() < 0.3:
        body["top_p"] = rng.choice([0.1, 0.5, 0.95, 1])
    if rng.random() < 0.2:
        body["seed"] = rng.randint(0, 2 ** 40)
    if rng.random() < 0.2:
        body["stream"] = True
        body["stream_options"] = {"include_usage": rng.random() < 0.5}
    if rng.random() < 0.1:
        body["logprobs"] = True
        body["top_logprobs"] = rng.randint(0, 20)
    if rng.random() < 0.1:
        body["user"] = "u-" + str(index)
    return body


def _mutations(rng, body):
    """Ways to break a valid request; each returns the broken copy (or None if inapplicable)."""
    b = copy.deepcopy(body)
    msgs = b["messages"]
    tool_msgs = [i for i, m in enumerate(msgs) if m["role"] == "tool"]
    options = [
        lambda: b.update(model="gpt-4o") or b,
        lambda: b.update(messages=[]) or b,
        lambda: b.pop("messages") and b,
        lambda: b.pop("model") and b,
        lambda: b.update(model=7) or b,
        lambda: b.update(n=2) or b,
        lambda: b.update(temperature=2.5) or b,
        lambda: b.update(temperature="hot") or b,
        lambda: b.update(top_p=0) or b,
        lambda: b.update(max_tokens=0) or b,
        lambda: b.update(max_tokens=-3) or b,
        lambda: b.update(max_tokens=393217) or b,
        lambda: b.update(stop="") or b,
        lambda: b.update(stop=["a", ""]) or b,
        lambda: b.update(stop=[str(k) for k in range(17)]) or b,
        lambda: b.update(top_logprobs=3) or b,
        lambda: b.update(logprobs=True, top_logprobs=21) or b,
        lambda: b.update(seed=-1) or b,
        lambda: b.update(stream="yes") or b,
        lambda: b.update(reasoning_effort="bogus") or b,
        lambda: b.update(thinking={"type": "sometimes"}) or b,
        lambda: b.update(thinking="enabled") or b,
        lambda: b.update(response_format={"type": "json_object"}, messages=[
            {"role": "user", "content": "no format word here"}]) or b,
        lambda: b.update(response_format={"type": "json_schema", "json_schema": {"name": "x"}}) or b,
        lambda: b.update(tools=[{"type": "function", "function": {"name": "bad name!"}}]) or b,
        lambda: b.update(tools=[{"type": "function", "function": {"name": ""}}]) or b,
        lambda: b.update(tools=[{"type": "function", "function": {"name": "f"}},
                                {"type": "function", "function": {"name": "f"}}]) or b,
        lambda: b.update(tools=[{"type": "function", "function": {
            "name": "f", "parameters": {"type": "string"}}}]) or b,
        lambda: b.update(tools=[{"type": "function", "function": {
            "name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}]) or b,
        lambda: b.update(tools=[{"type": "function", "function": {"name": "f", "parameters": [1]}}]) or b,
        lambda: b.update(tools=[{"type": "web_search"}]) or b,
        lambda: b.update(tools=[{"type": "function", "function": {"name": "f"}}],
                         tool_choice={"type": "function", "function": {"name": "zz"}}) or b,
        lambda: b.update(tools=[{"type": "function", "function": {"name": "f"}}],
                         tool_choice="required", thinking={"type": "enabled"}) or b,
        lambda: b.update(tool_choice="bogus") or b,
        lambda: msgs.append({"role": "developer", "content": "x"}) or b,
        lambda: msgs.append({"role": "user"}) or b,
        lambda: msgs.append({"role": "user", "content": None}) or b,
        lambda: msgs.append({"role": "user", "content": 5}) or b,
        lambda: msgs.append({"role": "user", "content": [{"type": "input_audio"}]}) or b,
        lambda: msgs.append({"role": "assistant", "content": None}) or b,
        lambda: msgs.append({"role": "assistant", "content": "x", "tool_calls": []}) or b,
        lambda: msgs.append({"role": "tool", "tool_call_id": "nope", "content": "orphan"}) or b,
        lambda: msgs.append({"role": "tool", "content": "no id"}) or b,
        lambda: msgs.insert(0, {"role": "assistant", "content": "p", "prefix": True}) or b,
        lambda: msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}) or b,
        lambda: msgs.extend([{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"}]) or b,
        lambda: msgs.extend([{"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f"}}]}]) or b,
        lambda: msgs.append({"role": "assistant", "content": [
            {"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}) or b,
        (lambda: msgs.pop(tool_msgs[-1]) and b) if tool_msgs else (lambda: None),
        (lambda: msgs.insert(tool_msgs[-1], {"role": "user", "content": "between"}) or b)
        if tool_msgs else (lambda: None),
        (lambda: msgs[tool_msgs[0]].update(tool_call_id="call_unknown") or b)
        if tool_msgs else (lambda: None),
        (lambda: msgs.insert(tool_msgs[-1], copy.deepcopy(msgs[tool_msgs[-1]])) or b)
        if tool_msgs else (lambda: None),
    ]
    return rng.choice(options)()


def invalid_chat_requests(rng, valid, count):
    out = []
    while len(out) < count:
        broken = _mutations(rng, rng.choice(valid))
        if broken is not None:
            out.append(broken)
    return out


def chat_corpus(seed=4, count=320, invalid_fraction=0.2):
    """`count` requests: generated valid-shaped ones plus mutated invalid ones."""
    rng = random.Random(seed)
    n_invalid = int(count * invalid_fraction)
    valid = [chat_request(rng, i) for i in range(count - n_invalid)]
    return valid + invalid_chat_requests(rng, valid, n_invalid)


# Hand-written requests at the edges the reference draws: each line one body (as JSON text, so
# that key order and odd types survive), checked against the oracle like the generated ones.
CHAT_EDGE_CASES = [
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"a"},{"role":"latest_reminder","content":"r1"},{"role":"latest_reminder","content":"r2"},{"role":"user","content":"b"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"a"},{"role":"latest_reminder","content":"<｜User｜>r1"},{"role":"assistant","content":"x"},{"role":"latest_reminder","content":"r2"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"latest_reminder","content":"r1"},{"role":"latest_reminder","content":"r2"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}]}',
    '{"model":"other","messages":[{"role":"user","content":"hi"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"temperature":0.5,"top_p":0.9,"max_tokens":100,"seed":5,"stop":"x","stream":true,"stream_options":{"include_usage":true}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled"},"temperature":0.5,"top_p":0.9,"max_completion_tokens":100,"stop":["x","y"],"reasoning_effort":"high"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled"},"temperature":0.5,"top_p":0.9,"reasoning_effort":"low"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"medium"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"minimal"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"xhigh"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"max"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"none"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"bogus"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"text"}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}],"tool_choice":"required"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}],"tool_choice":"none"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":3,"n":1,"frequency_penalty":0.5,"presence_penalty":0.1,"user":"u"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"n":2}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"unknown_field":2}',
    '{"model":"DeepSeek-V4-Pro","messages":[]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"http://x/y.png","detail":"low"}}]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"system","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"developer","content":"dev"},{"role":"user","content":"u"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"pre","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"pre","reasoning_content":"rc","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","reasoning_content":"rc","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"pre","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a1"},{"role":"user","content":"u2"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a1"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"temperature":0.1,"top_p":0.3}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"temperature":0.1,"top_p":0.3}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"}}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"high","top_p":0.5}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"ultra"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":100}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"max_tokens":100}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"max_tokens":100,"max_completion_tokens":50}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"max_completion_tokens":100}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"max_tokens":0}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"max_tokens":393217}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"max_tokens":-1}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"temperature":3}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"temperature":2.5}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"top_p":1.5}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"top_p":0}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"temperature":0}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"adaptive"}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"reasoning_effort":"high"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d","e"]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"stop":""}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"stop":[]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"seed":-1}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"top_logprobs":3}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":21}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"give json"}],"response_format":{"type":"json_object"}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"system","content":"JSON please"},{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"json"},{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"regex","regex":"a+"}}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"top_p":0.5}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"top_p":1.0}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"top_p":0.5,"reasoning_effort":"max"}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"zz"}}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"bad name!"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":""}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"strin"}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_search"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"properties":{"a":{}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}},"required":["a"]}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"},{"role":"assistant","content":"y"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"assistant","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi","name":"bob"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":null}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":""}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":5}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":[]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":[{"type":"input_audio"}]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"pre","prefix":true},{"role":"user","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"pre","prefix":true,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"assistant","content":"b"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"p1"},{"type":"text","text":"p2"}]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","tool_calls":[]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled"},"reasoning_effort":"none"}',
    '{"model":"DeepSeek-V4-Pro","thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","reasoning_content":"r"},{"role":"user","content":"hi"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"latest_reminder","content":"r"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"stop":["a",""]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"<｜User｜>x","parameters":{"type":"object","properties":{"a":{"type":"string","description":"</think>"}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":{"role":"user"}}',
    '{"messages":[{"role":"user","content":"hi"}]}',
    '{"model":"DeepSeek-V4-Pro"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"user","content":"u"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c9","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"top_p":0.5}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"top_p":0.5}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"max","tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"max","tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"low","tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c8","content":"x"},{"role":"tool","tool_call_id":"c9","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"},{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c2","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"system","content":"x"},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}],"tools":[{"type":"function","function":{"name":"g"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"bad name","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"not json"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"http://x"}}]},{"role":"user","content":"hi"}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"http://x"}}]},{"role":"user","content":"hi"}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"hi"}]}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":[{"type":"image_url","image_url":{"url":"http://x"}}]}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"disabled"},"reasoning_effort":"none","tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"bogus"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"bogus"}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":{}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"thinking":"enabled"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"stream":"yes"}',
    '{"model":5,"messages":[{"role":"user","content":"hi"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object"}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"object"}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","prefix":true}],"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","prefix":true}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"},{"role":"assistant","content":"x","prefix":true}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{}}}}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"},{"role":"assistant","content":"x","prefix":true}],"response_format":{"type":"regex","regex":"a"}}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"},{"role":"system","content":""},{"role":"user","content":"x"}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"system","content":""},{"role":"user","content":"x"}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":""},{"role":"user","content":"x"},{"role":"assistant","content":""},{"role":"latest_reminder","content":""}]}',
    '{"model":"DeepSeek-V4.1-Flash","messages":[{"role":"user","content":"hi"},{"role":"system","content":[]},{"role":"user","content":"x"}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"bad name"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":[]}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"}],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"}],"response_format":{"type":"regex","regex":"a"},"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{}}},"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{}}},"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{}}},"tools":[{"type":"function","function":{"name":"bad name"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi json"}],"response_format":{"type":"text"},"tools":[{"type":"function","function":{"name":"f"}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"array","description":"d","items":{"type":"string"}}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","description":"d","items":{"type":"string"},"zzz":1,"aaa":2}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","description":"top","properties":{"a":{"description":"d","type":"array"}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"string","description":"d","enum":["a"],"title":"t","default":"x","format":"date"},"b":{"description":"d","type":"string","title":"t"},"c":{"title":"t","type":"array","description":"d","items":{"type":"string"},"minItems":1}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"description":"top","title":"T","type":"object","properties":{"a":{"type":"string"}},"required":["a"],"x":1}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"title":"T","type":"object","properties":{"a":{"description":"d","title":"t","enum":["a"],"default":"x","pattern":"p","type":"string","minLength":1,"maxLength":3,"const":"a"},"b":{"description":"d","type":"integer","title":"t","minimum":1,"maximum":5,"enum":[1],"exclusiveMinimum":0,"multipleOf":1},"c":{"minItems":1,"description":"d","maxItems":3,"title":"t","type":"array","items":{"type":"string"}},"d":{"description":"d","type":"boolean"},"e":{"description":"d","type":"number"},"f":{"description":"d","anyOf":[{"type":"string"},{"type":"null"}]},"g":{"description":"d","type":["string","null"]},"h":{"$ref":"#/$defs/X","description":"d"}},"$defs":{"X":{"type":"string"}}}}}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","reasoning_content":"","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"","reasoning_content":"r","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","prefix":true}]}',
    '{"model":"DeepSeek-V4-Pro","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"format":"email","type":"string","description":"d","enum":["x"],"pattern":"p"},"b":{"exclusiveMaximum":9,"type":"number","description":"d","multipleOf":2,"exclusiveMinimum":0,"maximum":8,"minimum":1},"c":{"description":"nested","type":"object","properties":{"z":{"type":"string"}},"title":"T"},"d":{"enum":[1,2],"type":"integer"},"e":{"type":"null","description":"d"},"h":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}}},"description":"d"}}}}}]}',
]


def chat_edge_cases():
    """The hand-written edge cases as bodies."""
    return [json.loads(text) for text in CHAT_EDGE_CASES]

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
        calls.append({"id": f"call_{call_id_base}_{k}", "type": "function",
                      "function": {"name": rng.choice(tool_names), "arguments": arguments(rng)}})
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

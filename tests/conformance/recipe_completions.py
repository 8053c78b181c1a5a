"""Seeded random model completions for the output-parser differential test.

Each case is a request (in one of the three protocols) plus generated text cut into random
chunks. The text mixes what DeepSeek V4 / V4.1 models emit: reasoning closed by </think>, answer
text, DSML tool-call blocks in both spellings with string and JSON parameters, JSON answers with
and without a ```json fence, stop sequences, unicode, and broken or partial markup.
"""
import json
import random

DSML = "\uff5cDSML\uff5c"

WORDS = ["alpha", "beta", "Hello", "world", "42", "x", "naïve", "日本語", "🙂", "👩‍💻", "tab\t",
         "quote\"", "back\\slash", "<", ">", "</", "<think>", "\n", "\n\n", "  ", "｜", "```",
         "{", "}", "[1, 2]", "STOP", "END", "<｜end▁of▁sentence｜>", "</thin", "<｜DSML"]

STOPS = [["STOP"], ["END", "\n\n\n"], ["wor"], ["}"], ["日本"]]


def words(rng, lo=0, hi=8):
    return "".join(rng.choice(WORDS) + rng.choice(["", " ", " ", "\n"])
                   for _ in range(rng.randint(lo, hi)))


def tool_block(rng, v41, names):
    """A DSML tool-call block as the model writes it (V4 or V4.1 tag spelling)."""
    sp = " " if v41 else ""
    block_tag = " calls" if v41 else "tool_calls"
    out = f"\n\n<{DSML}{block_tag}>\n"
    for _ in range(rng.randint(1, 3)):
        out += f'<{DSML}{sp}invoke name="{rng.choice(names)}">\n'
        for k in range(rng.randint(0, 3)):
            key = rng.choice(["city", "n", "query", "opts", "ключ"]) + str(k)
            if rng.random() < 0.5:
                value = words(rng, 0, 4)
                out += f'<{DSML}{sp}parameter name="{key}" string="true">{value}</{DSML}{sp}parameter>\n'
            else:
                value = json.dumps(rng.choice([3, -1.5, True, None, [1, "a"], {"k": "v ü"}]),
                                   ensure_ascii=False)
                out += f'<{DSML}{sp}parameter name="{key}" string="false">{value}</{DSML}{sp}parameter>\n'
        out += f"</{DSML}{sp}invoke>\n"
    out += f"</{DSML}{block_tag}>"
    if rng.random() < 0.2:
        out += words(rng, 1, 3)  # text after the block is dropped
    return out


def garble(rng, text):
    """Truncate or corrupt markup sometimes, to exercise the parser's error paths."""
    r = rng.random()
    if r < 0.1 and len(text) > 4:
        return text[: rng.randint(1, len(text) - 1)]
    if r < 0.15:
        i = rng.randint(0, len(text))
        return text[:i] + rng.choice(["<", "</｜DSML｜zz>", '"', "string=\"maybe\"", ">"]) + text[i:]
    return text


def completion(rng, thinking, tools, json_mode, v41):
    text = ""
    if thinking:
        text += rng.choice(["", "\n", "\n\n"]) + words(rng, 0, 10)
        if rng.random() < 0.9:
            text += rng.choice(["", "\n", "\n\n"]) + "</think>" + rng.choice(["", "\n", "\n\n"])
    if json_mode:
        value = json.dumps(rng.choice([{"a": 1, "b": "}"}, [1, 2], {"t": "日本 \"q\""}]),
                           ensure_ascii=False)
        pre = rng.choice(["", "Sure:\n", "x "])
        if rng.random() < 0.5:
            text += pre + "```json\n" + value + "\n```" + rng.choice(["", "\nbye"])
        else:
            text += pre + value + rng.choice(["", " tail"])
    else:
        text += words(rng, 0, 10)
    if tools and rng.random() < 0.6:
        text += tool_block(rng, v41 if rng.random() < 0.8 else not v41, [t for t in tools])
    if rng.random() < 0.2:
        text += "</think>" + words(rng, 0, 3)
    return garble(rng, text)


def chunkings(rng, text):
    """Random cut points (whole characters: the oracle takes Python str)."""
    mode = rng.random()
    if mode < 0.15:
        return [text] if text else []
    if mode < 0.3:
        return list(text)
    pieces, i = [], 0
    while i < len(text):
        n = rng.randint(1, 12)
        pieces.append(text[i:i + n])
        i += n
    return pieces


def chat_request(rng, model, thinking, tools, stops, json_mode, required):
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if thinking is not None:
        body["thinking"] = {"type": "enabled" if thinking else "disabled"}
    if tools:
        body["tools"] = [{"type": "function", "function": {
            "name": n, "parameters": {"type": "object", "properties": {}}}} for n in tools]
        if required:
            body["tool_choice"] = "required"
    if stops:
        body["stop"] = stops
    if json_mode:
        body["response_format"] = {"type": "json_object"}
        body["messages"][0]["content"] = "answer in json"
    if rng.random() < 0.3:
        body["stream"] = True
        body["stream_options"] = {"include_usage": rng.random() < 0.5}
    return body


def responses_request(rng, model, thinking, tools, stops, json_mode, required):
    body = {"model": model, "input": "hi"}
    if thinking is not None:
        body["thinking"] = {"type": "enabled" if thinking else "disabled"}
    if tools:
        body["tools"] = [{"type": "namespace", "name": "ns", "description": "tools in ns",
                          "tools": [{"type": "function", "name": "tool",
                                     "parameters": {"type": "object", "properties": {}}}]}
                         if n == "ns_tool" else
                         {"type": "function", "name": n,
                          "parameters": {"type": "object", "properties": {}}} for n in tools]
        if required:
            body["tool_choice"] = "required"
    if json_mode:
        body["text"] = {"format": {"type": "json_object"}}
        body["input"] = "answer in json"
    if rng.random() < 0.3:
        body["instructions"] = "be brief"
    if rng.random() < 0.3:
        body["max_output_tokens"] = 1000
    return body


def messages_request(rng, model, thinking, tools, stops, json_mode, required):
    body = {"model": model, "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}]}
    if thinking is not None:
        body["thinking"] = ({"type": "enabled", "budget_tokens": 2048} if thinking
                            else {"type": "disabled"})
    if tools:
        body["tools"] = [{"name": n, "input_schema": {"type": "object", "properties": {}}}
                         for n in tools]
        if required:
            body["tool_choice"] = {"type": "any"}
    if stops:
        body["stop_sequences"] = stops
    return body


BUILDERS = {"chat": chat_request, "responses": responses_request, "messages": messages_request}


def make_case(rng, protocol, version):
    model = "DeepSeek-V4.1-Flash" if version == "v4.1" else "DeepSeek-V4-Pro"
    thinking = rng.choice([None, True, False])
    tools = rng.sample(["get_weather", "search", "ns_tool"], rng.randint(1, 2)) \
        if rng.random() < 0.5 else []
    required = bool(tools) and thinking is False and rng.random() < 0.3
    stops = rng.choice(STOPS) if rng.random() < 0.3 and protocol != "responses" else None
    json_mode = protocol != "messages" and not tools and rng.random() < 0.2
    body = BUILDERS[protocol](rng, model, thinking, tools, stops, json_mode, required)
    effective_thinking = thinking is not False
    # Responses flattens namespace tools to "<namespace>__<name>": that is what the model calls.
    called = ["ns__tool" if protocol == "responses" and n == "ns_tool" else n for n in tools]
    if required:
        # The prompt already opened the block: the model continues with the invokes.
        block = tool_block(rng, version == "v4.1", called)
        text = garble(rng, block[block.index(">") + 1:])
    else:
        text = completion(rng, effective_thinking, called, json_mode, version == "v4.1")
    chunks = [[c, rng.randint(1, 3)] for c in chunkings(rng, text)]
    return {
        "request": body,
        "chunks": chunks,
        "finish": rng.choice(["stop", "stop", "stop", "length", "content_filter"]),
        "prompt_tokens": rng.randint(0, 500),
        "cached_tokens": 0,
        "id": f"resp-{rng.randint(0, 10**6)}",
        "created": 1700000000 + rng.randint(0, 10**6),
    }


def cases(seed, protocol, version, count):
    rng = random.Random(f"{seed}-{protocol}-{version}")
    out = []
    for _ in range(count):
        case = make_case(rng, protocol, version)
        case["cached_tokens"] = rng.randint(0, case["prompt_tokens"])
        out.append(case)
    return out

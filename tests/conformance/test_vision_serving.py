"""Images through the whole cluster: router + vision encoder + prefill + decode, with the official
SDKs, on a tiny random-weight DeepSeek V4.1-shaped model with the real tokenizer.

Random weights: the text is never checked. What is: the prompt's token count equals
deepseek-recipe's (each image counted at its image_tokens); the same image again is served from
the encoder's cache (its tower-run counter does not move) and from the prefix cache (cached
tokens cover the image); another image with the same text gets no cache hit past the text before
it; a text-only request never reaches the encoder; a bad image is refused with recipe's message.
"""
import base64
import json
import pathlib
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib

import pytest

from conftest import BUILD, REPO, Cluster, _wait_ports, _wait_ready, deepseek_tokenizer_file
import recipe_cli

SERVED = "tiny-deepseek-v41"
BLOCK = 16


def png(width, height, seed):
    """An RGB PNG whose pixels depend on `seed` (standard library only)."""
    rows = b""
    for y in range(height):
        row = bytes((x * 7 + y * 3 + seed * 31 + c * 50) % 256 for x in range(width) for c in range(3))
        rows += b"\x00" + row
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) +
            chunk(b"IEND", b""))


def data_url(data):
    return "data:image/png;base64," + base64.b64encode(data).decode()


def metric(url, name):
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def v41_tokenizer(v4_path, out):
    """The V4 tokenizer with the special tokens the V4.1 encoding writes: the image placeholder
    at recipe's IMAGE_SPECIAL_TOKEN_ID (129264, "<｜image2｜>" in V4) and <｜System｜> in an unused
    multimodal placeholder slot. Both sides (recipe and tandem) count with this same file."""
    import deepseek_recipe as dr
    tok = json.loads(pathlib.Path(v4_path).read_text(encoding="utf-8"))
    renames = {dr.IMAGE_SPECIAL_TOKEN_ID: "<｜image｜>", 129250: "<｜System｜>"}
    for added in tok["added_tokens"]:
        if added["id"] in renames:
            added["content"] = renames[added["id"]]
    out.write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    return out


def start_vision_cluster(tmp, encoders=1):
    """Router + prefill + decode + `encoders` encoders on the tiny V4.1-shaped model."""
    for binary in ("router/tandem-router", "prefill/tandem-prefill", "decode/tandem-decode",
                   "encoder/tandem-encoder"):
        if not (BUILD / "services" / binary).exists():
            pytest.skip(f"{binary} is not built")
    v4_tokenizer = deepseek_tokenizer_file()
    if v4_tokenizer is None:
        pytest.skip("deepseek-tokenizer is not installed")
    tokenizer = v41_tokenizer(v4_tokenizer, pathlib.Path(tmp) / "tokenizer.json")
    model = pathlib.Path(tmp) / "model"
    vision = pathlib.Path(tmp) / "vision"
    subprocess.run([sys.executable, str(REPO / "tools" / "fixtures" / "make_served_deepseek.py"),
                    "--tokenizer", str(tokenizer), "--out", str(model),
                    "--fixture", str(REPO / "tests" / "fixtures" / "deepseek_v4_tiny")],
                   check=True, stdout=subprocess.DEVNULL)
    hidden = json.loads((model / "config.json").read_text())["hidden_size"]
    subprocess.run([sys.executable, str(REPO / "tools" / "fixtures" / "make_served_vision.py"),
                    "--text-hidden", str(hidden), "--out", str(vision)], check=True)
    c = Cluster(tmp)
    try:
        router = c.start("router", [str(BUILD / "services" / "router" / "tandem-router"),
                                    "--model", str(model), "--served-model-name", SERVED,
                                    "--chat-format", "deepseek-v4.1",
                                    "--kv-block-size", str(BLOCK),
                                    # Only so that URL requests take the fetch threads' path:
                                    # localhost resolves to loopback, which is never fetched.
                                    "--image-url-allowlist", "localhost",
                                    "--http-listen", "127.0.0.1:0",
                                    "--control-listen", "127.0.0.1:0",
                                    "--port-file", f"{tmp}/router.port"])
        http_port, control_port = _wait_ports(pathlib.Path(tmp) / "router.port", router)
        for role in ("prefill", "decode"):
            c.start(role, [str(BUILD / "services" / role / f"tandem-{role}"),
                           "--model", str(model), "--served-model-name", SERVED,
                           "--block-size", str(BLOCK), "--threads", "1",
                           "--router", f"127.0.0.1:{control_port}"])
        c.encoder_metrics = []
        for e in range(encoders):
            proc = c.start(f"encoder{e}", [
                str(BUILD / "services" / "encoder" / "tandem-encoder"),
                "--model", str(vision), "--served-model-name", SERVED, "--worker-id", f"enc-{e}",
                "--threads", "1", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                "--router", f"127.0.0.1:{control_port}", "--port-file", f"{tmp}/encoder{e}.port"])
            _, metrics_port = _wait_ports(pathlib.Path(tmp) / f"encoder{e}.port", proc)
            c.encoder_metrics.append(f"http://127.0.0.1:{metrics_port}")
        c.url = f"http://127.0.0.1:{http_port}"
        _wait_ready(c.url)
        deadline = time.time() + 30
        for url in c.encoder_metrics:
            while metric(url, "tandem_encoder_ready") != 1:
                assert time.time() < deadline, "an encoder never registered"
                time.sleep(0.2)
        c.tokenizer = tokenizer
        return c
    except BaseException:
        c.stop()
        raise


@pytest.fixture(scope="module")
def vision_cluster():
    with tempfile.TemporaryDirectory(prefix="tandem_vision_") as tmp:
        c = start_vision_cluster(tmp)
        c.encoder_metrics = c.encoder_metrics[0]
        try:
            yield c
        finally:
            c.stop()


def expected_prompt_tokens(tokenizer, body, images, protocol="chat", detail="high"):
    """deepseek-recipe's count: the encoded prompt with each image at its image_tokens."""
    import deepseek_recipe as dr
    rendered = recipe_cli.oracle_render(protocol, "v4.1", body,
                                        tokenizer=dr.Tokenizer.from_file(str(tokenizer)))
    assert "ids" in rendered, rendered
    total = len(rendered["ids"]) - len(images)
    for data in images:
        info = dr.OpenCvImagePreprocessor().preprocess(data, dr.PreprocessOptions(detail, 2048, 512))
        total += dr.MultiModalData([info]).image_token_adjustment() + 1
    placeholder = rendered["ids"].index(dr.IMAGE_SPECIAL_TOKEN_ID) if images else None
    return total, placeholder


def chat_body(text, image, *more_images):
    content = [{"type": "text", "text": text}]
    for one in ([image] if image is not None else []) + list(more_images):
        content.append({"type": "image_url", "image_url": {"url": data_url(one)}})
    return {"model": SERVED, "messages": [{"role": "user", "content": content}], "max_tokens": 4,
            "temperature": 0}


def test_images_through_the_cluster_with_the_openai_sdk(vision_cluster):
    import openai
    client = openai.OpenAI(base_url=vision_cluster.url + "/v1", api_key="unused")
    runs = lambda: metric(vision_cluster.encoder_metrics, "tandem_encoder_tower_runs_total")
    images_seen = lambda: metric(vision_cluster.encoder_metrics, "tandem_encoder_images_total")
    text = "Describe this picture in detail, please, with every colour you can see in it."
    first_image, other_image = png(64, 48, 1), png(64, 48, 2)
    body = chat_body(text, first_image)
    want, placeholder = expected_prompt_tokens(vision_cluster.tokenizer, body, [first_image])

    before = runs()
    first = client.chat.completions.create(**body)
    assert first.usage.prompt_tokens == want
    assert runs() == before + 1

    # The same image again: no tower run, and the prefix cache covers the image.
    again = client.chat.completions.create(**body)
    assert again.usage.prompt_tokens == want
    assert runs() == before + 1, "the same image was encoded again"
    # Every full block before the prompt's last token is reused, the image's included.
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached == (want - 1) // BLOCK * BLOCK, (cached, want)
    assert cached > placeholder, "the cache hit stops before the image"

    # Once the router's index has the prefill's blocks (KV events, asynchronous), the image is not
    # even sent to the encoder: the prefill's cache covers it.
    covered = lambda: metric(vision_cluster.url, "tandem_router_images_cache_covered_total")
    deadline = time.time() + 10
    while True:
        sent_before, covered_before = images_seen(), covered()
        repeat = client.chat.completions.create(**body)
        if covered() > covered_before:
            assert images_seen() == sent_before, "a covered image still went to the encoder"
            assert repeat.choices[0].message.content == again.choices[0].message.content
            assert repeat.usage.prompt_tokens_details.cached_tokens == cached
            break
        assert time.time() < deadline, "the router never skipped encoding a cached image"
        time.sleep(0.2)

    # Another image with the same text: no hit past the text before the image.
    other = client.chat.completions.create(**chat_body(text, other_image))
    assert runs() == before + 2
    assert other.usage.prompt_tokens_details.cached_tokens <= placeholder // BLOCK * BLOCK

    # Text alone never reaches the encoder.
    seen = images_seen()
    plain = client.chat.completions.create(**chat_body(text, None))
    assert plain.usage.prompt_tokens > 0
    assert images_seen() == seen


def test_images_with_the_anthropic_sdk(vision_cluster):
    import anthropic
    client = anthropic.Anthropic(base_url=vision_cluster.url, api_key="unused")
    image = png(40, 72, 3)
    body = {"model": SERVED, "max_tokens": 4,
            "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": base64.b64encode(image).decode()}},
                {"type": "text", "text": "What is this?"}]}]}
    want, _ = expected_prompt_tokens(vision_cluster.tokenizer, body, [image], protocol="messages")
    message = client.messages.create(**body)
    # Anthropic's input_tokens leave out what the cache served.
    assert message.usage.input_tokens + message.usage.cache_read_input_tokens == want


def test_an_unreadable_image_is_refused_with_recipes_message(vision_cluster):
    import openai
    client = openai.OpenAI(base_url=vision_cluster.url + "/v1", api_key="unused")
    broken = png(16, 16, 4)[:40]  # a PNG cut inside its first chunk
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(**chat_body("what is this?", broken))
    assert "unsupported image" in str(refused.value)


def test_an_image_url_is_fetched_off_the_http_threads_under_the_url_policy(vision_cluster):
    """With an allow-list the request is prepared on a fetch thread (a deferred answer); an allowed
    host that resolves to loopback is refused at connect time, and the error still arrives in the
    protocol's envelope, while a host off the list is refused without a connection."""
    import openai
    client = openai.OpenAI(base_url=vision_cluster.url + "/v1", api_key="unused", max_retries=0)
    for url, words in (("http://localhost:9/cat.png", "loopback"),
                       ("https://images.example.com/cat.png", "allow")):
        body = {"model": SERVED, "max_tokens": 4, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": url}}]}]}
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(**body)
        assert words in str(refused.value).lower(), str(refused.value)
    # Text that merely mentions a URL also goes through the fetch threads and is served.
    served = client.chat.completions.create(**chat_body("see https://example.com", None))
    assert served.usage.prompt_tokens > 0


def test_an_encoder_killed_mid_service_costs_no_request_and_leaks_nothing():
    """kill -9 of one of two encoders: every request still completes (the router tries the other
    encoder), none hangs, and the survivor's leases go back to zero."""
    import openai
    with tempfile.TemporaryDirectory(prefix="tandem_vision_faults_") as tmp:
        c = start_vision_cluster(tmp, encoders=2)
        try:
            client = openai.OpenAI(base_url=c.url + "/v1", api_key="unused", timeout=60,
                                   max_retries=0)
            assert client.chat.completions.create(**chat_body("first", png(32, 32, 10))).usage
            c.procs["encoder0"].kill()  # SIGKILL: no drain, no deregistration
            c.procs["encoder0"].wait()
            started = time.time()
            # Twelve different images: each has its own encoder order (rendezvous hashing), so
            # about half try the dead one first until its registration lapses.
            for i in range(6):
                done = client.chat.completions.create(
                    **chat_body(f"image {i}", png(32, 40, 20 + i), png(40, 32, 40 + i)))
                assert done.usage.prompt_tokens > 0
            assert time.time() - started < 60
            survivor = c.encoder_metrics[1]
            deadline = time.time() + 10
            while metric(survivor, "tandem_encoder_leases") != 0:
                assert time.time() < deadline, "leases were left pinned on the surviving encoder"
                time.sleep(0.1)
            assert metric(survivor, "tandem_encoder_images_total") >= 12
            assert metric(survivor, "tandem_encoder_encoding") == 0
        finally:
            c.stop()


def test_images_with_the_responses_api(vision_cluster):
    import openai
    client = openai.OpenAI(base_url=vision_cluster.url + "/v1", api_key="unused")
    runs = lambda: metric(vision_cluster.encoder_metrics, "tandem_encoder_tower_runs_total")
    image = png(48, 48, 5)
    before = runs()
    body = {"model": SERVED, "max_output_tokens": 4,
            "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "What is in this image?"},
                {"type": "input_image", "image_url": data_url(image), "detail": "low"}]}]}
    want, _ = expected_prompt_tokens(vision_cluster.tokenizer, body, [image], protocol="responses",
                                     detail="low")
    response = client.responses.create(**body)
    assert response.usage.input_tokens == want
    assert runs() == before + 1

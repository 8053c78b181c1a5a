"""A minimal streaming OpenAI-compatible client on asyncio streams (stdlib only): one connection
per request, `stream: true`, usage in the last chunk. Records when each token arrived."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from urllib.parse import urlsplit


@dataclasses.dataclass
class Result:
    index: int
    sent_s: float                     # relative to the run's start
    ok: bool = False                  # the stream ended with [DONE] and no error event
    error: str = ""
    status: int = 0                   # HTTP status (0: no answer)
    broken: bool = False              # a 200 stream that then failed or ended without [DONE]
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: list[float] = dataclasses.field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None  # server-reported, when it reports it


def _cached_tokens(usage: dict) -> int | None:
    details = usage.get("prompt_tokens_details") or {}
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        return int(details["cached_tokens"])
    if usage.get("prompt_cache_hit_tokens") is not None:  # DeepSeek's field
        return int(usage["prompt_cache_hit_tokens"])
    return None


async def _read_body_lines(reader: asyncio.StreamReader, chunked: bool):
    """Yields the body's lines as they arrive (chunked or read-until-close)."""
    pending = b""
    while True:
        if chunked:
            size_line = await reader.readline()
            if not size_line:
                break
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                break
            data = await reader.readexactly(size + 2)
            data = data[:-2]
        else:
            data = await reader.read(65536)
            if not data:
                break
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            yield line.rstrip(b"\r")
    if pending:
        yield pending


async def stream_completion(url: str, model: str, prompt: str, max_tokens: int, index: int,
                            start: float, timeout_s: float, ignore_eos: bool) -> Result:
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 80
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0}
    if ignore_eos:
        body["ignore_eos"] = True
    payload = json.dumps(body).encode()
    path = (parts.path.rstrip("/") or "") + "/v1/completions"
    request = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Accept: text/event-stream\r\nContent-Length: {len(payload)}\r\n"
               f"Connection: close\r\n\r\n").encode() + payload
    t0 = time.perf_counter()
    result = Result(index=index, sent_s=t0 - start)
    writer = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            await writer.drain()
            status_line = await reader.readline()
            status = int(status_line.split()[1]) if len(status_line.split()) > 1 else 0
            result.status = status
            headers = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                key, _, value = line.decode("latin-1").partition(":")
                headers[key.strip().lower()] = value.strip()
            chunked = "chunked" in headers.get("transfer-encoding", "").lower()
            if status != 200:
                text = b"".join([chunk async for chunk in _read_body_lines(reader, chunked)])
                result.error = f"HTTP {status}: {text[:300].decode(errors='replace')}"
                return result
            last = None
            done = False
            async for line in _read_body_lines(reader, chunked):
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if "error" in event:
                    result.error = json.dumps(event["error"])[:300]
                    result.broken = True
                    return result
                now = time.perf_counter()
                text = "".join(c.get("text") or "" for c in event.get("choices") or [])
                if text:
                    if result.ttft_s is None:
                        result.ttft_s = now - t0
                    elif last is not None:
                        result.itl_s.append(now - last)
                    last = now
                if event.get("usage"):
                    usage = event["usage"]
                    result.prompt_tokens = int(usage.get("prompt_tokens", 0))
                    result.completion_tokens = int(usage.get("completion_tokens", 0))
                    result.cached_tokens = _cached_tokens(usage)
            result.e2e_s = time.perf_counter() - t0
            if not done:
                result.error = "the stream ended without [DONE]"
                result.broken = True
                return result
            if result.ttft_s is None:
                result.ttft_s = result.e2e_s  # no text (e.g. one EOS token): first byte of the end
            result.ok = True
    except (TimeoutError, asyncio.TimeoutError):
        result.error = f"timed out after {timeout_s} s"
        result.broken = result.status == 200
    except (OSError, ValueError, asyncio.IncompleteReadError) as e:
        result.error = f"{type(e).__name__}: {e}"
        result.broken = result.status == 200
    finally:
        if writer is not None:
            writer.close()
    return result


def served_model(url: str) -> str:
    """The first model of GET /v1/models."""
    import urllib.request
    with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=10) as r:
        return json.load(r)["data"][0]["id"]

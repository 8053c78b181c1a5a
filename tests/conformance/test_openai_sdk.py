"""The official openai SDK against the router: chat completions, streamed and not."""
import openai
import pytest


@pytest.fixture(scope="module")
def client(cluster):
    return openai.OpenAI(base_url=cluster.url + "/v1", api_key="not-needed", max_retries=0)


PROMPT = [{"role": "user", "content": "Once upon a time"}]


def test_non_stream_chat_completion(client, cluster):
    resp = client.chat.completions.create(model=cluster.model, messages=PROMPT, max_tokens=24,
                                          temperature=0)
    choice = resp.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content
    assert choice.finish_reason in ("stop", "length")
    assert resp.object == "chat.completion"
    assert resp.usage.prompt_tokens > 0
    assert 0 < resp.usage.completion_tokens <= 24
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens


def test_stream_equals_non_stream_under_greedy(client, cluster):
    full = client.chat.completions.create(model=cluster.model, messages=PROMPT, max_tokens=24,
                                          temperature=0)
    stream = client.chat.completions.create(model=cluster.model, messages=PROMPT, max_tokens=24,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True})
    text, finish, usage = "", None, None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        if chunk.choices:
            delta = chunk.choices[0].delta
            text += delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage is not None:
            usage = chunk.usage
    assert text == full.choices[0].message.content
    assert finish == full.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == full.usage.completion_tokens


def test_completions_endpoint_through_the_sdk(client, cluster):
    resp = client.completions.create(model=cluster.model, prompt="The little dog", max_tokens=16,
                                     temperature=0)
    assert resp.choices[0].text
    assert resp.usage.completion_tokens <= 16


def test_models_lists_the_served_model(client, cluster):
    assert [m.id for m in client.models.list().data] == [cluster.model]


def test_errors_map_to_sdk_exceptions(client, cluster):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=PROMPT, max_tokens=4)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=cluster.model, messages=[], max_tokens=4)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=cluster.model, messages=PROMPT, max_tokens=100000)

"""`ingot serve`'s /v1/messages driven with the official anthropic SDK."""
import anthropic
import pytest

MSG = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=60)


def test_messages_plain(client):
    r = client.messages.create(model="default", max_tokens=8, system="Be brief.", messages=MSG)
    assert r.type == "message" and r.role == "assistant"
    assert r.stop_reason in ("end_turn", "max_tokens", "stop_sequence")
    assert r.usage.input_tokens > 0 and 0 < r.usage.output_tokens <= 8
    assert all(b.type in ("text", "thinking", "tool_use") for b in r.content)


def test_messages_stream_matches_plain(client):
    plain = client.messages.create(model="default", max_tokens=10, messages=MSG)
    plain_text = "".join(b.text for b in plain.content if b.type == "text")
    kinds = []
    with client.messages.stream(model="default", max_tokens=10, messages=MSG) as s:
        for event in s:
            kinds.append(event.type)
        final = s.get_final_message()
    assert kinds[0] == "message_start"
    assert "message_delta" in kinds and "message_stop" in kinds
    assert "".join(b.text for b in final.content if b.type == "text") == plain_text
    assert final.stop_reason == plain.stop_reason
    assert final.usage.output_tokens == plain.usage.output_tokens


def test_tools_and_tool_results_render(client):
    tools = [{"name": "get_weather", "description": "weather",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    msgs = MSG + [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                     "input": {"city": "Paris"}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]
    r = client.messages.create(model="default", max_tokens=4, messages=msgs, tools=tools)
    assert r.stop_reason in ("end_turn", "max_tokens", "tool_use")
    n = client.messages.count_tokens(model="default", messages=msgs, tools=tools)
    assert n.input_tokens > client.messages.count_tokens(model="default", messages=MSG).input_tokens


def test_errors_have_anthropic_shape(client):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="default", max_tokens=8, messages=[{"role": "wizard", "content": "x"}])
    assert e.value.status_code == 400
    assert e.value.body["type"] == "error" and e.value.body["error"]["type"] == "invalid_request_error"

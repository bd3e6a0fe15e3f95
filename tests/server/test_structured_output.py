"""response_format / text.format: output of a random-weight model is still
valid JSON matching the schema, streamed or not; bad schemas are 400s."""
import json

import jsonschema
import openai
import pytest

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        "pet": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"kind": {"const": "cat"}},
                                             "required": ["kind"], "additionalProperties": False}]},
    },
    "required": ["name", "age", "tags", "pet"],
    "additionalProperties": False,
}
SCHEMAS = [
    PERSON,
    {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 4},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "score": {"type": ["number", "null"]}},
     "required": ["ok"]},
    {"enum": ["yes", "no", 42]},
]
MESSAGES = [{"role": "user", "content": "Describe a person as JSON."}]


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none")


def schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "out", "schema": schema, "strict": True}}


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_chat_json_schema(client, index):
    schema = SCHEMAS[index]
    r = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=60, temperature=0.9, seed=index,
                                       response_format=schema_format(schema))
    text = r.choices[0].message.content
    jsonschema.validate(json.loads(text), schema)
    assert r.choices[0].finish_reason == "stop"


def test_chat_json_schema_streamed_greedy_and_n(client):
    stream = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=50, temperature=0, n=2,
                                            stream=True, response_format=schema_format(PERSON))
    texts = ["", ""]
    for chunk in stream:
        for c in chunk.choices:
            texts[c.index] += c.delta.content or ""
    for t in texts:
        jsonschema.validate(json.loads(t), PERSON)
    # Greedy: both choices are the same text, and the non-streamed request agrees.
    assert texts[0] == texts[1]
    r = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=50, temperature=0,
                                       response_format=schema_format(PERSON))
    assert r.choices[0].message.content == texts[0]


def test_json_object_tight_budget(client):
    # Even with few tokens the text is closed in time.
    for max_tokens in (3, 12, 40):
        r = client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=max_tokens, temperature=1.0,
                                           seed=max_tokens, response_format={"type": "json_object"})
        assert isinstance(json.loads(r.choices[0].message.content), dict)
        assert r.usage.completion_tokens <= max_tokens


def test_completions_and_responses(client):
    r = client.completions.create(model="default", prompt="JSON:", max_tokens=40, temperature=0.8, seed=3,
                                  extra_body={"response_format": schema_format(SCHEMAS[1])})
    jsonschema.validate(json.loads(r.choices[0].text), SCHEMAS[1])
    resp = client.responses.create(model="default", input="Give JSON.", max_output_tokens=60, temperature=0.7,
                                   text={"format": {"type": "json_schema", "name": "p", "schema": PERSON,
                                                    "strict": True}})
    jsonschema.validate(json.loads(resp.output_text), PERSON)
    assert resp.text.format.type == "json_schema"
    events = client.responses.create(model="default", input="Give JSON.", max_output_tokens=30, stream=True,
                                     text={"format": {"type": "json_object"}})
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert isinstance(json.loads(deltas), dict)


@pytest.mark.parametrize("schema,word", [
    ({"type": "string", "pattern": "^a"}, "'pattern'"),
    ({"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}, "'format'"),
    ({"$ref": "#/$defs/x"}, "'$ref'"),
    ({"type": "integer", "minimum": 3}, "'minimum'"),
    ({"anyOf": [{"type": "object"}, {"type": "object", "properties": {"a": {}}}]}, "cannot be told apart"),
    ({"type": "frog"}, "unknown type"),
])
def test_unsupported_schemas_are_400(client, schema, word):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=5,
                                       response_format=schema_format(schema))
    err = e.value.body
    assert word in err["message"]
    assert err["param"] == "response_format.json_schema.schema"


def test_bad_response_format_shapes_are_400(client):
    for rf, param in [({"type": "xml"}, "response_format.type"),
                      ({"type": "json_schema"}, "response_format.json_schema")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="default", messages=MESSAGES, max_tokens=5, response_format=rf)
        assert e.value.body["param"] == param

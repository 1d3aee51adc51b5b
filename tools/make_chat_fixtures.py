#!/usr/bin/env python3
"""Write the chat-template fixtures that orzo's Jinja interpreter is tested against.

Run from anywhere:  python3 tools/make_chat_fixtures.py   (pinned versions: tools/requirements.txt)
Rewrites tests/fixtures/chat/*.json.

Ground truth is HF transformers itself:
  - <model>.json: each conversation goes through PreTrainedTokenizerFast.apply_chat_template(...,
    tokenize=False), the code path transformers uses (message normalization, reasoning aliases,
    special tokens as template variables, its sandboxed jinja2 environment and tojson).
    The templates are referenced by their path under ../shared, never copied.
  - interpreter.json: small templates exercising one construct each, rendered by the same
    compiled environment (transformers.utils.chat_template_utils._compile_jinja_template).
An interpreter case marked "orzo_refuses" is one where orzo throws instead of rendering (a
construct outside the implemented subset). A case where HF raises is recorded as an error: "raise" (the template's raise_exception, with
its message) or the Python exception type.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
from transformers import PreTrainedTokenizerFast
from transformers.utils.chat_template_utils import _compile_jinja_template

REPO = Path(__file__).resolve().parent.parent
SHARED = (REPO / ".." / "shared").resolve()
OUT = REPO / "tests" / "fixtures" / "chat"
TOK = SHARED / "models" / "tokenizers"

UNICODE = "Grüße, 你好, naïve café — 🙂 ½ Ωmega\u00a0nbsp"
LOOKALIKES = "<|im_start|>user\nfake<|im_end|> [INST] x [/INST] <s></s> <|user|><|end|><think></think>"
JINJA_LIKE = "{{ messages[0] }} {% if true %}yes{% endif %} {# note #} {%- raw -%}"

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city — «quoted» \"text\"",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Zürich"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "add", "description": "Add numbers", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}}}},
    },
]


def conv(*pairs):
    return [{"role": r, "content": c} for r, c in pairs]


def common_cases(system=True):
    cases = []
    sys_msg = [("system", "You are a terse assistant.")] if system else []
    cases.append(("single_user", conv(("user", "Hello!")), True, {}))
    cases.append(("single_user_no_prompt", conv(("user", "Hello!")), False, {}))
    cases.append(("system_user", conv(*sys_msg, ("user", "What is 2+2?")), True, {}))
    cases.append(
        ("multi_turn", conv(*sys_msg, ("user", "Hi"), ("assistant", "Hello, how can I help?"), ("user", "Tell me a joke.")), True, {})
    )
    cases.append(("multi_turn_ends_assistant", conv(("user", "Hi"), ("assistant", "Hello there.")), False, {}))
    cases.append(("unicode", conv(("user", UNICODE), ("assistant", UNICODE[::-1]), ("user", "ok")), True, {}))
    cases.append(("empty_user_content", conv(("user", ""),), True, {}))
    cases.append(("special_token_lookalikes", conv(("user", LOOKALIKES), ("assistant", LOOKALIKES), ("user", "?")), True, {}))
    cases.append(("jinja_like_text", conv(("user", JINJA_LIKE), ("assistant", "{%- endfor %}}}"), ("user", "{{")), True, {}))
    cases.append(("whitespace_content", conv(("user", "  padded \n\n"), ("assistant", "\n\tindented\n"), ("user", " ")), True, {}))
    return cases


def qwen_cases(qwen3):
    cases = common_cases()
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}},
        {"type": "function", "function": {"name": "add", "arguments": {"a": 1.5, "b": 2}}},
    ]}
    tool_turns = [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Zürich, and 1.5+2?"},
        call,
        {"role": "tool", "content": "{\"temp\": 21}"},
        {"role": "tool", "content": "3.5"},
        {"role": "assistant", "content": "It is 21 °C; the sum is 3.5."},
        {"role": "user", "content": "Thanks"},
    ]
    cases.append(("tools_list", conv(("user", "What can you do?")), True, {"tools": TOOLS}))
    cases.append(("tools_list_with_system", conv(("system", "Be brief."), ("user", "Hi")), True, {"tools": TOOLS}))
    cases.append(("tool_calls_and_responses", tool_turns, True, {"tools": TOOLS}))
    cases.append(("tool_calls_without_tools_list", tool_turns[1:], False, {}))
    cases.append(("tool_call_string_arguments", [
        {"role": "user", "content": "add"},
        {"role": "assistant", "content": "Calling.", "tool_calls": [{"function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]},
        {"role": "tool", "content": "3"},
    ], True, {}))
    cases.append(("system_in_the_middle", conv(("user", "a"), ("system", "late system"), ("assistant", "b"), ("user", "c")), True, {}))
    cases.append(("content_none_dropped", [{"role": "user", "content": "hi", "name": None}], True, {}))
    if qwen3:
        cases.append(("thinking_disabled", conv(("user", "Quick answer?")), True, {"enable_thinking": False}))
        cases.append(("thinking_enabled", conv(("user", "Quick answer?")), True, {"enable_thinking": True}))
        cases.append(("reasoning_content_last_turn", [
            {"role": "user", "content": "Why?"},
            {"role": "assistant", "content": "Because.", "reasoning_content": "\nLet me think.\n"},
        ], False, {}))
        cases.append(("reasoning_field_alias", [
            {"role": "user", "content": "Why?"},
            {"role": "assistant", "content": "Because.", "reasoning": "aliased reasoning"},
            {"role": "user", "content": "Sure?"},
        ], True, {}))
        cases.append(("think_tags_in_content", [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "<think>\nold thoughts\n</think>\n\nold answer"},
            {"role": "user", "content": "q2"},
            {"role": "assistant", "content": "<think>\nnew thoughts\n</think>\n\nnew answer"},
        ], False, {}))
        cases.append(("multi_step_tool_reasoning", [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "", "reasoning_content": "need tool", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
            {"role": "tool", "content": "cold"},
            {"role": "assistant", "content": "It is cold.", "reasoning_content": "got it"},
        ], False, {"tools": TOOLS}))
        cases.append(("user_tool_response_lookalike", [
            {"role": "user", "content": "real question"},
            {"role": "assistant", "content": "<think>t</think>a"},
            {"role": "user", "content": "<tool_response>x</tool_response>"},
            {"role": "assistant", "content": "<think>u</think>b"},
        ], True, {"enable_thinking": False}))
    return cases


def phi3_cases():
    cases = common_cases()
    cases.append(("system_is_ignored", conv(("system", "sys"), ("user", "u")), True, {}))
    return cases


def mistral_cases():
    sample = json.loads((TOK / "mistral-v1" / "chat_sample_no_tools" / "sample.json").read_text())
    cases = [c for c in common_cases(system=True) if c[0] != "multi_turn_ends_assistant"]
    cases.append(("sample_json", sample["messages"], False, {"tools": sample["tools"]}))
    cases.append(("multi_turn_ends_assistant", conv(("user", "Hi"), ("assistant", "Hello there.")), False, {}))
    cases.append(("systems_merged", conv(("system", "one"), ("user", "u1"), ("system", "two"), ("assistant", "a1"), ("user", "u2")), False, {}))
    cases.append(("consecutive_users_merged", conv(("user", "part 1"), ("user", "part 2"), ("assistant", "ok"), ("assistant", "more"), ("user", "u")), False, {}))
    cases.append(("text_chunks", [
        {"role": "system", "content": [{"type": "text", "text": "chunked system"}]},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
    ], False, {}))
    cases.append(("error_starts_with_assistant", conv(("assistant", "a"), ("user", "u")), False, {}))
    cases.append(("error_tool_role", conv(("user", "u"), ("tool", "t")), False, {}))
    cases.append(("error_empty_assistant", conv(("user", "u"), ("assistant", "")), False, {}))
    cases.append(("error_image_chunk", [{"role": "user", "content": [{"type": "image", "url": "x"}]}], False, {}))
    cases.append(("error_system_image_chunk", [{"role": "system", "content": [{"type": "image"}]}, {"role": "user", "content": "u"}], False, {}))
    return cases


def render_cases(tok, template, cases):
    tok.chat_template = template
    out = []
    for name, messages, agp, extra in cases:
        extra = dict(extra)
        tools = extra.pop("tools", None)
        case = {"name": name, "messages": messages, "add_generation_prompt": agp}
        if tools is not None:
            case["tools"] = tools
        if extra:
            case["extra"] = extra
        try:
            case["expected"] = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=False, **extra)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = "raise" if type(e) is jinja2.exceptions.TemplateError else type(e).__name__
            case["message"] = str(e)
        out.append(case)
    return out


def model_fixture(name, template_ref, template, tokenizer_file, bos, eos, cases):
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), bos_token=bos, eos_token=eos)
    special = {k: v for k, v in tok.special_tokens_map.items() if isinstance(v, str)}
    fixture = {
        "template": template_ref,
        "special_tokens": special,
        "cases": render_cases(tok, template, cases),
    }
    (OUT / f"{name}.json").write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n")
    print(f"{name}: {len(fixture['cases'])} cases ({sum('error' in c for c in fixture['cases'])} errors)")


# ---- interpreter cases: (template, context) ----

LIST_CTX = {"xs": [3, 1, 2], "s": "  Hello, World  ", "d": {"b": 1, "a": [1, 2], "c": {"x": None}}, "n": None, "t": True, "f": 0.5}
INTERPRETER = [
    # output and literals
    ("{{ 1 }}|{{ -1 }}|{{ 1.0 }}|{{ 1.5e3 }}|{{ 1e20 }}|{{ 1e-5 }}|{{ 0.1 + 0.2 }}|{{ 1_000 }}", {}),
    ("{{ none }}|{{ None }}|{{ true }}|{{ False }}|{{ 'a' 'b' }}|{{ \"q\\\"\\n\\t\\x41\\u00e9\\\\\" }}", {}),
    ("{{ [1, 'a', none, true, 2.5, [], {}] }}|{{ {'k': 'v', 'n': [1]} }}|{{ (1,) }}|{{ (1, 'b') }}|{{ () }}", {}),
    ("{{ \"it's\" }}|{{ [\"it's\", 'say \"hi\"', 'both \\' \"', '\\n\\x01é'] }}", {}),
    ("{{ 1, 2 }}|{{ xs }}|{{ d }}|{{ n }}|{{ t }}|{{ f }}", LIST_CTX),
    # arithmetic
    ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ -2 ** 2 }}", {}),
    ("{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 + true }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 3 * 'x' }} {{ 'a' ~ 1 ~ none ~ [1] }} {{ 1 + 2 * 3 - 4 }}", {}),
    ("{{ 'a' + 'b' }} {{ [1] + [2] }} {{ 10 - 2.5 }} {{ +3 }} {{ -(1) }}", {}),
    # comparisons, logic
    ("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 'a' != 'a' }} {{ none == none }}", {}),
    ("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'a' in {'a': 1} }} {{ 'z' not in 'abc' }} {{ not 1 in [1] }}", {}),
    ("{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 1 }}|{{ [] or [] }}|{{ none or 0 }}|{{ not none }}|{{ not 'a' }}", {}),
    ("{% for v in [0, 0.0, '', [], {}, none, 1, 'a', [0], {'a': 0}, true, false] %}{{ 'T' if v else 'F' }}{% endfor %}", {}),
    ("{{ 'yes' if true }}|{{ 'yes' if false }}|{{ 'a' if false else 'b' if true else 'c' }}", {}),
    # undefined semantics
    ("[{{ missing }}]{{ missing is defined }}{{ missing is undefined }}{{ missing | length }}{{ missing | default('dflt') }}", {}),
    ("{% for x in missing %}x{% else %}empty{% endfor %}{{ 'a' ~ missing ~ 'b' }}{{ missing == missing }}{{ not missing }}", {}),
    ("{{ d.nokey }}|{{ d['nokey'] }}|{{ xs[10] }}|{{ n.attr }}|{{ d.nokey is defined }}|{{ (d.nokey or 'alt') }}", LIST_CTX),
    ("{{ missing.attr }}", {}),
    ("{{ missing['k'] }}", {}),
    ("{{ missing + 1 }}", {}),
    ("{{ missing() }}", {}),
    ("{{ 'x' + 1 }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{{ 'a' < 1 }}", {}),
    ("{{ n | tojson }}{{ missing | tojson }}", LIST_CTX),
    # subscripts and slicing
    ("{{ xs[0] }}{{ xs[-1] }}{{ xs[::-1] }}{{ xs[1:] }}{{ xs[:1] }}{{ xs[::2] }}{{ xs[-2:] }}{{ xs[5:] }}{{ xs[1:-1] }}", LIST_CTX),
    ("{{ 'héllo'[1] }}{{ 'héllo'[::-1] }}{{ 'héllo'[1:3] }}{{ 'abcdef'[-3::-2] }}{{ d.a.0 }}{{ d['a'][1] }}{{ d.c.x }}", LIST_CTX),
    ("{{ d.items }}", LIST_CTX, "prints a bound method's repr"),
    # string methods
    ("[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\u3000wide\u00a0'.strip() }}]", LIST_CTX),
    ("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ ''.split() }}{{ ''.split(',') }}", {}),
    ("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }}{{ 'Hello'.upper() }}{{ 'Hello'.lower() }}", {}),
    ("{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'aaa'.replace('a', 'b', 2) }}{{ 'héllo'.find('l') }}{{ 'abc'.find('z') }}{{ 'a-b'.count('-') }}", {}),
    ("{{ '-'.join(['a', 'b']) }}{{ 'prefix_x'.removeprefix('prefix_') }}{{ '   '.isspace() }}{{ 'abc'.foo is defined }}", {}),
    ("{{ 'x'.zfill(3) }}", {}, "str.zfill is not implemented"),
    ("{{ 'Straße'.upper() }}", {}, "case mapping beyond ASCII is not implemented"),
    # filters
    ("{{ s | trim }}|{{ 'xxhixx' | trim('x') }}|{{ xs | length }}|{{ 'héllo' | length }}|{{ d | length }}|{{ xs | join(', ') }}|{{ xs | join }}", LIST_CTX),
    ("{{ 'Hello' | upper }}{{ 'Hello' | lower }}{{ 'hello' | capitalize }}{{ xs | first }}{{ xs | last }}{{ 'abc' | first }}{{ [] | first is defined }}", LIST_CTX),
    ("{{ d | items | list }}{{ d.items() | list }}{{ d.keys() | list }}{{ d.values() | list }}{{ d.get('b') }}{{ d.get('zz', 'no') }}{{ d.get('zz') }}", LIST_CTX),
    ("{{ xs | string }}{{ 42 | string }}{{ '12' | int + 1 }}{{ '1.9' | int }}{{ 'x' | int }}{{ 'x' | int(7) }}{{ 3.9 | int }}{{ '2.5' | float }}{{ true | int }}", LIST_CTX),
    ("{{ xs | list }}{{ 'ab' | list }}{{ d | list }}{{ xs | reverse | list }}{{ 'abc' | reverse }}{{ -3 | abs }}{{ 'a<b' | e }}", LIST_CTX),
    ("{{ 'aXbX' | replace('X', '-') }}{{ none | default('d') }}{{ '' | default('d', true) }}{{ 0 | d('z', boolean=true) }}{{ n | default('x') }}", LIST_CTX),
    ("{{ [{'n': 'a', 'k': 1}, {'n': 'b'}] | map(attribute='n') | join(',') }}{{ ['a', 'B'] | map('upper') | list }}{{ [{'n': 'a'}, {}] | map(attribute='n', default='?') | list }}", {}),
    ("{{ [{'t': 'text', 'v': 1}, {'t': 'img', 'v': 2}] | selectattr('t', 'equalto', 'text') | list }}{{ [{'a': 1}, {'a': 0}, {}] | selectattr('a') | list }}{{ [{'a': 1}, {'a': 0}] | rejectattr('a') | list }}", {}),
    ("{{ [1, 2, 3, 4] | select('odd') | list }}{{ [1, 2, 3, 4] | reject('even') | list }}{{ [1, none, 2] | select('none') | list }}{{ [1, 5] | select('gt', 2) | list }}", {}),
    ("{{ [1, 'a'] | join('|') }}{{ [{'n': 1}, {'n': 2}] | join(',', attribute='n') }}{{ 'x' | safe }}", {}),
    # tojson as HF defines it
    ("{{ d | tojson }}|{{ 'é\"\\n<>&' | tojson }}|{{ [1.0, 2.5, none, true] | tojson }}|{{ {'z': 1, 'a': 2} | tojson(sort_keys=true) }}", LIST_CTX),
    ("{{ d | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}|{{ {'a': {}} | tojson(indent=1) }}|{{ 'é🙂' | tojson(ensure_ascii=true) }}|{{ xs | tojson(separators=(',', ':')) }}", LIST_CTX),
    ("{{ {'k': 'v'} | tojson(indent='\\t') }}{{ 1e300 * 1e10 }}", {}),
    # tests
    ("{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ xs is sequence }}{{ 'a' is sequence }}{{ d is mapping }}{{ xs is mapping }}", LIST_CTX),
    ("{{ d is iterable }}{{ 1 is iterable }}{{ n is none }}{{ 1 is not none }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ true is boolean }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}", LIST_CTX),
    ("{{ 1 is eq 1 }}{{ 1 is equalto 2 }}{{ 2 is gt 1 }}{{ 'a' is in 'abc' }}{{ n is sameas none }}{{ t is sameas true }}{{ missing is sequence }}{{ missing is iterable }}", LIST_CTX),
    # control flow and loops
    ("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{% endfor %}", LIST_CTX),
    ("{% for x in xs %}{{ loop.cycle('a', 'b') }}{{ loop.depth }}{{ loop.depth0 }}{% endfor %}", LIST_CTX),
    ("{% for x in xs %}[{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.previtem is defined }}]{% endfor %}", LIST_CTX),
    ("{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", LIST_CTX),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for c in 'héy' %}<{{ c }}>{% endfor %}", LIST_CTX),
    ("{% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("{% for row in [[1, 2], [3]] %}{% for c in row %}{{ loop.index }}{{ c }}{% endfor %}/{{ loop.index }};{% endfor %}", {}),
    ("{% for x in [] %}a{% else %}b{% endfor %}{% for x in [1] if false %}a{% else %}c{% endfor %}", {}),
    ("{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}{% if none %}x{% else %}y{% endif %}", {}),
    # scoping
    ("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% set ns = namespace(total=0, items=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.total }}{{ ns.items }}", {}),
    ("{% if true %}{% set y = 'in-if' %}{% endif %}{{ y }}{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = (3, 4) %}{% set p, q = t %}{{ p + q }}", {}),
    ("{% set block %}inner {{ 1 + 1 }}{% endset %}[{{ block }}]", {}),
    ("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }} {{ greet() }}", {}),
    ("{% macro outer() %}{{ top }}{% endmacro %}{% set top = 'seen' %}{{ outer() }}", {}),
    ("{% set x = 5 %}{{ x }}{% set x %}{% endset %}[{{ x }}]", {}),
    ("{% set ns = namespace(a=1) %}{% set ns.b = 2 %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}", {}),
    ("{% set s = 'str' %}{% set s.attr = 1 %}", {}),
    ("{% for m in ['a', 'b'] %}<{% generation %}{{ m }}{% endgeneration %}>{% endfor %}", {}),
    ("{{ range(3) | list }}{{ range(1, 7, 2) | list }}{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}{{ dict(a=1, b='x') }}", {}),
    ("{{ raise_exception('custom failure: ' ~ 42) }}", {}),
    # Python types behind jinja2's values: dict views, generators from lazy filters, compile-time folding
    ("{{ d.keys() }}|{{ d.values() }}|{{ d.items() }}|{{ d.items() | length }}|{{ d.keys()[0] }}|{{ d.keys() is sequence }}", LIST_CTX),
    ("{{ xs | map('string') | list }}|{{ xs | select('odd') | first }}|{{ [] | select is true }}|{{ [] | select | list is true }}", LIST_CTX),
    ("{{ xs | map('string') }}", LIST_CTX, "prints a generator's repr"),
    ("{{ xs | select | length }}", LIST_CTX),
    ("{{ (10)[:2] }}|{{ (-1)[::-1] is defined }}", {}),
    ("{% set x = (2.0)[:2] %}", {}),
    ("{{ f[1:] }}", LIST_CTX),
    ("{{ missing | int }}", {}),
    ("{{ missing | string }}|{{ missing | upper }}|{{ missing | join }}|{{ missing | list }}|{{ missing | reverse | list }}|{{ n | int }}", LIST_CTX),
    ("{{ 1 is defined(2) }}", {}),
    ("{{ d[[1]] }}|{{ xs['count'] is defined }}|{{ (1, 2).index(2) }}", LIST_CTX),
    # whitespace control (trim_blocks and lstrip_blocks are on, as HF sets them)
    ("a\n  {% if true %}\n    b\n  {% endif %}\nc\n", {}),
    ("a  {%- if true -%}  b  {%- endif -%}  c", {}),
    ("x {{- ' y ' -}} z\n{{ 'w' }}\n", {}),
    ("line1\n    {# comment #}\nline2\n{#- trimmed -#}\n  line3", {}),
    ("  {%+ if true %}kept indent{% endif %}\n{% if true +%}\nkeptnewline{% endif %}", {}),
    ("{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n", {}),
    ("\t{% set x = 1 %}\n\t{{ x }}\t{% if x %}\t\n{% endif %}", {}),
    ("a\r\nb\r{% if true %}\r\nc{% endif %}\n\n", {}),
    ("{{ 'a' }}   {% if true %}x{% endif %}", {}),
    # syntax jinja2 refuses
    ("{% if true %}unclosed", {}),
    ("{{ 1 + }}", {}),
    ("{% endfor %}", {}),
    ("{% for x in xs %}{% break %}{% endfor %}{% break %}", LIST_CTX),
    ("{{ xs | nosuchfilter }}", LIST_CTX),
]


def interpreter_fixture():
    cases = []
    for template, context, *refused in INTERPRETER:
        case = {"template": template, "context": context}
        if refused:
            # orzo refuses these on purpose (ChatTemplateError naming the construct), rather than
            # render them; the test checks that it does.
            case["orzo_refuses"] = refused[0]
        try:
            case["expected"] = _compile_jinja_template(template).render(**context)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = "raise" if type(e) is jinja2.exceptions.TemplateError else type(e).__name__
            case["message"] = str(e)
        except Exception as e:  # noqa: BLE001 - any Python failure is an expected error for the C++ side
            case["error"] = type(e).__name__
            case["message"] = str(e)
        if refused:
            case.pop("expected", None)  # may hold a memory address, which would make the file change every run
        cases.append(case)
    (OUT / "interpreter.json").write_text(json.dumps({"cases": cases}, ensure_ascii=False, indent=1) + "\n")
    print(f"interpreter: {len(cases)} cases ({sum('error' in c for c in cases)} errors)")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    qwen25 = json.loads((TOK / "qwen2.5" / "tokenizer_config.json").read_text())["chat_template"]
    qwen3 = json.loads((TOK / "qwen3" / "tokenizer_config.json").read_text())["chat_template"]
    phi3 = json.loads((TOK / "phi-3" / "tokenizer_config.json").read_text())["chat_template"]
    mistral = (TOK / "mistral-v1" / "chat_template_v1_spm.jinja").read_text()
    cfg = "models/tokenizers/{}/tokenizer_config.json"
    # Qwen2.5 ships no tokenizer.json here; its template only reads messages and tools, so
    # Qwen3's tokenizer (same special tokens) carries it through apply_chat_template.
    model_fixture("qwen2.5", {"file": cfg.format("qwen2.5"), "json_key": "chat_template"}, qwen25,
                  TOK / "qwen3" / "tokenizer.json", None, "<|im_end|>", qwen_cases(False))
    model_fixture("qwen3", {"file": cfg.format("qwen3"), "json_key": "chat_template"}, qwen3,
                  TOK / "qwen3" / "tokenizer.json", None, "<|im_end|>", qwen_cases(True))
    model_fixture("phi-3", {"file": cfg.format("phi-3"), "json_key": "chat_template",
                            "same_as_gguf": "models/vocab/ggml-vocab-phi-3.gguf"}, phi3,
                  TOK / "phi-3" / "tokenizer.json", "<s>", "<|endoftext|>", phi3_cases())
    # The Mistral v1 template needs <s>/</s>; phi-3's tokenizer.json has both as tokens.
    model_fixture("mistral-v1", {"file": "models/tokenizers/mistral-v1/chat_template_v1_spm.jinja",
                                 "sample_text": "models/tokenizers/mistral-v1/chat_sample_no_tools/text_v1.txt"}, mistral,
                  TOK / "phi-3" / "tokenizer.json", "<s>", "</s>", mistral_cases())
    interpreter_fixture()


if __name__ == "__main__":
    main()

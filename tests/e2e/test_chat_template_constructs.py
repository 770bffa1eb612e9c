"""Jinja constructs beyond the common ones, rendered by exactly and by jinja2
set up as Hugging Face sets it up (test_chat_template.hf_environment): dict
literals with keys that are not strings (and `dict(...)`), tojson's arguments,
{% call %} blocks with caller(args), recursive for loops with loop(...) and
loop.depth, the filters groupby, striptags, wordcount, wordwrap, urlencode,
xmlattr and pprint, str.casefold, and the globals joiner, cycler and
namespace. Each renders the same text as jinja2, or fails on both sides.

Where jinja2's result rests on what exactly does not reproduce (HTML
entities beyond the common ones, hyphen-aware wrapping, pprint's multi-line
layout, an object's address), exactly refuses with an error naming the
construct. A call block, a recursive loop or a macro that recurses without
end stops at the evaluation depth limit (jinja_limits.h) with an error.
"""

from __future__ import annotations

import pytest

from test_chat_template import reference_render, render_snippets

CONTEXT = {"messages": [{"role": "user", "content": "Hi", "n": 2}, {"role": "Assistant", "content": "Yo", "n": 5},
                        {"role": "user", "content": "ok", "n": 1}, {"role": "assistant", "content": "k"}],
           "tree": [{"name": "a", "children": [{"name": "b", "children": []},
                                               {"name": "c", "children": [{"name": "d", "children": []}]}]},
                    {"name": "e", "children": []}],
           "bos_token": "<s>"}

DICT_KEYS = {
    "int_keys": "{% set d = {1: 'one', 2: 'two'} %}{{ d[1] }}{{ d[2] }}{{ d }}{{ d[3] is defined }}",
    "bool_keys": "{% set d = {true: 'y', false: 'n'} %}{{ d[true] }}{{ d[false] }}{{ d[1] }}{{ d[0] }}{{ d }}",
    "int_bool_same_key": "{{ {1: 'a', true: 'b', 1.0: 'c'} }}{{ {true: 'a', 1: 'b'} }}{{ {0: 'z', false: 'f'} }}",
    "none_tuple_float_keys": "{{ {none: 1, (1, 2): 'x', 2.5: 3} }}{{ {(1, 2): 'x'}[(1, 2)] }}{{ {none: 'n'}[none] }}",
    "mixed_keys": "{% set d = {'a': 1, 2: 'b', none: 'c'} %}{{ d['a'] }}{{ d[2] }}{{ d.a }}{{ d }}",
    "insertion_order": "{% set d = {3: 'c', 1: 'a', 2: 'b', 1: 'A'} %}{{ d | list }}{{ d.keys() | list }}{{ d.values() | list }}",
    "items_loop": "{% for k, v in {1: 'a', none: 'b', (1,): 'c'}.items() %}{{ k }}={{ v }};{% endfor %}",
    "unhashable_subscript": "[{{ {1: 2}[[1]] }}]",
    "in_operator": "{{ 1 in {1: 2} }}{{ 1.0 in {1: 2} }}{{ true in {1: 2} }}{{ '1' in {1: 2} }}{{ 2 not in {1: 2} }}",
    "get_method": "{{ {1: 'x'}.get(1) }}{{ {1: 'x'}.get(2, 'd') }}{{ {1: 'x'}.get(2) }}",
    "missing_key": "[{{ {1: 'x'}[2] }}]",
    "length_and_iterate": "{{ {1: 'a', 2: 'b'} | length }}{% for k in {5: 0, 6: 0} %}{{ k * 2 }}{% endfor %}",
    "dictsort_int_keys": "{{ {2: 'b', 1: 'a', 3: 'c'} | dictsort }}{{ {2: 'b', 1: 'a'} | dictsort(reverse=true) }}",
    "items_filter": "{{ {1: 'a', 2: 'b'} | items | list }}",
    "dict_call": "{{ dict({1: 2}, a=3) }}{{ dict([(1, 2), ('b', 3)]) }}{{ dict() }}{{ dict(a=1) }}",
    "dict_equality": "{{ {1: 'a'} == {1: 'a'} }}{{ {1: 'a'} == {'1': 'a'} }}{{ {1: 'a'} == {true: 'a'} }}",
    "empty_dict": "{{ {} }}{{ {} | tojson }}{{ {} | length }}",
    "tojson_int_keys": "{{ {1: 'a', 'x': 2} | tojson }}{{ {1: true, false: none, 2.5: 'f', none: 0} | tojson }}",
    "tojson_indent": "{{ {1: [1, 2], 'k': {}} | tojson(indent=2) }}|{{ [] | tojson(indent=2) }}|{{ {'a': [1]} | tojson(indent='--') }}",
    "tojson_sort_keys": "{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}{{ {3: 'c', 1: 'a', true: 'b'} | tojson(sort_keys=true) }}",
    "tojson_ensure_ascii": "{{ {'é': 'ü 😀'} | tojson(ensure_ascii=true) }}{{ 'ñ' | tojson }}",
    "tojson_separators": "{{ {'a': [1, 2]} | tojson(separators=(',', ':')) }}{{ {'a': 1} | tojson(indent=1, separators=(';', '=')) }}",
}

DICT_KEY_ERRORS = {
    "unhashable_list_key": "{{ {[1]: 2} }}",
    "unhashable_dict_key": "{{ {{}: 2} }}",
    "unhashable_get": "{{ {1: 2}.get([1]) }}",
    "tojson_tuple_key": "{{ {(1, 2): 'a'} | tojson }}",
    "tojson_sort_mixed": "{{ {1: 'a', 'x': 2} | tojson(sort_keys=true) }}",
    "tojson_sort_none": "{{ {none: 1, 2: 3} | tojson(sort_keys=true) }}",
    "dict_call_not_pairs": "{{ dict([1, 2]) }}",
}

CALL_BLOCKS = {
    "call_plain": "{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}",
    "call_with_args": "{% macro w(x) %}{% for m in messages %}{{ caller(m, loop.index) }}{% endfor %}{{ x }}{% endmacro %}"
                      "{% set y = 'Y' %}{% call(m, i, sep='-') w('end') %}{{ i }}{{ sep }}{{ m.role }}{{ y }};{% endcall %}",
    "call_keyword_args": "{% macro w() %}{{ caller(b=2, a=1) }}{% endmacro %}{% call(a, b) w() %}{{ a }}{{ b }}{% endcall %}",
    "call_nested": "{% macro w(t) %}{{ t }}({{ caller() }}){% endmacro %}"
                   "{% call w('o') %}{% call w('i') %}core{% endcall %}{% endcall %}",
    "call_twice": "{% macro w() %}{{ caller() }}|{{ caller() }}{% endmacro %}{% call w() %}{{ bos_token }}{% endcall %}",
    "call_sees_loop": "{% macro w() %}[{{ caller() }}]{% endmacro %}{% for m in messages %}{% call w() %}{{ m.role }}{{ loop.index }}{% endcall %}{% endfor %}",
    "call_empty_body": "{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}{% endcall %}",
    "call_varargs": "{% macro w() %}[{{ caller(1, 2, 3) }}]{% endmacro %}{% call(a) w() %}{{ a }}{{ varargs }}{% endcall %}",
    "call_macro_args": "{% macro w(a, b='B') %}{{ a }}{{ b }}{{ caller() }}{% endmacro %}{% call w('A', b='C') %}!{% endcall %}",
    "call_caller_is_callable": "{% macro w() %}{{ caller is defined }}{% endmacro %}{% call w() %}{% endcall %}{{ w() }}",
    "call_whitespace": "{% macro w() %}\n  {{ caller() }}\n{% endmacro %}\n{% call w() %}\n  body\n{% endcall %}\nend",
}

CALL_ERRORS = {
    "call_without_caller": "{% macro w() %}x{% endmacro %}{% call w() %}in{% endcall %}",
    "caller_not_defined": "{% macro w() %}{{ caller() }}{% endmacro %}{{ w() }}",
    "caller_too_many_args": "{% macro w() %}[{{ caller(1, 2) }}]{% endmacro %}{% call(a) w() %}{{ a }}{% endcall %}",
}

RECURSIVE_LOOPS = {
    "recursive_lists": "{% for x in [[1,[2]],[3]] recursive %}[{% if x is iterable %}{{ loop(x) }}{% else %}{{ x }}{% endif %}]{% endfor %}",
    "recursive_depth": "{% for x in [1, [2, [3, []]]] recursive %}{{ loop.depth }}{{ loop.depth0 }}:"
                       "{% if x is iterable %}({{ loop(x) }}){% else %}{{ x }}{% endif %};{% endfor %}",
    "recursive_tree": "{% for node in tree recursive %}{{ node.name }}{{ loop.index }}/{{ loop.length }}@{{ loop.depth }}"
                      "{% if node.children %}<{{ loop(node.children) }}>{% endif %}{% endfor %}",
    "recursive_else": "{% for x in [[], [1]] recursive %}{% if x is iterable %}{{ loop(x) }}{% else %}{{ x }}{% endif %}{% else %}E{% endfor %}",
    "recursive_filter": "{% for x in [1, [2, 3], 4] if x != 3 recursive %}{% if x is iterable %}({{ loop(x) }}){% else %}{{ x }}{% endif %}{% endfor %}",
    "recursive_nested_loops": "{% for node in tree recursive %}{% for i in range(2) %}{{ node.name }}{{ i }}{{ loop.depth }}{% endfor %}"
                              "{{ loop.depth }}{% if node.children %}[{{ loop(node.children) }}]{% endif %}{% endfor %}",
    "recursive_break": "{% for x in [1, [2, 3, 4], 5] recursive %}{% if x == 3 %}{% break %}{% endif %}"
                       "{% if x is iterable %}({{ loop(x) }}){% else %}{{ x }}{% endif %}{% endfor %}",
    "recursive_loop_vars": "{% for x in [[1, 2], 3] recursive %}{{ loop.first }}{{ loop.last }}{{ loop.revindex }}"
                           "{% if x is iterable %}{{ loop(x) }}{% endif %}{% endfor %}",
    "plain_loop_depth": "{% for x in [1] %}{{ loop.depth }}{{ loop.depth0 }}{% for y in [2] %}{{ loop.depth }}{% endfor %}{% endfor %}",
    "recursive_empty": "{% for x in [] recursive %}{{ loop(x) }}{% endfor %}[]",
}

FILTERS = {
    "groupby": "{% for g in messages | groupby('role') %}{{ g.grouper }}:{{ g.list | length }};{% endfor %}",
    "groupby_unpack": "{% for role, items in messages | groupby('role') %}{{ role }}={{ items | map(attribute='content') | join(',') }};{% endfor %}",
    "groupby_case_sensitive": "{% for g in messages | groupby('role', case_sensitive=true) %}{{ g.grouper }}:{{ g.list | length }};{% endfor %}",
    "groupby_mixed_case": "{{ [{'a': 'X'}, {'a': 'x'}, {'a': 'Y'}, {'a': 'b'}] | groupby('a') }}",
    "groupby_default": "{% for k, items in messages | groupby('n', default=0) %}{{ k }}={{ items | length }};{% endfor %}",
    "groupby_default_string": "{% for k, items in [{'a': 'X'}, {'a': 'x'}, {'b': 1}] | groupby('a', default='x') %}{{ k }}={{ items | length }};{% endfor %}",
    "groupby_missing_single": "{{ [{'b': 1}] | groupby('a') }}",
    "groupby_empty": "{{ [] | groupby('a') }}{% for g in [] | groupby('a') %}x{% else %}none{% endfor %}",
    "groupby_dotted": "{{ [{'a': {'b': 2}}, {'a': {'b': 1}}, {'a': {'b': 2}}] | groupby('a.b') | map(attribute='grouper') | list }}",
    "groupby_index": "{{ [[2, 'x'], [1, 'y'], [2, 'z']] | groupby(0) }}",
    "groupby_tuple_print": "{{ (messages | groupby('role'))[0] }}{{ (messages | groupby('role'))[0][0] }}",
    "striptags": "{{ '<b>hi</b>  there <!-- c --> &amp; &lt;x&gt; &#65;&#x42; &quot;q&quot; R&D' | striptags }}",
    "striptags_edges": "{{ 'a <b' | striptags }}|{{ '' | striptags }}|{{ '  a\n\tb  ' | striptags }}|{{ '<!-- open' | striptags }}|{{ 42 | striptags }}",
    "wordcount": "{{ 'a b  c' | wordcount }}{{ 'héllo wörld_x 3.5' | wordcount }}{{ '' | wordcount }}{{ 'don\\'t stop' | wordcount }}",
    "wordwrap": "{{ 'aaa bbb ccc' | wordwrap(5) }}",
    "wordwrap_args": "{{ 'The quick brown fox jumps over the lazy dog' | wordwrap(10, wrapstring='|') }}|"
                     "{{ 'abcdefghijklmno pq' | wordwrap(4) }}|{{ 'abcdefghij x' | wordwrap(4, false) }}|"
                     "{{ 'a\n\nb  c\n  d' | wordwrap(3) }}|{{ '' | wordwrap }}|{{ 'well-known' | wordwrap(4, break_on_hyphens=false) }}",
    "wordwrap_default_width": "{{ ('word ' * 30) | wordwrap }}",
    "urlencode": "{{ 'a b&c/d é?' | urlencode }}|{{ {'a b': 'c/d', 1: none} | urlencode }}|"
                 "{{ [('x', 1), ('y', 'z&')] | urlencode }}|{{ 42 | urlencode }}|{{ '' | urlencode }}",
    "xmlattr": "{{ {'a': 'b', 'c': none, 'd': x, 'e': '<\"&>', 'f': 3} | xmlattr }}|{{ {'a': 1} | xmlattr(false) }}|{{ {} | xmlattr }}",
    "xmlattr_safe": "{{ {'a': '<b>' | safe} | xmlattr }}",
    "pprint": "{{ [1, 'a'] | pprint }}{{ {'b': 1, 'a': [1, (2,)], 1: none} | pprint }}{{ 'x\ny' | pprint }}"
              "{{ 1.5 | pprint }}{{ {true: 1, 2: 3} | pprint }}{{ none | pprint }}{{ {} | pprint }}{{ (range(100) | list | length) | pprint }}",
    "pprint_nested_sorted": "{{ {'z': {'y': 1, 'x': 2}, 'a': [{'c': 1, 'b': 2}]} | pprint }}",
    "casefold": "{{ 'ß ΣΑΣ ς µ Hello'.casefold() }}{{ 'ABC'.casefold() == 'abc' }}{{ ''.casefold() }}",
}

FILTER_ERRORS = {
    "groupby_missing_many": "{{ [{'b': 1}, {'b': 2}] | groupby('a') }}",
    "groupby_mixed_types": "{{ [{'a': 1}, {'a': 'x'}] | groupby('a') }}",
    "xmlattr_bad_key": "{{ {'a b': 1} | xmlattr }}",
    "xmlattr_int_key": "{{ {1: 1} | xmlattr }}",
    "wordwrap_zero": "{{ 'a' | wordwrap(0) }}",
}

GLOBALS = {
    "joiner": "{% set j = joiner(', ') %}{% for m in messages %}{{ j() }}{{ m.role }}{% endfor %}",
    "joiner_default": "{% set k = joiner() %}[{{ k() }}][{{ k() }}][{{ k() }}]",
    "cycler": "{% set c = cycler('x', 'y') %}{{ c.current }}{{ c.next() }}{{ c.current }}{{ c.next() }}{{ c.next() }}"
              "{% set _ = c.reset() %}{{ c.current }}{{ c.next() }}",
    "cycler_in_loop": "{% set c = cycler('odd', 'even') %}{% for m in messages %}{{ c.next() }} {% endfor %}",
    "cycler_one": "{% set c = cycler(1) %}{{ c.next() }}{{ c.next() }}{{ c.current }}",
    "namespace": "{% set ns = namespace(a=1, b=[]) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}{{ ns.b }}"
                 "{% set n2 = namespace({'x': 1}, y=2) %}{{ n2.x }}{{ n2.y }}{{ n2.z is defined }}",
    "namespace_in_loop": "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% if m.role == 'user' %}"
                         "{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.n }}",
}

GLOBAL_ERRORS = {
    "cycler_empty": "{% set c = cycler() %}",
}

RENDERED = {**DICT_KEYS, **CALL_BLOCKS, **RECURSIVE_LOOPS, **FILTERS, **GLOBALS}
ERRORS = {**DICT_KEY_ERRORS, **CALL_ERRORS, **FILTER_ERRORS, **GLOBAL_ERRORS}

# jinja2 renders these; exactly refuses them with an error naming the construct.
REFUSED = {
    "striptags_rare_entity": ("{{ '&copy; 2024' | striptags }}", "striptags"),
    "wordwrap_hyphens": ("{{ 'well-known' | wordwrap(4) }}", "wordwrap"),
    "pprint_long": ("{{ range(40) | list | pprint }}", "pprint"),
    "print_cycler": ("{% set c = cycler(1) %}{{ c }}", "Cycler"),
    "print_recursive_loop": ("{% for x in [1] recursive %}{{ loop }}{% endfor %}", "LoopContext"),
    "loop_changed": ("{% for x in [1, 1, 2] %}{{ loop.changed(x) }}{% endfor %}", "changed"),
    "filesizeformat": ("{{ 1000 | filesizeformat }}", "filesizeformat"),
    "caller_kept_past_block": ("{% set ns = namespace() %}{% macro w() %}{% set ns.c = caller %}{% endmacro %}"
                               "{% call w() %}x{% endcall %}{{ ns.c() }}", "caller()"),
}

# Recursion without end: stopped at the evaluation depth limit.
UNBOUNDED = {
    "recursive_loop_without_end": "{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}",
    "call_block_without_end": "{% macro w() %}{{ caller() }}{% endmacro %}"
                              "{% macro r(n) %}{% call w() %}{{ r(n + 1) }}{% endcall %}{% endmacro %}{{ r(0) }}",
    "macro_calling_itself_in_its_call_block": "{% macro w() %}{% call w() %}{% endcall %}{{ caller() }}{% endmacro %}"
                                              "{% call w() %}{% endcall %}",
}


def render_all(tool, tmp_path, snippets: dict) -> dict:
    return render_snippets(tool, tmp_path, snippets, CONTEXT)


@pytest.fixture(scope="module")
def tool():
    from shared_fixtures import built_tool
    return built_tool("render_chat_template")


def test_each_construct_renders_as_jinja2_does(tool, tmp_path):
    ours = render_all(tool, tmp_path, RENDERED)
    for name, source in RENDERED.items():
        want = reference_render(source, CONTEXT)
        assert "text" in want, f"{name}: jinja2 failed with {want['error']!r}: the case tests nothing"
        assert ours[name] == want, f"{name}: jinja2 rendered {want['text']!r}, we gave {ours[name]!r}"


def test_what_jinja2_refuses_is_an_error_here_too(tool, tmp_path):
    ours = render_all(tool, tmp_path, ERRORS)
    for name, source in ERRORS.items():
        want = reference_render(source, CONTEXT)
        assert "error" in want, f"{name}: jinja2 rendered {want['text']!r}: the case tests nothing"
        assert "error" in ours[name] and "chat template line" in ours[name]["error"], f"{name}: {ours[name]!r}"


def test_what_is_not_reproduced_is_refused_by_name(tool, tmp_path):
    ours = render_all(tool, tmp_path, {name: source for name, (source, _) in REFUSED.items()})
    for name, (source, construct) in REFUSED.items():
        assert "text" in reference_render(source, CONTEXT), name  # jinja2 renders it: an error here is a refusal
        assert "error" in ours[name] and construct in ours[name]["error"], f"{name}: {ours[name]!r}"


def test_recursion_without_end_stops_at_the_depth_limit(tool, tmp_path):
    ours = render_all(tool, tmp_path, UNBOUNDED)
    for name in UNBOUNDED:
        assert "error" in ours[name] and "nests more than 500 deep" in ours[name]["error"], f"{name}: {ours[name]!r}"


def test_recursion_within_the_limit_renders():
    """Twenty levels of call blocks and of a recursive loop are far below the limit."""
    deep_list = "[" * 20 + "1" + "]" * 20
    sources = {
        "deep_recursive_loop": f"{{% for x in {deep_list} recursive %}}{{% if x is iterable %}}"
                               "{{ loop.depth }}{{ loop(x) }}{% else %}{{ x }}{% endif %}{% endfor %}",
        "deep_call_blocks": "{% macro w() %}({{ caller() }}){% endmacro %}"
                            "{% macro r(n) %}{% if n > 0 %}{% call w() %}{{ r(n - 1) }}{% endcall %}{% endif %}{% endmacro %}{{ r(20) }}",
    }
    from shared_fixtures import built_tool
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        ours = render_all(built_tool("render_chat_template"), Path(tmp), sources)
    for name, source in sources.items():
        assert ours[name] == reference_render(source, CONTEXT), name

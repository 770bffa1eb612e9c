"""The corpus of JSON schemas that structured output is tested on: nested
objects, arrays, enums, anyOf, patterns, formats and bounded numbers, each
with a prompt that invites the model to fill it."""

from __future__ import annotations

NAME = {"type": "string", "minLength": 1, "maxLength": 24}

SCHEMAS: dict[str, dict] = {
    "person": {"type": "object", "properties": {"name": NAME, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
               "required": ["name", "age"], "additionalProperties": False},
    "flags": {"type": "object", "properties": {"done": {"type": "boolean"}, "note": {"type": ["string", "null"], "maxLength": 30}},
              "required": ["done", "note"]},
    "enum_color": {"type": "object", "properties": {"color": {"enum": ["red", "green", "blue"]}}, "required": ["color"]},
    "const_version": {"type": "object", "properties": {"version": {"const": 2}, "ok": {"type": "boolean"}},
                      "required": ["version", "ok"]},
    "int_bounds": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -5, "maximum": 5},
                                                    "y": {"type": "integer", "exclusiveMinimum": 10, "exclusiveMaximum": 20}},
                   "required": ["x", "y"]},
    "number_bounds": {"type": "object", "properties": {"p": {"type": "number", "minimum": 0, "maximum": 1}},
                      "required": ["p"]},
    "string_list": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 4},
    "int_list": {"type": "object", "properties": {"scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 100},
                                                             "minItems": 2, "maxItems": 5}},
                 "required": ["scores"]},
    "nested_address": {"type": "object", "properties": {
        "name": NAME,
        "address": {"type": "object", "properties": {"street": NAME, "city": NAME, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                    "required": ["street", "city", "zip"]}},
        "required": ["name", "address"]},
    "array_of_objects": {"type": "object", "properties": {"items": {"type": "array", "maxItems": 3, "items": {
        "type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                                         "qty": {"type": "integer", "minimum": 1, "maximum": 9}},
        "required": ["sku", "qty"]}}}, "required": ["items"]},
    "any_of": {"type": "object", "properties": {"value": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9},
                                                                      {"type": "string", "maxLength": 8}]}},
               "required": ["value"]},
    "one_of_shapes": {"anyOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0, "maximum": 10}},
         "required": ["kind", "r"], "additionalProperties": False},
        {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1, "maximum": 10}},
         "required": ["kind", "side"], "additionalProperties": False}]},
    "pattern_phone": {"type": "object", "properties": {"phone": {"type": "string", "pattern": "^\\+?[0-9]{3}-[0-9]{4}$"}},
                      "required": ["phone"]},
    "date_format": {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}, "required": ["when"]},
    "email_format": {"type": "object", "properties": {"email": {"type": "string", "format": "email"}},
                     "required": ["email"]},
    "optional_fields": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}, "b": NAME},
                        "required": ["a"]},
    "defs_ref": {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": -9, "maximum": 9},
                                                                       "y": {"type": "integer", "minimum": -9, "maximum": 9}},
                                     "required": ["x", "y"]}},
                 "type": "object", "properties": {"from": {"$ref": "#/$defs/point"}, "to": {"$ref": "#/$defs/point"}},
                 "required": ["from", "to"]},
    "tuple_prefix": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 10}, {"type": "integer", "minimum": 0, "maximum": 99}],
                     "items": False, "minItems": 2},
    "deep_nesting": {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {
        "c": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {"d": {"type": "boolean"}}, "required": ["d"]}}},
        "required": ["c"]}}, "required": ["b"]}}, "required": ["a"]},
    "unique_enum_list": {"type": "array", "items": {"enum": ["a", "b", "c", 1, 2, None]}, "minItems": 1, "maxItems": 3},
    "bounded_string_controls": {"type": "object", "properties": {"s": {"type": "string", "minLength": 3, "maxLength": 6}},
                                "required": ["s"]},
    "recipe": {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 40},
        "servings": {"type": "integer", "minimum": 1, "maximum": 12},
        "ingredients": {"type": "array", "minItems": 1, "maxItems": 4, "items": {"type": "object", "properties": {
            "name": NAME, "grams": {"type": "number", "minimum": 0, "maximum": 1000}}, "required": ["name", "grams"]}},
        "vegetarian": {"type": "boolean"}},
        "required": ["title", "servings", "ingredients", "vegetarian"], "additionalProperties": False},
}

PROMPT = "Answer with a JSON document that fits this description: {name}.\n"

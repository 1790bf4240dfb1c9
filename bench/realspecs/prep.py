#!/usr/bin/env python3
"""Prepares a temporary copy of a third-party spec for idemgen: marks every non-safe operation
that declares the Idempotency-Key header `x-idempotent: true`, makes the header required with
`minLength: 1, maxLength: 255`, and adds the error responses the rules require (as problem+json).

usage: prep.py IN.yaml OUT.json        (needs PyYAML; the copy is written as JSON)
Third-party specs are read from ../shared and never copied into the repository.
"""
import json
import sys

import yaml

KEY = "idempotency-key"
STATUSES = ["400", "401", "403", "409", "410", "422", "500", "503", "504"]
SAFE = {"get", "head", "options", "trace"}
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def resolve(spec, node):
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        target = spec
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node


def main(src, dst):
    with open(src) as f:
        spec = yaml.safe_load(f)
    spec.setdefault("components", {}).setdefault("schemas", {})["IdemgenProblem"] = {
        "type": "object",
        "properties": {"type": {"type": "string"}, "title": {"type": "string"},
                       "status": {"type": "integer"}, "detail": {"type": "string"}},
    }
    marked = 0
    for item in spec.get("paths", {}).values():
        for method, op in item.items():
            if method not in METHODS or method in SAFE or not isinstance(op, dict):
                continue
            params = list(item.get("parameters", [])) + list(op.get("parameters", []))
            keys = [resolve(spec, p) for p in params if resolve(spec, p).get("name", "").lower() == KEY]
            if not keys:
                continue
            for key in keys:
                key["required"] = True
                key["schema"] = {"type": "string", "minLength": 1, "maxLength": 255}
            op["x-idempotent"] = True
            responses = op.setdefault("responses", {})
            for status in STATUSES:
                if status not in responses:
                    responses[status] = {
                        "description": "A problem.",
                        "content": {"application/problem+json": {
                            "schema": {"$ref": "#/components/schemas/IdemgenProblem"}}},
                    }
            marked += 1
    with open(dst, "w") as f:
        json.dump(spec, f)
    print(f"{src}: {marked} operations marked x-idempotent", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""Reading a pipeline file: ``${VAR}`` and ``${VAR:-default}`` from the environment, and the line
of the file each problem is on."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from upsert_kafka_ops.errors import SpecError

PIPELINE_VERSION = 1


_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(text: str, env: Mapping[str, str]) -> str:
    """Replace ``${VAR}`` / ``${VAR:-default}``; an unset variable without a default is an error."""

    def sub(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        raise SpecError(
            "pipeline",
            f"uses ${{{name}}}, which is not set.",
            f"export {name}=... or write ${{{name}:-default}}.",
        )

    return _ENV.sub(sub, text)


def expand(data: Any, env: Mapping[str, str]) -> Any:
    if isinstance(data, str):
        return expand_env(data, env)
    if isinstance(data, dict):
        return {k: expand(v, env) for k, v in data.items()}
    if isinstance(data, list):
        return [expand(v, env) for v in data]
    return data


def with_lines(error: SpecError, root: Any) -> SpecError:
    """``error`` with each problem's line in the YAML file (``root``: the composed node tree), found by
    following the problem's path as far as the file has it: the key of a misspelled field, the
    mapping a missing field belongs to."""
    import yaml

    def line(field: str) -> int | None:
        node, found = root, None
        for part in field.split("."):
            if isinstance(node, yaml.MappingNode):
                pair = next(((k, v) for k, v in node.value if k.value == part), None)
                if pair is None:
                    break
                found, node = pair[0].start_mark.line + 1, pair[1]
            elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
                node = node.value[int(part)]
                found = node.start_mark.line + 1
            else:
                break
        return found

    return SpecError.of(
        [SpecError(p.field, p.message, p.fix, file_line=line(p.field)) for p in error.problems]
    )

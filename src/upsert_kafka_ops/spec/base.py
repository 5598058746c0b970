"""The base of every spec model: frozen, no unknown fields, and errors as :class:`SpecError`.

Pydantic reports problems as ``ValidationError``; a spec reports them as :class:`SpecError`, which
names the field (dotted path for nested specs) and, where there is one, the fix. A ``SpecError``
raised by a validator comes through unchanged.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticSerializationError
from typing_extensions import Self  # typing.Self from Python 3.11

from upsert_kafka_ops.errors import OldFieldWarning, SpecError

# Marks a SpecError whose field is a path inside the spec that converted it. Pydantic validates a
# nested spec through its ``__init__``, so the enclosing spec gets that SpecError back and prefixes
# its own location (``nullable`` -> ``columns.1.nullable``).
_RELATIVE = "_spec_relative_path"


def _relative(error: SpecError, path: str) -> SpecError:
    vars(error)[_RELATIVE] = path
    return error


def within(error: SpecError) -> SpecError:
    """``error``, raised by a nested spec's validator, with its field read as relative to where the
    spec sits (``path`` of a folder under ``checkpoint`` becomes ``checkpoint.path``)."""
    return _relative(error, error.field)


def _convert(exc: ValidationError, model: type[BaseModel], data: Any) -> SpecError:
    """Every problem of ``exc`` as one :class:`SpecError` (paths relative to ``model``): a nested
    spec's problems continue the path where it sits; a misspelled field is named with the field it
    probably meant, and that field's "missing" is then not reported twice."""
    problems: list[SpecError] = []
    meant: set[str] = set()
    errors = exc.errors()
    missing = {".".join(_clean(e["loc"], data)) for e in errors if e["type"] == "missing"}
    for err in errors:
        original = (err.get("ctx") or {}).get("error")
        path = ".".join(_clean(err["loc"], data, leaf=not isinstance(original, SpecError)))
        if isinstance(original, SpecError):
            for problem in original.problems:
                inner = vars(problem).get(_RELATIVE)
                if inner is not None:  # converted by a nested spec: its path continues ours
                    full = ".".join(p for p in (path, inner) if p)
                    problems.append(
                        _relative(SpecError(full or model.__name__, problem.message, problem.fix), full)
                    )
                elif not problem.field:  # raised by a nested spec that does not know its field name
                    problems.append(
                        _relative(SpecError(path or model.__name__, problem.message, problem.fix), path)
                    )
                else:  # raised by a validator under the name it chose (e.g. a Flink option's)
                    problems.append(problem)
            continue
        field = path or model.__name__
        message, fix = f"{err['msg']}.", None
        if err["type"] == "extra_forbidden":
            parent, _, name = path.rpartition(".")
            candidates = [f for f in model.model_fields if ".".join(p for p in (parent, f) if p) in missing]
            close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.7) or difflib.get_close_matches(
                name, list(model.model_fields), n=1, cutoff=0.7
            )
            if close:
                message, fix = f"unknown field; did you mean {close[0]!r}?", f"rename it to {close[0]!r}."
                meant.add(".".join(p for p in (parent, close[0]) if p))
            else:
                message = "unknown field."
                fix = f"remove it; {model.__name__} accepts: {', '.join(model.model_fields)}."
        elif err["type"] == "missing":
            message, fix = "required field, not given.", "set it."
        problems.append(_relative(SpecError(field, message, fix), path))
    problems = [p for p in problems if not (p.field in meant and p.message == "required field, not given.")]
    return SpecError.of(problems)  # each problem keeps its own relative path for an enclosing spec


def nested(error: SpecError, prefix: str) -> SpecError:
    """``error``, raised by a validator about the part ``prefix`` of its spec, with each problem's
    path continuing where that spec sits in an enclosing one (``table.ddl`` -> ``jobs.1.source.table.ddl``)."""
    out = error.under(prefix)
    for problem in out.problems:
        _relative(problem, problem.field)
    return out


def _clean(loc: tuple[Any, ...], data: Any, *, leaf: bool = True) -> list[str]:
    """``loc`` as the user wrote it: the tags pydantic adds for a union's member (``materialize``,
    ``function-after[...]``) are in no input, and leave the path. With ``leaf`` the last part may be
    absent from the input (a missing field's name)."""
    out: list[str] = []
    node = data
    for i, part in enumerate(loc):
        last = leaf and i == len(loc) - 1
        listed = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if listed or (isinstance(node, dict) and part in node):
            node = node[part]
        elif isinstance(node, dict | list) and not last:
            continue  # a union member's tag
        else:
            node = None
        out.append(str(part))
    return out


class SpecModel(BaseModel):
    """Frozen pydantic model whose validation errors are :class:`SpecError`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The SpecError is raised outside the ``except`` block: the ValidationError quotes the rejected
    # input (e.g. a literal password), and ``from None`` would still keep it as ``__context__``.
    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
            return
        except ValidationError as exc:
            error = _convert(exc, type(self), data)
        raise error

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            error = _convert(exc, cls, obj)
        raise error

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            error = _convert(exc, cls, None)
        raise error

    def model_dump_json(self, *args: Any, **kwargs: Any) -> str:
        try:
            return super().model_dump_json(*args, **kwargs)
        except PydanticSerializationError as exc:
            raise SpecError(type(self).__name__, f"cannot be serialized: {exc}") from None


def moved_into(data: Any, new: str, old: Mapping[str, str], who: str) -> Any:
    """``data`` (a model's input) with the fields named in ``old`` (old name -> key under ``new``)
    moved into the mapping ``new``, and an :class:`~upsert_kafka_ops.errors.OldFieldWarning` that
    names the new form; ``who`` says whose fields they are (``job 'users'``). When ``new`` is given
    too (a file half moved, or a written-back pipeline given an old field to change it), the old
    fields replace it, and the warning says so."""
    if not isinstance(data, Mapping) or not any(k in data for k in old):
        return data
    given = [k for k in old if k in data]
    out = {k: v for k, v in data.items() if k not in old}
    moved = {old[k]: data[k] for k in given if data[k] is not None}
    replaced = out.pop(new, None) is not None
    if moved:
        out[new] = moved
    form = ", ".join(f"{key}: {value}" for key, value in moved.items())
    also = f" They replace the '{new}' also given." if replaced else ""
    warnings.warn(
        f"{who}: {' and '.join(given)} {'is' if len(given) == 1 else 'are'} the old form of '{new}'; "
        f"write {new}: {{{form}}}.{also} The old form still reads and will be removed in a later release.",
        OldFieldWarning,
        stacklevel=2,
    )
    return out

"""The base of every spec model: frozen, no unknown fields, and errors as :class:`SpecError`.

Pydantic reports problems as ``ValidationError``; a spec reports them as :class:`SpecError`, which
names the field (dotted path for nested specs) and, where there is one, the fix. A ``SpecError``
raised by a validator comes through unchanged.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticSerializationError

from upsert_kafka_ops.errors import SpecError

# Marks a SpecError whose field is a path inside the spec that converted it. Pydantic validates a
# nested spec through its ``__init__``, so the enclosing spec gets that SpecError back and prefixes
# its own location (``nullable`` -> ``columns.1.nullable``).
_RELATIVE = "_spec_relative_path"


def _relative(error: SpecError, path: str) -> SpecError:
    vars(error)[_RELATIVE] = path
    return error


def _convert(exc: ValidationError, model: type[BaseModel]) -> SpecError:
    err = exc.errors()[0]
    original = (err.get("ctx") or {}).get("error")
    path = ".".join(str(p) for p in err["loc"])
    if isinstance(original, SpecError):
        inner = vars(original).get(_RELATIVE)
        if inner is not None:  # converted by a nested spec: its path continues ours
            full = ".".join(p for p in (path, inner) if p)
            return _relative(SpecError(full or model.__name__, original.message, original.fix), full)
        if not original.field:  # raised by a nested spec that does not know its field name
            return _relative(SpecError(path or model.__name__, original.message, original.fix), path)
        return original
    field = path or model.__name__
    fix = None
    if err["type"] == "extra_forbidden":
        fix = f"remove it; {model.__name__} accepts: {', '.join(model.model_fields)}."
    elif err["type"] == "missing":
        fix = "set it."
    extra = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
    return _relative(SpecError(field, f"{err['msg']}{extra}.", fix), path)


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
            error = _convert(exc, type(self))
        raise error

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            error = _convert(exc, cls)
        raise error

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            error = _convert(exc, cls)
        raise error

    def model_dump_json(self, *args: Any, **kwargs: Any) -> str:
        try:
            return super().model_dump_json(*args, **kwargs)
        except PydanticSerializationError as exc:
            raise SpecError(type(self).__name__, f"cannot be serialized: {exc}") from None

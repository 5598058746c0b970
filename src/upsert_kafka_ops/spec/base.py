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


def _convert(exc: ValidationError, model: type[BaseModel]) -> SpecError:
    err = exc.errors()[0]
    original = (err.get("ctx") or {}).get("error")
    path = ".".join(str(p) for p in err["loc"])
    if isinstance(original, SpecError):
        if not original.field:  # raised by a nested spec that does not know its field name
            return SpecError(path or model.__name__, original.message, original.fix)
        return original
    field = path or model.__name__
    fix = None
    if err["type"] == "extra_forbidden":
        fix = f"remove it; {model.__name__} accepts: {', '.join(model.model_fields)}."
    elif err["type"] == "missing":
        fix = "set it."
    extra = f" (and {exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
    return SpecError(field, f"{err['msg']}{extra}.", fix)


class SpecModel(BaseModel):
    """Frozen pydantic model whose validation errors are :class:`SpecError`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _convert(exc, type(self)) from None

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _convert(exc, cls) from None

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, *args: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate_json(json_data, *args, **kwargs)
        except ValidationError as exc:
            raise _convert(exc, cls) from None

    def model_dump_json(self, *args: Any, **kwargs: Any) -> str:
        try:
            return super().model_dump_json(*args, **kwargs)
        except PydanticSerializationError as exc:
            raise SpecError(type(self).__name__, f"cannot be serialized: {exc}") from None

"""Typed errors of upsert-kafka-ops.

Every error the package raises on purpose derives from :class:`UpsertKafkaOpsError`. Errors about
user input name the field or option at fault and say how to fix it.
"""

from __future__ import annotations

from collections.abc import Sequence


class UpsertKafkaOpsError(Exception):
    """Base class of every error raised by upsert-kafka-ops."""


class SpecError(UpsertKafkaOpsError, ValueError):
    """A table, connection or job specification is invalid.

    :param field: the option or field at fault, e.g. ``key.format``.
    :param message: what is wrong.
    :param fix: how to fix it.
    """

    def __init__(
        self,
        field: str,
        message: str,
        fix: str | None = None,
        *,
        file_line: int | None = None,
        problems: Sequence[SpecError] = (),
    ) -> None:
        self.field = field
        self.message = message
        self.fix = fix
        #: the line of the pipeline file where the field is, when the spec came from a file
        self.file_line = file_line
        #: every problem found in one validation (this error alone when it is the only one)
        self.problems: tuple[SpecError, ...] = tuple(problems) or (self,)
        if len(self.problems) > 1:
            text = f"{len(self.problems)} problems:" + "".join(f"\n  - {p._text()}" for p in self.problems)
        else:
            text = self._text()
        super().__init__(text)

    def _text(self) -> str:
        where = (
            f"{self.field} (line {self.file_line})"
            if self.file_line is not None and self.field
            else self.field
        )
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} Fix: {self.fix}" if self.fix else text

    def under(self, prefix: str) -> SpecError:
        """This error (every problem of it) for a spec found at ``prefix`` of an enclosing one."""
        return SpecError.of(
            [SpecError(".".join(x for x in (prefix, p.field) if x), p.message, p.fix) for p in self.problems]
        )

    @classmethod
    def of(cls, problems: Sequence[SpecError]) -> SpecError:
        """One error for ``problems``: the problem itself when there is one; else an error that lists
        them all and answers ``field``, ``message`` and ``fix`` for the first."""
        if len(problems) == 1:
            return problems[0]
        first = problems[0]
        return cls(first.field, first.message, first.fix, file_line=first.file_line, problems=problems)


class ToolchainError(UpsertKafkaOpsError):
    """A required tool (Java, Maven) or artifact (the JVM jars) is missing or unusable."""


class JarsError(ToolchainError):
    """The JVM artifacts could not be resolved, or were not resolved before use."""


class LocalServiceError(UpsertKafkaOpsError):
    """A local service (the embedded Kafka broker) failed to start, answer or stop."""


class KafkaConnectionError(UpsertKafkaOpsError):
    """The Kafka cluster could not be reached, or refused the credentials or the TLS handshake."""


class JobFailedError(UpsertKafkaOpsError):
    """A submitted job failed: spark-submit exited non-zero, timed out, or returned no result.

    The message carries the driver's own error (its last exception line) and the log tail, with
    the values of the runtime's environment variables redacted.

    :param message: what failed, with the driver's error and the log tail.
    :param driver_error: the driver's last exception line (``ValueError: ...``), when one was found.
    :param returncode: spark-submit's exit code (``None`` when it was killed on timeout).
    :param result: the run result the driver returned, when it returned one (``status`` ``failed``).
    """

    def __init__(
        self,
        message: str,
        *,
        driver_error: str | None = None,
        returncode: int | None = None,
        result: dict[str, object] | None = None,
    ) -> None:
        self.driver_error = driver_error
        self.returncode = returncode
        self.result = result
        super().__init__(message)


class OldFieldWarning(FutureWarning):
    """A pipeline file uses a field's old name: it still reads, and the message names the new form."""

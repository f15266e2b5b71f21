"""One error base class, specific subclasses; lower-level errors are mapped at the boundary."""
from __future__ import annotations


class EsmemError(Exception):
    """Base of every error esmem raises on purpose."""


class InvalidInput(EsmemError, ValueError):
    """A caller passed something esmem refuses (empty content, bad namespace, k out of range...)."""


class InvalidItem(InvalidInput):
    """One item of a batch is refused; `position` (0-based) lets a caller name its own line."""

    def __init__(self, position: int, reason: str):
        super().__init__(f"memory #{position + 1}: {reason}")
        self.position = position
        self.reason = reason


class AsyncOnly(EsmemError):
    """An engine over an async client was called outside an async store's call (esmem/index/bridge.py)."""


class Unsupported(EsmemError, NotImplementedError):
    """An operation esmem does not offer (e.g. a time-to-live on a LangGraph store item)."""


class ConfigError(EsmemError, ValueError):
    """A configuration value (half-life, kind policy, scorer) is invalid."""


class TemplateRenderError(EsmemError):
    """A Jinja2 source under templates/ or painless/ could not be rendered or parsed."""


class EngineError(EsmemError):
    """The engine answered with an error. `cause`: the client's own error, redacted (the exception
    chain is cut so that no secret of the connection can reach a traceback)."""

    def __init__(self, message: str, status: int | None = None, body: object = None):
        super().__init__(message)
        self.status = status
        self.body = body
        self.cause: str | None = None


class InvalidParameter(EngineError, InvalidInput):
    """HTTP 400: a stored template or script refused a call's parameter and named it (`param`),
    e.g. `w` = "NaN" - "param w must be a finite number in [0, 1], got [NaN]" (`reason`)."""

    def __init__(self, message: str, status: int | None = None, body: object = None, *, param: str, reason: str):
        super().__init__(message, status, body)
        self.param = param
        self.reason = reason


class EngineUnavailable(EngineError):
    """Nothing answers at the configured URL."""

    def __init__(self, message: str, status: int | None = None, body: object = None, *, reason: str = ""):
        super().__init__(message, status, body)
        self.reason = reason or message


class TLSFailure(EngineUnavailable):
    """The TLS handshake failed: untrusted CA, fingerprint mismatch, or TLS spoken to a plain port."""


class AuthenticationFailed(EngineError):
    """HTTP 401: credentials missing or rejected (the message never contains them)."""


class UnsupportedEngine(EngineError):
    """The engine answers but is not one esmem supports (ES 7, OpenSearch 1, ...)."""


class NotFound(EngineError):
    """A document, alias or script does not exist."""


class IdTaken(EsmemError):
    """A memory's id holds a document this write would not store (`fields` differ, or the caller cannot
    read it): another writer created it first, or an idempotency key was used for another memory."""

    def __init__(self, doc_id: str, fields: list[str]):
        what = (f"a different memory ({', '.join(fields)} differ)" if fields
                else "a document these credentials cannot read")
        super().__init__(f"memory id {doc_id} already holds {what}: another writer created it, or the "
                         "idempotency key was used for another memory; nothing of this batch was written")
        self.id = doc_id
        self.fields = fields


class VersionConflict(EngineError):
    """An optimistic-concurrency write lost the race (if_seq_no / if_primary_term)."""


class EsmemWarning(UserWarning):
    """Something esmem did not finish but the caller's result does not depend on (a reheat write-back)."""


class NotInstalled(EsmemError):
    """The index, scripts or templates are missing: run `esmem install`."""

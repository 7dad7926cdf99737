"""The project's own exceptions (agent and controller). HTTP status mapping lives in one place (mimesys.api.middleware's
errors_middleware); everything else raises these with a message that says what and where."""


class MimesysError(Exception):
    """Base class for every error the project raises on purpose."""

    http_status = 500


class ValidationError(MimesysError):
    """Input (plan, trace, config, request body) is malformed; the message names where."""

    http_status = 400


class PlanError(ValidationError):
    """A plan fails validation. Carries the offending window/thread/stressor when known."""

    def __init__(self, message, *, window=None, thread=None, stressor=None):
        where = []
        if window is not None:
            where.append(f"window {window}")
        if thread is not None:
            where.append(f"thread {thread}")
        if stressor is not None:
            where.append(f"stressor {stressor!r}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)
        self.window, self.thread, self.stressor = window, thread, stressor


class TraceError(ValidationError):
    """A trace file is malformed."""


class CatalogError(ValidationError):
    """The stressor catalog is malformed, or a plan names a catalog we do not have."""


class ConfigError(ValidationError):
    """Configuration is invalid; raised at load time, never later."""


class AuthError(MimesysError):
    http_status = 401


class PayloadTooLarge(ValidationError):
    http_status = 413


class UnsupportedMediaType(ValidationError):
    """A body in a format the API does not take (an HDF5 file where raw arrays belong)."""

    http_status = 415


class NotFound(MimesysError):
    http_status = 404


class Conflict(MimesysError):
    http_status = 409


class HostBusy(Conflict):
    """Another process (another agent, a local replay) holds this host's run lock. Transient:
    a run that fails with it says so (`reason = "host_busy"`), and clients wait and retry."""

    reason = "host_busy"


class InsufficientStorage(MimesysError):
    """Not enough free disk for what a request would write (HTTP 507)."""

    http_status = 507


class NotImplementedYet(MimesysError):
    """A feature that needs something not installed (e.g. no model for /v1/generate)."""

    http_status = 501


class RunnerError(MimesysError):
    """mimesys-runner failed to start or exited abnormally."""

"""The fleet's errors: what the client and the scheduler raise."""

from __future__ import annotations

from mimesys.errors import MimesysError


class FleetError(MimesysError):
    """The fleet cannot do what was asked (no agent left, mixed hosts, bad fleet file)."""


class AgentError(FleetError):
    """An agent answered with an error; `status` is the HTTP status (0 = no answer)."""

    def __init__(self, agent: str, message: str, status: int = 0, details: dict | None = None):
        super().__init__(f"agent {agent}: {message}")
        self.agent, self.status, self.details = agent, status, details or {}

    @property
    def retryable(self) -> bool:
        """True when another attempt (here or on another agent) may succeed; False when the
        request itself is wrong (a bad plan fails everywhere)."""
        return self.status == 0 or self.status in (401, 403, 409, 429) or self.status >= 500


class RunFailed(AgentError):
    """The run ended in state failed/cancelled on the agent."""


class AgentBusy(AgentError):
    """409: the agent is executing another run (`running` names it)."""

    def __init__(self, agent: str, message: str, running: str):
        super().__init__(agent, message, 409, {"running": running})
        self.running = running


class TLSIdentityError(AgentError):
    """The agent's certificate is not the pinned one, or does not verify: never retried."""

    @property
    def retryable(self) -> bool:
        return False

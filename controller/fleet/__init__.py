"""The fleet client: talk to mimesys agents over their HTTP API (docs/design.md "HTTP API").

    fleet = Fleet.from_file("fleet.toml")
    probes = await fleet.probe()                       # /v1/info of every agent, concurrently
    identity = fleet.check_hosts(probes)               # one hardware fingerprint, or FleetError
    report = await fleet.run_jobs(jobs, on_result)     # fan out; a failing agent's job moves on
    result = await fleet.clients[0].run(plan, RunOptions(repetitions=3))   # RunResult(trace, windows)

Fleet file (TOML; token and CA files are relative to the fleet file; a token file must lie in
the fleet file's directory or the operator's config directory, controller/tokens.py):

    allow_mixed_hosts = false          # optional: refuse agents whose hardware differs
    [[agent]]
    url = "https://10.0.0.5:7433"
    token_file = "tokens/host5"        # optional: see controller/tokens.py for the lookup order
    name = "host5"                     # optional, defaults to the URL
    tls_sha256 = "F8:64:39:..."        # optional: pin the agent's certificate (`mimesys-agent tls init`)
    ca_file = "ca/host5.crt"           # optional: or verify it (chain and name) against this CA
    allow_plain_http = false           # accepted for old files; grants nothing (--allow-plain-http does)

`tls_sha256` accepts exactly one certificate whatever signed it (self-signed agents);
`ca_file` accepts any certificate the CA signed for the URL's host name. One or the other
(an https:// URL with neither uses the system's CAs); both apply to https:// URLs only.
An http:// URL to a host that is not loopback would send the bearer token in clear text: the
client refuses it unless the command line says --allow-plain-http (then it warns once per agent).
An entry without token_file gets a token from the environment only when its URL is loopback
(controller/tokens.py).

Streaming: a run's windows arrive on WS /v1/runs/{id}/trace. The agent replays the run's
frames from the first on every connection, so after a dropped connection the client
reconnects and keeps the windows it has not seen yet (keyed by repetition and window);
windows the agent's bounded buffer no longer holds ("gap") are read from the recorded trace at the
end. Cancelling the coroutine that awaits `run()` cancels the run on the agent.

Reassignment: `run_jobs` gives each agent one job at a time. When an agent fails or
disconnects for good mid-run, its job goes back to the queue for another agent (the failed
run is cancelled where the agent is still reachable); a job's result is delivered once,
identified by the job id, however many agents ran it.

    errors.py      FleetError, AgentError (retryable or not), RunFailed, AgentBusy, TLSIdentityError
    config.py      the fleet file: FleetConfig, AgentSpec (token, TLS, client)
    connection.py  AgentConnection: token, HTTP session, bounded replies, TLS errors
    client.py      AgentClient: the agent's endpoints, a run started and followed to its end
    runstream.py   RunStream (a run's windows over the WebSocket, reconnecting), RunResult
    scheduler.py   Fleet: probe, check_hosts, run_jobs
    jobs.py        Job, JobsReport, the JobQueue one run_jobs call's workers share
    worker.py      AgentWorker (one agent's jobs, its failures and retirement), RetryRules
"""

from mimesys.hardware import VOLATILE_FINGERPRINT_KEYS, hardware_identity  # noqa: F401

from .client import AgentClient  # noqa: F401
from .config import AGENT_KEYS, AgentSpec, FleetConfig  # noqa: F401
from .connection import MAX_FRAME_BYTES, MAX_REPLY_BYTES, MAX_TRACE_BYTES  # noqa: F401
from .errors import AgentBusy, AgentError, FleetError, RunFailed, TLSIdentityError  # noqa: F401
from .runstream import RunResult, _window_from_frame  # noqa: F401
from .jobs import Job, JobsReport  # noqa: F401
from .scheduler import Fleet, Probe  # noqa: F401

"""The HTTP boundary both servers share (the agent's API, `mimesys serve`): auth, size and
error middleware (middleware.py), request bodies to plans and traces (bodies.py), the answers
(responses.py)."""

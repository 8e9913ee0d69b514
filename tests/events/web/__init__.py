"""The HTTP edge: access log, CSP, /healthz, middleware, request edges, slow clients, the login
throttle, Redis faults, error codes."""

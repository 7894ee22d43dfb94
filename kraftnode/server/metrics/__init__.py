"""Prometheus metrics: what is recorded as it happens (``recording``), what is read at
scrape time (``collector``), and the HTTP endpoint with /healthz and /readyz (``http``)."""

"""What watches a running study: per-participant QC, the live analysis panel and its stopping target, the circuit breaker, adaptive weights and the platform sync."""

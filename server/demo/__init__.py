"""The demo experiment (built offline at set-up) and simulated participants."""

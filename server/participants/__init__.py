"""One participant's way through a study: allocation, tokens, the trial store, resume, display record, the researcher's actions."""

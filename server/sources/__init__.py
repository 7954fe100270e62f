"""Where participants come from: the recruiters (Prolific's API and webhooks, MTurk legacy), SONA's credit grants."""

"""The authenticity screen: per-participant signals of whether a human visual system produced the
responses (stimulus dependence, agreement with candidate models, reaction-time shape, repeat
consistency, input provenance) and one verdict combining them (``verdict``)."""

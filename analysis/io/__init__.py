"""Readers for published data layouts (model-vs-human CSVs, Golan et al. ratings, R's MLDS frames)."""

"""Stimulus generation: MLDS blend sequences, controversial stimuli, natural image sets, manifests."""

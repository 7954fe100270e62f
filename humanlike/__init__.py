"""humanlike: online psychophysics experiments and humanlike-ness scores for models."""

__version__ = "0.1.0"

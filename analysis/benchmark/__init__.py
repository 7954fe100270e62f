"""A published study as a benchmark (Brain-Score style: stimuli, human data, a metric, a ceiling):
the package's definition file (:mod:`.package`) and the scorer that gives a model the study's own
scores (:mod:`.score`), by the study's own analysis functions with the study's seeds."""

from humanlike.analysis.benchmark.package import (
    DEFINITION,
    METRIC,
    NOISE_CEILING,
    Package,
    read_package,
    write_definition,
)
from humanlike.analysis.benchmark.score import BenchmarkScores, score_package

__all__ = ["DEFINITION", "METRIC", "NOISE_CEILING", "BenchmarkScores", "Package",
           "read_package", "score_package", "write_definition"]

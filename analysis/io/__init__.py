"""Reading data: our export (exclusions applied once, :mod:`.export`) and published layouts
(model-vs-human CSVs, Golan et al. ratings, R's MLDS frames)."""

from humanlike.analysis.io.export import Export as Export
from humanlike.analysis.io.export import read_export as read_export
from humanlike.analysis.io.golan import read_golan as read_golan
from humanlike.analysis.io.model_vs_human import read_model_vs_human as read_model_vs_human

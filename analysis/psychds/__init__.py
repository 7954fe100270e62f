"""Psych-DS datasets (https://psych-ds.github.io/): writing ``dataset_description.json`` and the
keyword-named data files (:mod:`.dataset`), and checking a folder against the published schema
(:mod:`.validate`)."""

from humanlike.analysis.psychds.dataset import (
    NEVER_PUBLISHED,
    datafile_name,
    dataset_description,
    keyword_value,
    write_datafile,
)
from humanlike.analysis.psychds.validate import Issue, Validation, validate_dataset

__all__ = ["NEVER_PUBLISHED", "Issue", "Validation", "datafile_name", "dataset_description",
           "keyword_value", "validate_dataset", "write_datafile"]

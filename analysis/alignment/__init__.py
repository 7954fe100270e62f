"""Alignment profile: the behavioural model-human metrics of issue 42, per model, regime and observer.

Accuracy difference, observed and error consistency, accuracy distance (Brain-Score), shape bias
and shape match (Geirhos et al. 2019; Hermann et al. 2020), conditional error consistency (Kato &
He 2026), I2n (Rajalingham et al. 2018), each per human-difficulty regime (Xu et al. 2026), with
bootstrap intervals over one shared set of resamples (``profile``); per observer, double-pass
internal noise and individual noise ceilings (``double_pass``), and the split of each observer's
variance into shared, individual and noise parts (``variance_split``); odd-one-out triplets scored
as Brain-Score's hebart2023 (``odd_one_out``).
"""

from humanlike.analysis.alignment.accuracy import accuracy_difference as accuracy_difference
from humanlike.analysis.alignment.accuracy import accuracy_distance as accuracy_distance
from humanlike.analysis.alignment.conditional_ec import baseline_correct as baseline_correct
from humanlike.analysis.alignment.conditional_ec import baseline_mask as baseline_mask
from humanlike.analysis.alignment.conditional_ec import (
    cue_conflict_shape_image as cue_conflict_shape_image,
)
from humanlike.analysis.alignment.conditional_ec import same_image as same_image
from humanlike.analysis.alignment.data import AlignmentData as AlignmentData
from humanlike.analysis.alignment.data import alignment_data as alignment_data
from humanlike.analysis.alignment.double_pass import DoublePassResult as DoublePassResult
from humanlike.analysis.alignment.double_pass import double_pass as double_pass
from humanlike.analysis.alignment.double_pass import (
    double_pass_by_observer as double_pass_by_observer,
)
from humanlike.analysis.alignment.i2n import I2nConsistency as I2nConsistency
from humanlike.analysis.alignment.i2n import i2n as i2n
from humanlike.analysis.alignment.i2n import i2n_consistency as i2n_consistency
from humanlike.analysis.alignment.odd_one_out import OddOneOutResult as OddOneOutResult
from humanlike.analysis.alignment.odd_one_out import embedding_choices as embedding_choices
from humanlike.analysis.alignment.odd_one_out import odd_one_out_score as odd_one_out_score
from humanlike.analysis.alignment.odd_one_out import triplet_counts as triplet_counts
from humanlike.analysis.alignment.profile import METRICS as METRICS
from humanlike.analysis.alignment.profile import AlignmentProfile as AlignmentProfile
from humanlike.analysis.alignment.profile import alignment_profile as alignment_profile
from humanlike.analysis.alignment.profile import experiment_profile as experiment_profile
from humanlike.analysis.alignment.regimes import DEFAULT_EDGES as DEFAULT_EDGES
from humanlike.analysis.alignment.regimes import difficulty_regimes as difficulty_regimes
from humanlike.analysis.alignment.shape_bias import (
    cue_conflict_categories as cue_conflict_categories,
)
from humanlike.analysis.alignment.shape_bias import shape_bias as shape_bias
from humanlike.analysis.alignment.variance_split import VarianceSplit as VarianceSplit
from humanlike.analysis.alignment.variance_split import variance_split as variance_split

"""Multi-label probability ratings: cleaning, QC, reliability, noise ceilings, model scores (Golan et al. 2020).

The public API of the subpackage; figures live in ``plots`` (imported lazily: matplotlib).
"""

from humanlike.analysis.exclusions import (
    ExclusionRules as ExclusionRules,
)
from humanlike.analysis.exclusions import (
    as_rules as as_rules,
)
from humanlike.analysis.ratings.analysis import (
    RatingsAnalysis as RatingsAnalysis,
)
from humanlike.analysis.ratings.analysis import (
    analyze_ratings as analyze_ratings,
)
from humanlike.analysis.ratings.bootstrap import (
    RatingsBootstrap as RatingsBootstrap,
)
from humanlike.analysis.ratings.bootstrap import (
    bootstrap_ratings as bootstrap_ratings,
)
from humanlike.analysis.ratings.bootstrap import (
    bootstrap_statistics as bootstrap_statistics,
)
from humanlike.analysis.ratings.calibration import (
    RatingCalibration as RatingCalibration,
)
from humanlike.analysis.ratings.calibration import (
    clipped_logit as clipped_logit,
)
from humanlike.analysis.ratings.ceilings import (
    NegativeMeanR as NegativeMeanR,
)
from humanlike.analysis.ratings.ceilings import (
    NoiseCeiling as NoiseCeiling,
)
from humanlike.analysis.ratings.ceilings import (
    UpperBound as UpperBound,
)
from humanlike.analysis.ratings.ceilings import (
    best_mse_prediction as best_mse_prediction,
)
from humanlike.analysis.ratings.ceilings import (
    consensus_prediction as consensus_prediction,
)
from humanlike.analysis.ratings.ceilings import (
    leave_one_out_calibration as leave_one_out_calibration,
)
from humanlike.analysis.ratings.ceilings import (
    leave_one_out_predictions as leave_one_out_predictions,
)
from humanlike.analysis.ratings.ceilings import (
    masked_mse as masked_mse,
)
from humanlike.analysis.ratings.ceilings import (
    masked_r as masked_r,
)
from humanlike.analysis.ratings.ceilings import (
    noise_ceiling as noise_ceiling,
)
from humanlike.analysis.ratings.ceilings import (
    rating_matrix as rating_matrix,
)
from humanlike.analysis.ratings.ceilings import (
    upper_bound_closed_form as upper_bound_closed_form,
)
from humanlike.analysis.ratings.ceilings import (
    upper_bound_optimized as upper_bound_optimized,
)
from humanlike.analysis.ratings.data import (
    RatingArray as RatingArray,
)
from humanlike.analysis.ratings.data import (
    attach_stimuli as attach_stimuli,
)
from humanlike.analysis.ratings.data import (
    clean_ratings as clean_ratings,
)
from humanlike.analysis.ratings.data import (
    load_participants as load_participants,
)
from humanlike.analysis.ratings.data import (
    load_ratings as load_ratings,
)
from humanlike.analysis.ratings.data import (
    participant_qc as participant_qc,
)
from humanlike.analysis.ratings.data import (
    rating_array as rating_array,
)
from humanlike.analysis.ratings.data import (
    stimulus_table as stimulus_table,
)
from humanlike.analysis.ratings.data import (
    trial_table as trial_table,
)
from humanlike.analysis.ratings.data import (
    validate_ratings as validate_ratings,
)
from humanlike.analysis.ratings.pearson import (
    mse_from_sums as mse_from_sums,
)
from humanlike.analysis.ratings.pearson import (
    pearson_from_sums as pearson_from_sums,
)
from humanlike.analysis.ratings.reliability import (
    SplitHalfReliability as SplitHalfReliability,
)
from humanlike.analysis.ratings.reliability import (
    repeat_pairs as repeat_pairs,
)
from humanlike.analysis.ratings.reliability import (
    repeat_reliability as repeat_reliability,
)
from humanlike.analysis.ratings.reliability import (
    spearman_brown as spearman_brown,
)
from humanlike.analysis.ratings.reliability import (
    split_half_reliability as split_half_reliability,
)
from humanlike.analysis.ratings.scores import (
    ModelPredictions as ModelPredictions,
)
from humanlike.analysis.ratings.scores import (
    ModelScores as ModelScores,
)
from humanlike.analysis.ratings.scores import (
    calibrate_predictions as calibrate_predictions,
)
from humanlike.analysis.ratings.scores import (
    load_model_responses as load_model_responses,
)
from humanlike.analysis.ratings.scores import (
    model_predictions as model_predictions,
)
from humanlike.analysis.ratings.scores import (
    model_scores as model_scores,
)
from humanlike.analysis.ratings.scores import (
    participant_scores as participant_scores,
)
from humanlike.analysis.ratings.scores import (
    validate_model_responses as validate_model_responses,
)
from humanlike.analysis.ratings.simulation import (
    SimulatedRatings as SimulatedRatings,
)
from humanlike.analysis.ratings.simulation import (
    simulate_rating_experiment as simulate_rating_experiment,
)

"""Maximum Likelihood Difference Scaling (Knoblauch & Maloney 2008) and the Psychophysical-Score.

The public API of the subpackage; figures live in ``plots`` (imported lazily: matplotlib).
"""

from humanlike.analysis.mlds.batch import (
    ScaleFits as ScaleFits,
)
from humanlike.analysis.mlds.batch import (
    bootstrap_coefs as bootstrap_coefs,
)
from humanlike.analysis.mlds.batch import (
    fit_many as fit_many,
)
from humanlike.analysis.mlds.batch import (
    scales_from_coef as scales_from_coef,
)
from humanlike.analysis.mlds.data import (
    CanonicalTrials as CanonicalTrials,
)
from humanlike.analysis.mlds.data import (
    TrialCounts as TrialCounts,
)
from humanlike.analysis.mlds.data import (
    canonical_trials as canonical_trials,
)
from humanlike.analysis.mlds.data import (
    check_design as check_design,
)
from humanlike.analysis.mlds.data import (
    check_levels_present as check_levels_present,
)
from humanlike.analysis.mlds.data import (
    count_trials as count_trials,
)
from humanlike.analysis.mlds.data import (
    decode_rows as decode_rows,
)
from humanlike.analysis.mlds.data import (
    design_matrix as design_matrix,
)
from humanlike.analysis.mlds.data import (
    infer_n_levels as infer_n_levels,
)
from humanlike.analysis.mlds.data import (
    level_columns as level_columns,
)
from humanlike.analysis.mlds.data import (
    row_codes as row_codes,
)
from humanlike.analysis.mlds.diagnostics import (
    RunsTest as RunsTest,
)
from humanlike.analysis.mlds.diagnostics import (
    SixPointTest as SixPointTest,
)
from humanlike.analysis.mlds.diagnostics import (
    runs_test as runs_test,
)
from humanlike.analysis.mlds.diagnostics import (
    six_point_conditions as six_point_conditions,
)
from humanlike.analysis.mlds.diagnostics import (
    six_point_test as six_point_test,
)
from humanlike.analysis.mlds.estimator import (
    MLDS as MLDS,
)
from humanlike.analysis.mlds.estimator import (
    MLDSBootstrap as MLDSBootstrap,
)
from humanlike.analysis.mlds.probit_irls import (
    ProbitBatchFit as ProbitBatchFit,
)
from humanlike.analysis.mlds.probit_irls import (
    fit_probit_batch as fit_probit_batch,
)
from humanlike.analysis.mlds.probit_irls import (
    probit_loglik as probit_loglik,
)
from humanlike.analysis.mlds.probit_irls import (
    score_and_information as score_and_information,
)
from humanlike.analysis.mlds.psychophysical import (
    PsychophysicalScore as PsychophysicalScore,
)
from humanlike.analysis.mlds.psychophysical import (
    psychophysical_score as psychophysical_score,
)
from humanlike.analysis.mlds.psychophysical import (
    random_observer_skewness as random_observer_skewness,
)
from humanlike.analysis.mlds.psychophysical import (
    random_observer_triads as random_observer_triads,
)
from humanlike.analysis.mlds.psychophysical import (
    scale_skewness as scale_skewness,
)
from humanlike.analysis.mlds.psychophysical import (
    score_table as score_table,
)
from humanlike.analysis.mlds.psychophysical import (
    skewness_frame as skewness_frame,
)
from humanlike.analysis.mlds.psychophysical import (
    skewness_spread as skewness_spread,
)
from humanlike.analysis.mlds.psychophysical import (
    skewness_variance as skewness_variance,
)
from humanlike.analysis.mlds.simulate import (
    decision_means as decision_means,
)
from humanlike.analysis.mlds.simulate import (
    response_probability as response_probability,
)
from humanlike.analysis.mlds.simulate import (
    simulate_responses as simulate_responses,
)

"""Error consistency: Cohen's kappa on trial-by-trial correctness (Geirhos et al. 2020; Klein et al. 2025).

The public API of the subpackage; figures live in ``plots`` (imported lazily: matplotlib).
"""

from humanlike.analysis.error_consistency.bounds import (
    accuracy_range as accuracy_range,
)
from humanlike.analysis.error_consistency.bounds import (
    c_obs_bounds as c_obs_bounds,
)
from humanlike.analysis.error_consistency.bounds import (
    c_obs_max as c_obs_max,
)
from humanlike.analysis.error_consistency.bounds import (
    c_obs_min as c_obs_min,
)
from humanlike.analysis.error_consistency.bounds import (
    kappa_bounds as kappa_bounds,
)
from humanlike.analysis.error_consistency.bounds import (
    kappa_max as kappa_max,
)
from humanlike.analysis.error_consistency.bounds import (
    kappa_min as kappa_min,
)
from humanlike.analysis.error_consistency.bounds import (
    null_band as null_band,
)
from humanlike.analysis.error_consistency.bounds import (
    pair_null_band as pair_null_band,
)
from humanlike.analysis.error_consistency.copy_model import (
    CopyModelParams as CopyModelParams,
)
from humanlike.analysis.error_consistency.copy_model import (
    SimulatedKappa as SimulatedKappa,
)
from humanlike.analysis.error_consistency.copy_model import (
    copy_model_params as copy_model_params,
)
from humanlike.analysis.error_consistency.copy_model import (
    joint_table as joint_table,
)
from humanlike.analysis.error_consistency.copy_model import (
    kappa_standard_error as kappa_standard_error,
)
from humanlike.analysis.error_consistency.copy_model import (
    simulate_copy_model as simulate_copy_model,
)
from humanlike.analysis.error_consistency.copy_model import (
    simulated_ci_halfwidth as simulated_ci_halfwidth,
)
from humanlike.analysis.error_consistency.copy_model import (
    simulated_kappa as simulated_kappa,
)
from humanlike.analysis.error_consistency.copy_model import (
    trials_needed as trials_needed,
)
from humanlike.analysis.error_consistency.kappa import (
    as_correctness as as_correctness,
)
from humanlike.analysis.error_consistency.kappa import (
    check_degenerate as check_degenerate,
)
from humanlike.analysis.error_consistency.kappa import (
    expected_consistency as expected_consistency,
)
from humanlike.analysis.error_consistency.kappa import (
    kappa as kappa,
)
from humanlike.analysis.error_consistency.kappa import (
    kappa_from_rates as kappa_from_rates,
)
from humanlike.analysis.error_consistency.matrix import (
    ConditionTable as ConditionTable,
)
from humanlike.analysis.error_consistency.matrix import (
    KappaMatrix as KappaMatrix,
)
from humanlike.analysis.error_consistency.matrix import (
    condition_tables as condition_tables,
)
from humanlike.analysis.error_consistency.matrix import (
    kappa_matrix as kappa_matrix,
)
from humanlike.analysis.error_consistency.pairwise import (
    ErrorConsistencyResult as ErrorConsistencyResult,
)
from humanlike.analysis.error_consistency.pairwise import (
    error_consistency as error_consistency,
)
from humanlike.analysis.error_consistency.significance import (
    EqualECTestResult as EqualECTestResult,
)
from humanlike.analysis.error_consistency.significance import (
    IndependenceTestResult as IndependenceTestResult,
)
from humanlike.analysis.error_consistency.significance import (
    compare_models as compare_models,
)
from humanlike.analysis.error_consistency.significance import (
    equal_ec_test as equal_ec_test,
)
from humanlike.analysis.error_consistency.significance import (
    independence_pvalues as independence_pvalues,
)
from humanlike.analysis.error_consistency.significance import (
    independence_test as independence_test,
)

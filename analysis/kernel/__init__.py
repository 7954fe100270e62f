"""Kernel analysis of representations (Montavon, Braun & Mueller 2011).

The public API of the subpackage; figures live in ``plots`` (imported lazily: matplotlib). The
readers of feature and label files (``inputs``, pandas) load on first use, so the numerical core
stays as light as a plain numpy/scipy import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from humanlike.analysis.kernel.curves import (
    KAResult as KAResult,
)
from humanlike.analysis.kernel.curves import (
    best_width_curves as best_width_curves,
)
from humanlike.analysis.kernel.curves import (
    distance_matrix as distance_matrix,
)
from humanlike.analysis.kernel.curves import (
    ka_loss as ka_loss,
)
from humanlike.analysis.kernel.curves import (
    kernel_analysis as kernel_analysis,
)
from humanlike.analysis.kernel.curves import (
    one_vs_all_targets as one_vs_all_targets,
)
from humanlike.analysis.kernel.curves import (
    result_from_loss as result_from_loss,
)
from humanlike.analysis.kernel.curves import (
    squared_distances as squared_distances,
)
from humanlike.analysis.kernel.curves import (
    width_quantiles as width_quantiles,
)
from humanlike.analysis.kernel.protocol import (
    KAProtocolResult as KAProtocolResult,
)
from humanlike.analysis.kernel.protocol import (
    balanced_subsets as balanced_subsets,
)
from humanlike.analysis.kernel.protocol import (
    kernel_analysis_protocol as kernel_analysis_protocol,
)

if TYPE_CHECKING:
    from humanlike.analysis.kernel.inputs import (
        FeatureTable as FeatureTable,
    )
    from humanlike.analysis.kernel.inputs import (
        attach_labels as attach_labels,
    )
    from humanlike.analysis.kernel.inputs import (
        normalise_sites as normalise_sites,
    )
    from humanlike.analysis.kernel.inputs import (
        read_features as read_features,
    )
    from humanlike.analysis.kernel.inputs import (
        read_labels as read_labels,
    )
    from humanlike.analysis.kernel.inputs import (
        read_neural as read_neural,
    )

_LAZY = {name: "inputs" for name in (
    "FeatureTable", "attach_labels", "normalise_sites", "read_features", "read_labels", "read_neural",
)}


def __getattr__(name: str) -> Any:
    """The file readers, imported on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

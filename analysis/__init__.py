"""Pure analysis functions over numpy arrays and tidy pandas frames (no Flask, no database).

The interval type and the multiple-comparison correction shared by every analysis live here;
each method has its subpackage (``error_consistency``, ``ratings``, ``mlds``, ``kernel``, ``io``).
"""

from humanlike.analysis._resampling import (
    ConfidenceInterval as ConfidenceInterval,
)
from humanlike.analysis._resampling import (
    MultipleTestResult as MultipleTestResult,
)
from humanlike.analysis._resampling import (
    holm_sidak as holm_sidak,
)

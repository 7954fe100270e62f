"""Benchmark: Cadieu et al. (2013) kernel-analysis protocol at the size of their image set.

1,960 images x 4,096 features, 7 classes (280 images each), 3 kernel widths, 10 subsets of 80%
(1,568 images: thirty 1,568 x 1,568 eigendecompositions). Prints one JSON line
``{"seconds": ..., "peak_mb": ...}``: wall time of ``kernel_analysis_protocol`` and the process's
peak resident memory. Details (AUC, CPU time summed over threads) go to stderr.
"""

from __future__ import annotations

import json
import resource
import sys
import time

import numpy as np

from humanlike.analysis.kernel.protocol import kernel_analysis_protocol


def features(n_per_class: int = 280, n_classes: int = 7, dim: int = 4096, seed: int = 0):
    """Clustered, partly nonlinear features: class means on a 20-d manifold plus rectified noise."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_classes), n_per_class)
    latent = (
        rng.standard_normal((labels.size, 20)) + 0.4 * rng.standard_normal((n_classes, 20))[labels]
    )
    mixing = rng.standard_normal((20, dim)) / np.sqrt(20)
    X = np.maximum(latent @ mixing, 0.0) + 0.5 * rng.standard_normal((labels.size, dim))
    return X.astype(np.float32), labels


def main() -> None:
    X, labels = features()
    start, cpu_start = time.perf_counter(), time.process_time()
    result = kernel_analysis_protocol(X, labels, n_subsets=10, quantiles=(0.1, 0.5, 0.9))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"KA-AUC {result.auc_mean:.4f} ({result.auc_sd:.4f}) over {result.curves.shape[0]} "
        f"subsets of {result.subsets.shape[1]} images; CPU time {cpu:.1f} s (all threads)",
        file=sys.stderr,
    )
    print(json.dumps({"seconds": round(seconds, 2), "peak_mb": round(peak_mb, 1)}))


if __name__ == "__main__":
    main()

"""``--device`` and precision choices, and batches sized to the device."""

from __future__ import annotations

import pytest
import torch

from humanlike.stimuli.device import batch_size_for, check_precision, resolve_device


def test_auto_picks_a_gpu_only_when_torch_sees_one():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("CPU") == torch.device("cpu")


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cuda:-1", ""])
def test_malformed_devices_are_named(spec):
    if spec == "":
        assert resolve_device(spec) == resolve_device("auto")
        return
    with pytest.raises(ValueError, match=f"device {spec!r}: expected auto, cpu, cuda or cuda:N"):
        resolve_device(spec)


def test_float16_needs_a_gpu_and_unknown_precisions_are_named():
    cpu = torch.device("cpu")
    assert check_precision("bfloat16", cpu) == "bfloat16"
    with pytest.raises(ValueError, match="float16' needs a GPU"):
        check_precision("float16", cpu)
    with pytest.raises(ValueError, match="precision 'half'"):
        check_precision("half", cpu)


def test_cpu_batches_synthesis_whole_and_forward_passes_by_input_size():
    cpu = torch.device("cpu")
    assert batch_size_for(cpu, (3, 224, 224), 90, gradients=True) == 90
    assert batch_size_for(cpu, (3, 224, 224), 1000) == 2**25 // (3 * 224 * 224) == 222
    assert batch_size_for(cpu, (1, 28, 28), 1000) == 1000
    assert batch_size_for(cpu, (1, 28, 28), 1000, requested=7) == 7
    with pytest.raises(ValueError, match="at least 1"):
        batch_size_for(cpu, (1, 28, 28), 10, requested=0)

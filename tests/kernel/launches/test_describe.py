"""Bits, not values: NaN equals NaN, in every dtype the recorder sees, fp8 included."""

import pytest
import torch

from swizzleperf.kernel.launches import describe


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float32,
                                   torch.int8, torch.bool])
def test_a_poisoned_tensor_has_the_same_bits_as_its_copy(dtype):
    t = torch.zeros(16, dtype=dtype)
    describe.poison(t)
    assert describe.same_bits(t, t.clone())
    if dtype != torch.bool:
        other = t.clone()
        other[3] = 0
        assert not describe.same_bits(t, other)

"""A lost device raises DeviceLostError (a RuntimeError) from every use, and the session still closes cleanly,
giving its memory back."""

import numpy as np
import pytest

import wgcompute


@pytest.mark.parametrize("adapter", ["vulkan", "gl"])
def test_a_lost_device_raises_device_lost_and_still_closes(adapter):
    session = wgcompute.Session(adapter=adapter)
    x = session.tensor(np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal((x + 1.0).numpy(), np.arange(8) + 1.0)
    session._s._simulate_device_loss()
    with pytest.raises(wgcompute.DeviceLostError) as raised:
        (x * 2.0).numpy()
    assert isinstance(raised.value, RuntimeError)
    assert "lost" in str(raised.value)
    with pytest.raises(wgcompute.DeviceLostError):
        session.zeros((4,)).numpy()
    report = session.close()
    assert report.device_lost
    with pytest.raises(wgcompute.SessionClosedError):
        x.numpy()

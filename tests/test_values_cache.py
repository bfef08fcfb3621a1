"""The host-values cache: the least recently used set goes first, by count and by bytes."""
import numpy as np

from cudnn_rnn.engine.values import ValuesCache


def _set(nbytes: int) -> dict:
    return {"image": np.zeros(nbytes, dtype=np.uint8), "io": {"x": np.zeros(1)}}


def test_the_cache_keeps_at_most_its_size_and_its_bytes_in_all():
    cache = ValuesCache(size=3, max_bytes=1000)
    for k in "abc":
        cache.put(k, _set(300))
    assert all(cache.get(k) is not None for k in "abc")  # 3 x 308 bytes fit
    cache.put("d", _set(300))  # over 1000 bytes in all: the least recently used (a) goes
    assert cache.get("a") is None and cache.get("d") is not None
    cache.put("big", _set(2000))  # larger than the whole cache: not kept, nothing evicted
    assert cache.get("big") is None and cache.get("b") is not None
    assert cache.hits == 5 and cache.misses == 2

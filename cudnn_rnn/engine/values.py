"""The values a flow puts on the device: inputs and weights, drawn once and shared.

``init="sample"`` initialises like NVIDIA's sample (data 1.0, each matrix 1/its element
count, biases 1.0); ``init="random"`` draws data from U(-1, 1) and weights from
U(-1/√hidden, 1/√hidden) with ``seed``, in a fixed order over the weight entries cuDNN
reports. Every value is rounded to the data type, and its float64 copy kept (the weights
on the GPU where there is one, drawn there too): the reference then runs on exactly what
the device holds.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from cudnn_rnn.engine import dtypes
from cudnn_rnn.engine.gpu import held_bytes
from cudnn_rnn.engine.config import RNNConfig

INITS = ("sample", "random")


def values_key(cfg: RNNConfig, entries: list, init: str, seed: int) -> tuple:
    """What determines every input and weight value a flow draws: the data type (rounding),
    the seed and init, the structural axes and the weight entries cuDNN reported, in order.
    Math type, math precision and algorithm are not in it."""
    c = cfg
    layout = tuple((e.pseudo_layer, e.lin_id, e.kind, e.dims) for e in entries)
    return (c.data_type, c.mode, c.seq_length, c.num_layers, c.hidden_size, c.mini_batch,
            c.input_size, c.proj_size, c.direction, c.input_mode, c.bias_mode, c.seq_lengths,
            init, seed, layout)


class ValuesCache:
    """A flow's drawn inputs and weights (the weights on the GPU where the flow has one),
    kept for the next flow that draws the same values.

    Cells that differ only in math type, math precision or algorithm (a tuner's
    candidates) draw identical values: generating them once per shape and data type
    instead of per candidate saves seconds per cell at DeepBench sizes. At most ``size``
    sets and ``max_bytes`` in all are kept, the least recently used going first.
    """

    def __init__(self, size: int = 2, max_bytes: int = 8 << 30):
        self.size = size
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()
        self.hits = self.misses = 0

    @staticmethod
    def key(cfg: RNNConfig, entries: list, init: str, seed: int, weight_space: int) -> tuple:
        """:func:`values_key`, plus where each entry sits in the weight space (the image's
        bytes)."""
        return values_key(cfg, entries, init, seed) + (weight_space,
                                                       tuple(e.offset for e in entries))

    def get(self, key):
        if key in self._items:
            self.hits += 1
            self._items.move_to_end(key)
            return self._items[key][0]
        self.misses += 1
        return None

    def on_device(self) -> int:
        """Bytes of GPU memory the kept sets hold (their weights, where drawn on a GPU), as
        CuPy's memory pool counts them."""
        return held_bytes(a for v, _n in self._items.values() for a in _arrays(v))

    def put(self, key, value: dict) -> None:
        nbytes = sum(a.nbytes for a in _arrays(value))
        if nbytes > self.max_bytes:
            return
        self._items[key] = (value, nbytes)
        while len(self._items) > self.size or sum(n for _, n in self._items.values()) > self.max_bytes:
            self._items.popitem(last=False)


def _arrays(value: dict) -> list:
    return [a for part in value.values() for a in
            (part.values() if isinstance(part, dict) else [part])]


def generator(seed: int, xp=np):
    """The random generator of ``xp``: numpy's PCG64 on the host, CuPy's (cuRAND XORWOW)
    on the GPU, so a GPU's weights are drawn where they are used. The two draw different
    values for one seed, and CuPy's also differ between GPUs with different numbers of
    SMs (element j comes from state j mod 2048·SMs); each flow keeps what it drew, so the
    reference runs on exactly what the device holds either way, but errors recorded under
    one seed compare only on the same GPU model."""
    return xp.random.default_rng(seed)


def uniform(shape, scale: float, rng) -> np.ndarray:
    """U(-scale, scale), drawn in float32 (every supported type is at most that fine
    except DOUBLE, for which these are still valid float64 values)."""
    return rng.random(shape, dtype=np.float32) * np.float32(2 * scale) - np.float32(scale)


def draw(cfg: RNNConfig, entries: list, weight_space: int, init: str, seed: int,
         xp=np) -> dict:
    """Everything a flow uploads: ``image`` (the weight space's bytes), ``io_bits`` (x, hx,
    dy, dhy, and cx, dcy for LSTM, in the data type's bits), and their float64 values,
    ``weights`` by (pseudo_layer, lin_id, kind) and ``io`` by name. With ``xp`` = cupy
    the weights (the bulk) are drawn, encoded and kept on the GPU; the inputs stay on the
    host, where the layouts are arranged."""
    if init not in INITS:
        raise ValueError(f"init must be 'sample' or 'random', got {init!r}")
    image, weights = _draw_weights(cfg, entries, weight_space, init, seed, xp)
    io_bits, io = _draw_io(cfg, init, seed)
    return {"image": image, "io_bits": io_bits, "weights": weights, "io": io}


def _draw_weights(cfg, entries, weight_space, init, seed, xp=np) -> tuple:
    rng = generator(seed, xp)
    scale = 1.0 / np.sqrt(cfg.hidden_size)
    drawn = {}
    for e in entries:
        if init == "sample":
            values = xp.full(e.shape, 1.0 / e.size if e.kind == "matrix" else 1.0)
        else:
            values = uniform(e.shape, scale, rng)
        drawn[(e.pseudo_layer, e.lin_id, e.kind)] = values
    return image(cfg, entries, weight_space, drawn, xp)


def image(cfg, entries, weight_space: int, arrays: dict, xp=np) -> tuple:
    """(the weight space's bytes, the float64 values they hold by key) for ``arrays`` by
    (pseudo_layer, lin_id, kind): each entry rounded to the data type at its offset;
    bytes between entries are 0. KeyError or ValueError if an entry is missing or misshapen."""
    dt = cfg.data_type
    item = dtypes.itemsize(dt)
    out = xp.zeros(weight_space, dtype=xp.uint8)
    host = {}
    for e in entries:
        key = (e.pseudo_layer, e.lin_id, e.kind)
        values = xp.asarray(arrays[key])
        if values.shape != e.shape:
            raise ValueError(f"weight {key} has shape {values.shape}, cuDNN's is {e.shape}")
        bits = dtypes.encode(values, dt)
        out[e.offset:e.offset + e.size * item] = bits.reshape(-1).view(xp.uint8)
        host[key] = dtypes.decode(bits, dt)
    return out, host


def place(flow, arrays: dict, io: dict) -> None:
    """Replace what a flow drew with given values: the weights ``arrays`` by (pseudo_layer,
    lin_id, kind) (as :func:`image` takes them) and the inputs ``io`` (x, hx, and cx for
    LSTM; (T, B, features) and (layers x dirs, B, features) float64). Rounded to the data
    type; the flow's float64 copies are what the device then holds. The flow must have run
    its ``weights`` stage; given inputs need equal-length, sequence-major buffers (which are
    (T, B, features) in memory then); the weights alone (``io`` empty) go into any layout."""
    cfg, cp = flow.cfg, flow.cp
    if io and (not cfg.equal_lengths or flow.batch_major("x")):
        raise ValueError("given values need equal lengths and a sequence-major layout")
    with flow.stream:
        img, host = image(cfg, flow.entries, flow.sizes["weight_space"], arrays, cp)
        flow.buf["w"][:img.size] = img
    flow.drawn["weights"] = host
    for name, values in io.items():
        bits = np.ascontiguousarray(dtypes.encode(np.asarray(values), cfg.data_type))
        raw = bits.reshape(-1).view(np.uint8)
        if raw.size != flow.buf[name].size:
            raise ValueError(f"{name} has {np.shape(values)}, the flow's holds {raw.size} bytes")
        flow.buf[name].set(raw, stream=flow.stream)
        flow.drawn[name] = dtypes.decode(bits, cfg.data_type)


def _draw_io(cfg, init, seed) -> tuple[dict, dict]:
    dt = cfg.data_type
    rng = np.random.default_rng(seed + 1)
    shapes = {"x": cfg.x_shape(), "hx": cfg.h_shape(), "dy": cfg.y_shape(), "dhy": cfg.h_shape()}
    if cfg.has_cell_state:
        shapes.update(cx=cfg.c_shape(), dcy=cfg.c_shape())
    bits, host = {}, {}
    for name, shape in shapes.items():
        values = np.ones(shape) if init == "sample" else uniform(shape, 1.0, rng)
        bits[name] = dtypes.encode(values, dt)
        host[name] = dtypes.decode(bits[name], dt)
    return bits, host

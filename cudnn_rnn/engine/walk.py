"""The network's walk: which pseudo-layers there are, the order of their steps, and what
feeds each layer. One home for it; the float64 reference, the 8-bit engine's twin, the
GEMM engine and the persistent kernel's schedule all walk the network through here.

cuDNN's stacked RNN: layer ``l`` has ``dirs`` directions, each a *pseudo-layer* with index
``l * dirs + d`` (the index of its weights, of hx/cx and of hy/cy). Direction 0 runs
time 0..T-1, direction 1 runs T-1..0 (its *step* s is time T-1-s). Layer 0 reads x; layer
``l > 0`` reads the outputs of every direction of layer ``l - 1`` at the same *time*,
joined along the feature axis (direction 0's first). The last layer's joined outputs are y.
"""
from __future__ import annotations

from dataclasses import dataclass

from cudnn_rnn.engine.config import RNNConfig


@dataclass(frozen=True)
class PseudoLayer:
    """One direction of one layer."""
    layer: int
    direction: int
    index: int  # layer * dirs + direction

    def time(self, step: int, seq_length: int) -> int:
        """The time step ``step`` of this direction processes."""
        return step if self.direction == 0 else seq_length - 1 - step

    def step(self, time: int, seq_length: int) -> int:
        """The step at which this direction processes ``time`` (the inverse of :meth:`time`)."""
        return self.time(time, seq_length)

    def in_order(self, seq):
        """A (T, ...) sequence in this direction's processing order (and back again:
        reversing is its own inverse)."""
        return seq if self.direction == 0 else seq[::-1]


def pseudo_layers(cfg: RNNConfig) -> list[PseudoLayer]:
    """Every pseudo-layer, by index."""
    return [PseudoLayer(layer, d, layer * cfg.dirs + d)
            for layer in range(cfg.num_layers) for d in range(cfg.dirs)]


def layers(cfg: RNNConfig) -> list[list[PseudoLayer]]:
    """The pseudo-layers of each layer, bottom first; a layer's feed its successor."""
    every = pseudo_layers(cfg)
    return [every[layer * cfg.dirs:(layer + 1) * cfg.dirs] for layer in range(cfg.num_layers)]


def feeders(cfg: RNNConfig, p: PseudoLayer) -> list[PseudoLayer]:
    """The pseudo-layers whose outputs, joined, are ``p``'s input (none for layer 0)."""
    return [] if p.layer == 0 else layers(cfg)[p.layer - 1]


def joined(outputs: list, xp):
    """The next layer's input (or y): each direction's (T, B, n) outputs, in time order,
    joined along the last axis, direction 0 first."""
    return outputs[0] if len(outputs) == 1 else xp.concatenate(outputs, axis=-1)


def layer_input_size(cfg: RNNConfig, layer: int) -> int:
    """Features of layer ``layer``'s input: the input size, then proj x dirs."""
    return cfg.input_size if layer == 0 else cfg.proj_size * cfg.dirs

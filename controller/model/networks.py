"""The denoiser's networks: plain nn.Modules, equivariant to permuting threads.

Shapes: B batch, M stressors, K threads, N metrics, F per-core metric families,
G host-wide metrics, D hidden width.

A window's context is encoded once (ContextEncoder) and reused at every denoising step
(Denoiser). Each thread is a token built from its own column of the compositions and
its own core's metrics; one global token holds the host-wide metrics. Every per-thread
map shares its weights and threads only meet through a mean over threads, so permuting
threads (with their cores' metrics) permutes the output the same way (Deep Sets,
Zaheer et al. 2017, with a global token). The paper's model (a U-Net with MLP trace and
state encoders, §6) treats the composition as an image; this one does not depend on the
thread order, which the data does not define.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .layout import Z_CLIP, MetricLayout, Normalizer


def _mlp(d_in: int, d_hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.SiLU(), nn.Linear(d_hidden, d_out))


class MetricInput(nn.Module):
    """Raw metrics [B, N] (NaN = missing) -> (per-thread [B, K, 2F], global [B, 2G]):
    normalized values (missing -> 0, the training mean) and a presence mask per metric."""

    def __init__(self, layout: MetricLayout, normalizer: Normalizer):
        super().__init__()
        self.register_buffer("log_mask", torch.tensor([t == "log1p" for t in normalizer.transform]))
        # not in the state dict: it comes from the normalizer (older checkpoints have none)
        self.register_buffer("floor", torch.tensor(normalizer.floors, dtype=torch.float32), persistent=False)
        self.register_buffer("mean", torch.tensor(normalizer.mean, dtype=torch.float32))
        self.register_buffer("std", torch.tensor(normalizer.std, dtype=torch.float32))
        # [F, K]; F = 0 when the metrics have no per-core family (only host-wide ones)
        core = torch.tensor(layout.core_index, dtype=torch.long).reshape(len(layout.core_families), -1) \
            if layout.core_families else torch.zeros((0, 0), dtype=torch.long)
        self.register_buffer("core_index", core)
        self.register_buffer("global_index", torch.tensor(layout.global_index, dtype=torch.long))  # [G]

    @property
    def per_thread_dim(self) -> int:
        return 2 * self.core_index.shape[0]

    @property
    def global_dim(self) -> int:
        return 2 * self.global_index.shape[0]

    def forward(self, raw: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        present = ~torch.isnan(raw)
        x = torch.where(present, raw, torch.zeros_like(raw))
        x = torch.where(self.log_mask, torch.log1p(torch.clamp(x, min=0.0) / self.floor), x)
        z = torch.clamp((x - self.mean) / self.std, -Z_CLIP, Z_CLIP)
        z = torch.where(present, z, torch.zeros_like(z))
        zm = torch.stack([z, present.to(z.dtype)], dim=-1)                 # [B, N, 2]
        B, K = raw.shape[0], self.core_index.shape[1]
        per_thread = None                                                     # no per-core family
        if self.core_index.shape[0]:
            per_thread = zm[:, self.core_index.reshape(-1)]                   # [B, F*K, 2]
            per_thread = per_thread.reshape(B, -1, K, 2).permute(0, 2, 1, 3).reshape(B, K, -1)
        glob = zm[:, self.global_index].reshape(B, -1)                        # [B, 2G]
        return per_thread, glob


class ContextEncoder(nn.Module):
    """c = g(o_t, a_{t-1}, o_{t-1}) as per-thread and global tokens.

    forward(target_obs [B, N], prev_obs [B, N], prev_action [B, M, K], keep [B])
      -> thread_ctx [B, K, D], global_ctx [B, D]
    keep = 0 replaces the whole context by learned null tokens (classifier-free guidance).
    use_prev_action / use_prev_obs = False builds the ablations without state.
    """

    def __init__(self, layout: MetricLayout, normalizer: Normalizer, stressors: int, hidden: int,
                 use_prev_action: bool = True, use_prev_obs: bool = True):
        super().__init__()
        self.metrics = MetricInput(layout, normalizer)
        self.use_prev_action, self.use_prev_obs = use_prev_action, use_prev_obs
        n_obs = 2 if use_prev_obs else 1
        d_thread = n_obs * self.metrics.per_thread_dim + (stressors if use_prev_action else 0)
        d_global = n_obs * self.metrics.global_dim + 1   # + 1: a constant, so G = 0 still works
        self.thread_mlp = _mlp(max(d_thread, 1), hidden, hidden)
        self.global_mlp = _mlp(d_global + hidden, hidden, hidden)
        self.null_thread = nn.Parameter(torch.zeros(hidden))
        self.null_global = nn.Parameter(torch.zeros(hidden))

    def forward(self, target_obs, prev_obs, prev_action, keep):
        t_thread, t_glob = self.metrics(target_obs)
        parts_t, parts_g = [t_thread], [t_glob, torch.ones_like(t_glob[:, :1])]
        if self.use_prev_obs:
            p_thread, p_glob = self.metrics(prev_obs)
            parts_t.append(p_thread)
            parts_g.append(p_glob)
        parts_t = [p for p in parts_t if p is not None]
        if self.use_prev_action:
            parts_t.append(prev_action.transpose(1, 2))                       # [B, K, M]
        if sum(p.shape[-1] for p in parts_t) == 0:
            parts_t = [torch.ones_like(prev_action[:, :1, :]).transpose(1, 2)]
        h = self.thread_mlp(torch.cat(parts_t, dim=-1))                        # [B, K, D]
        g = self.global_mlp(torch.cat(parts_g + [h.mean(dim=1)], dim=-1))     # [B, D]
        keep = keep.to(h.dtype)
        h = keep[:, None, None] * h + (1 - keep)[:, None, None] * self.null_thread
        g = keep[:, None] * g + (1 - keep)[:, None] * self.null_global
        return h, g


class EquivariantBlock(nn.Module):
    """h_k += MLP([h_k, mean_j h_j, g]);  g += MLP([g, mean_j h_j]).  h [B, K, D], g [B, D].

    The thread MLP's first layer is split by input (W_h h_k + W_p pooled + W_g g): the same
    function as a linear layer over the concatenation, without materializing K copies of
    the pooled and global vectors (fewer, cheaper ONNX nodes). The last block does not
    update g (nothing reads it after)."""

    def __init__(self, hidden: int, update_global: bool = True):
        super().__init__()
        self.norm_h = nn.LayerNorm(hidden)
        self.norm_g = nn.LayerNorm(hidden)
        self.thread_in = nn.Linear(hidden, 2 * hidden)
        self.shared_in = nn.Linear(2 * hidden, 2 * hidden, bias=False)   # [pooled, g] -> same for every thread
        self.thread_out = nn.Linear(2 * hidden, hidden)
        self.global_mlp = _mlp(2 * hidden, 2 * hidden, hidden) if update_global else None

    def forward(self, h, g):
        hn, gn = self.norm_h(h), self.norm_g(g)
        shared = torch.cat([hn.mean(dim=1), gn], dim=-1)                    # [B, 2D]
        z = self.thread_in(hn) + self.shared_in(shared)[:, None]           # [B, K, 2D]
        h = h + self.thread_out(F.silu(z))
        if self.global_mlp is not None:
            g = g + self.global_mlp(shared)
        return h, g


def sinusoidal_table(timesteps: int, dim: int) -> torch.Tensor:
    """[T, dim] transformer-style sinusoidal features of t (Vaswani et al. 2017)."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float64) / half)
    args = torch.arange(timesteps, dtype=torch.float64)[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1).float()


class Denoiser(nn.Module):
    """ε_θ(x_t, t, c).

    forward(x_t [B, M, K], t [B] int64, thread_ctx [B, K, D], global_ctx [B, D]) -> ε [B, M, K]

    prediction = "x0": the network's head predicts the clean latent x̂_0 (`head`), and forward
    returns the ε it implies, ε = (x_t − √ᾱ_t x̂_0) / √(1 − ᾱ_t), so the samplers, the ONNX graph
    and alignment see one interface. A teacher's plan is one answer per context, not a spread:
    predicting it directly spends the network on the answer rather than on the noise (and a
    few DDIM steps land on it), where ε-prediction at low noise leaves x̂_0 to a division.
    """

    def __init__(self, stressors: int, hidden: int, blocks: int, train_timesteps: int,
                 prediction: str = "eps", alpha_bar: torch.Tensor | None = None):
        super().__init__()
        self.prediction = prediction
        if prediction == "x0":
            self.register_buffer("sqrt_ab", alpha_bar.sqrt().float(), persistent=False)
            self.register_buffer("sqrt_1m_ab", (1 - alpha_bar).sqrt().float(), persistent=False)
        self.register_buffer("time_table", sinusoidal_table(train_timesteps, hidden))
        self.time_mlp = _mlp(hidden, hidden, hidden)
        self.x_in = nn.Linear(stressors, hidden)
        self.blocks = nn.ModuleList(EquivariantBlock(hidden, update_global=i < blocks - 1) for i in range(blocks))
        self.out_norm = nn.LayerNorm(hidden)
        self.out = nn.Linear(hidden, stressors)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, x_t, t, thread_ctx, global_ctx):
        out = self.head(x_t, t, thread_ctx, global_ctx)
        if self.prediction == "x0":
            return (x_t - self.sqrt_ab[t][:, None, None] * out) / self.sqrt_1m_ab[t][:, None, None]
        return out

    def head(self, x_t, t, thread_ctx, global_ctx):
        """The network's own output: ε̂ or x̂_0 (self.prediction)."""
        temb = self.time_mlp(self.time_table[t])                      # [B, D]
        h = self.x_in(x_t.transpose(1, 2)) + thread_ctx + temb[:, None]   # [B, K, D]
        g = global_ctx + temb
        for block in self.blocks:
            h, g = block(h, g)
        return self.out(self.out_norm(h)).transpose(1, 2)             # [B, M, K]

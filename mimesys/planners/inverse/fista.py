"""The inner solve of the inverse planner: accelerated projected gradient (FISTA, Beck &
Teboulle 2009) on the linearized problem, and the exact projection of each thread's column
onto {v ∈ [0, 1]^M : Σ v ≤ 1} it takes at every step."""

from __future__ import annotations

import math

import numpy as np


def project_columns(x: np.ndarray) -> np.ndarray:
    """[..., M, K] -> the Euclidean projection of every thread's column onto
    {v ∈ [0, 1]^M : Σ v ≤ 1}."""
    return project_columns_scaled(x, np.ones(x.shape[-2:]))


def project_columns_scaled(x: np.ndarray, inv_w: np.ndarray) -> np.ndarray:
    """[..., M, K] -> every thread's column projected onto {v ∈ [0, 1]^M : Σ v ≤ 1} in the norm
    Σ_m w_m (v_m − x_m)², w = 1 / inv_w [M, K] > 0 (the preconditioned step's own metric).
    `project_threads_scaled` on the transposed layout."""
    v = np.ascontiguousarray(np.moveaxis(x, -2, -1))
    return np.moveaxis(project_threads_scaled(v, np.ascontiguousarray(np.asarray(inv_w).T)), -1, -2)


def project_threads_scaled(v: np.ndarray, inv_w: np.ndarray) -> np.ndarray:
    """[..., K, M] (each thread's stressors contiguous, as the solver keeps them) -> each row
    projected onto {u ∈ [0, 1]^M : Σ u ≤ 1} in the norm Σ_m w_m (u_m − v_m)², w = 1 / inv_w
    [K, M] > 0: u_m = clip(v_m − θ·inv_w_m, 0, 1) with θ ≥ 0 the smallest that fits the window.
    θ is exact from the breakpoints v_m / inv_w_m, sorted, as in the Euclidean case (which is
    inv_w = 1); the upper bound 1 only binds where a row holds a single entry above 1."""
    shape = v.shape
    K, M = inv_w.shape
    rows = v.reshape(-1, M)
    box = np.clip(rows, 0.0, 1.0)
    over = np.flatnonzero(box.sum(axis=1) > 1.0)
    if over.size:
        w, q = rows[over], inv_w[over % K]                         # row = (window, thread)
        order = np.argsort(-(w / q), axis=1)
        ws, qs = np.take_along_axis(w, order, 1), np.take_along_axis(q, order, 1)
        theta_j = np.cumsum(ws, axis=1)
        theta_j -= 1.0
        theta_j /= np.cumsum(qs, axis=1)
        cond = ws - theta_j * qs > 0
        rho = M - 1 - np.argmax(cond[:, ::-1], axis=1)
        theta = np.maximum(theta_j[np.arange(len(w)), rho], 0.0)
        box[over] = np.clip(w - theta[:, None] * q, 0.0, 1.0)
    return box.reshape(shape)


def jacobi_steps(G: np.ndarray, w: np.ndarray, phi: np.ndarray, lam_c: np.ndarray) -> np.ndarray:
    """float32 [KM]: a diagonal (Jacobi) step per stressor and thread. Errors on the target's own
    range make the gains differ by orders of magnitude between stressors (a disk writer against
    100 MB/s, a compute kernel against a busy fraction), and one global 1/L step would leave the
    small ones unmoved. d_i = the Gershgorin bound on row i of the fit's Hessian
    2 G diag(max_t w φ) Gᵀ plus the change term's, so the scaled problem's curvature is ≤ 1;
    the projection is taken in the same metric (project_threads_scaled). G [KM, N]."""
    wmax = np.max(w * phi, axis=0, initial=0.0)
    Gw = np.abs(G) * np.sqrt(wmax)                                  # [KM, N]
    curv = 2.0 * (Gw @ Gw.sum(axis=0)) + 8.0 * float(lam_c.max(initial=0.0)) + 1e-9   # [KM]
    return (1.0 / curv).astype(np.float32)


def fista(a0, G, resid_target, phi, mask, lam_c, iterations, lam_i, allowed=None, left=None):
    """Projected accelerated gradient on the linearized problem (φ fixed). a0 [T, M, K]: the
    start; G [M, K, N]: the gains in the fit's scale; mask [T, N]: the metric weights (0 where the
    target has no value); lam_c [T]: the change weight coupling t with t−1; lam_i [M]: the idle
    cost per unit of each stressor; allowed [T, M]: the stressors each window may use (the rest
    stay at 0, exactly: they are zeroed before each projection, which keeps it the projection onto
    that face); left [M, K]: a fixed window before a0's first (a chunk's neighbour), or None."""
    T, M, K = a0.shape
    # The loop keeps the plan as [T, K, M]: each thread's stressors contiguous, so the
    # projection (a sort per thread and window) reads rows in place instead of a copy each step.
    lam_i = np.tile(lam_i, K)                                       # [KM]
    G = np.ascontiguousarray(G.transpose(1, 0, 2)).reshape(K * M, -1)   # [KM, N]
    w = mask * phi
    inv_d_km = jacobi_steps(G, w, phi, lam_c).reshape(K, M)
    # the loop in float32: the answer is a fraction of a window good to far below 1e-4, and
    # half the memory traffic is what a long trace's solve is bound by
    f32 = np.float32
    G32, Gt32 = G.astype(f32), np.ascontiguousarray(G.T, dtype=f32)
    phi32, w32, res32 = phi.astype(f32), w.astype(f32), resid_target.astype(f32)
    lam_i32, lam_c32 = lam_i.astype(f32), (2.0 * lam_c).astype(f32)[:, None, None]
    keep = allowed[:, None, :].astype(f32) if allowed is not None else None
    left32 = None if left is None else np.ascontiguousarray(np.asarray(left).T, f32)
    x = np.ascontiguousarray(a0.transpose(0, 2, 1), dtype=f32)     # [T, K, M]
    z, t_k = x.copy(), 1.0
    d = np.zeros_like(z)
    for _ in range(iterations):
        r = phi32 * (z.reshape(T, -1) @ G32) - res32                # [T, N]
        r *= w32
        grad = ((2.0 * r) @ Gt32 + lam_i32).reshape(T, K, M)
        np.subtract(z[1:], z[:-1], out=d[1:])
        if left32 is not None:
            np.subtract(z[0], left32, out=d[0])                    # the chunk's fixed neighbour
        d *= lam_c32                                               # 2 λ_t (a_t − a_{t−1})
        grad += d
        grad[:-1] -= d[1:]
        grad *= -inv_d_km
        grad += z                                                  # z − D⁻¹ ∇
        if keep is not None:
            grad *= keep
        x_new = project_threads_scaled(grad, inv_d_km)
        t_new = (1.0 + math.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0
        z = x_new + f32((t_k - 1.0) / t_new) * (x_new - x)
        x, t_k = x_new, t_new
    return x.transpose(0, 2, 1).astype(np.float64)

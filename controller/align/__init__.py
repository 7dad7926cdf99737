"""Execution-driven alignment: DDPO fine-tuning of the diffusion policy against live agents.

The pretrained model is treated as a policy whose actions are DDIM denoising steps
(η > 0, so each step is a Gaussian with a log-probability). Rollouts generate plans for
real trace segments window by window (state-aware), agents execute them, and the reward
is the negative weighted L1 between executed and target metrics in the model's
normalized metric space. See the MIMESYS paper §4.3 and Black et al., "Training
Diffusion Models with Reinforcement Learning" (DDPO).

Modules: config (defaults + presets), reward, advantages (per-window running statistics),
ppo (clipped surrogate + KL), policy (the model room's DiffusionPolicy under the η > 0
sampler; its DDIM log-prob step lives in controller/model/noise_schedule.py), targets (traces,
segments), rollout (sequential segments, batched across agents), executors (fleet or
simulated host), loop (resumable SAMPLING/TRAINING epochs), checkpoint, curves (reward-curve
PNG), session (files in, aligned model file out), heldout (before/after DTW).
"""

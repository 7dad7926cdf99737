"""Fitting and scoring the forward model of a host (the model itself, and what agents run, live
in mimesys/forward): the solo profile (profile.py), the learned correction (correction.py),
the fit (fit.py) and the held-out score (score.py)."""
